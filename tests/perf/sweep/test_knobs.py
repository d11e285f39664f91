"""The knobs users ask for, without a server: ranges and steps for each axis, the queue policy,
and pins for a model or a composing model — parsed once, carried by ``SweepGrid``."""

from __future__ import annotations

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.sweep_models import plain_config
from tritonkit.errors import ConfigError
from tritonkit.perf.sweep import (
    Pin,
    SweepGrid,
    Variant,
    apply_variant,
    parse_instances,
    parse_max_batch_sizes,
    parse_pin,
    parse_queue_sizes,
    parse_queue_timeouts,
    parse_windows,
    pinned_config,
    variant_grid,
)

BASE = plain_config()


def test_ranges_count_by_one_by_a_step_or_by_a_factor_and_mix_with_lists() -> None:
    assert parse_instances("1:4") == [1, 2, 3, 4]
    assert parse_instances("1,3:5,8") == [1, 3, 4, 5, 8]
    assert parse_max_batch_sizes("1:64:x2") == [1, 2, 4, 8, 16, 32, 64]
    assert parse_max_batch_sizes("8:32:8") == [8, 16, 24, 32]
    assert parse_max_batch_sizes("1:10:x2") == [1, 2, 4, 8]  # the stop is kept only when a step reaches it
    assert parse_windows("0:20ms:5ms,off") == [0, 5000, 10000, 15000, 20000, None]
    assert parse_windows("500us:2ms:x2") == [500, 1000, 2000]
    assert parse_queue_sizes("0,8:32:x2") == [0, 8, 16, 32]
    assert parse_queue_timeouts("off,10ms:50ms:20ms") == [0, 10000, 30000, 50000]


@pytest.mark.parametrize(("text", "parse", "message"), [
    ("4:1", parse_instances, "--instances: the range '4:1' ends before it starts"),
    ("1:8:0", parse_instances, "needs a step above zero"),
    ("1:8:x1", parse_max_batch_sizes, "must be a number above 1"),
    ("0:8:x2", parse_max_batch_sizes, "cannot start at 0"),
    ("1:100000", parse_max_batch_sizes, "more than 1024 values"),
    ("two", parse_instances, "--instances: 'two' is not a whole number"),
    ("0:20ms", parse_windows, "--batch-window: the range '0:20ms' needs a step"),
    ("0:20", parse_windows, "no unit"),
    ("-1", parse_queue_sizes, "max queue size must be >= 0"),
])
def test_a_range_that_cannot_be_read_names_the_option_and_what_is_wrong(text: str, parse: object,
                                                                         message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        parse(text)  # type: ignore[operator]


def test_the_queue_policy_is_swept_on_the_dynamic_batcher_and_written_as_reject() -> None:
    grid = variant_grid(BASE, max_batch_sizes=[4], queue_sizes=[0, 32, 64], queue_timeouts_us=[0, 10_000])
    ids = [v.id for v in grid]
    # A queue of 32 and no timeout is the model's own policy: that point is the default, not repeated.
    assert ids == ["default", "i1-b4-w5ms-q0-t0", "i1-b4-w5ms-q0-t10ms", "i1-b4-w5ms-q32-t0", "i1-b4-w5ms-q32-t10ms",
                   "i1-b4-w5ms-q64-t0", "i1-b4-w5ms-q64-t10ms"]
    config = apply_variant(BASE, Variant(1, 4, 5000, max_queue_size=64, queue_timeout_us=10_000))
    policy = config.dynamic_batching.default_queue_policy
    assert (policy.max_queue_size, policy.default_timeout_microseconds) == (64, 10_000)
    assert policy.timeout_action == mc.ModelQueuePolicy.REJECT
    assert apply_variant(BASE, Variant(1, 4, 5000)).dynamic_batching.default_queue_policy.max_queue_size == 32
    assert Variant.from_dict(grid[2].to_dict()) == grid[2]
    assert "queue ≤ 0" not in grid[1].describe() and "queue unbounded" in grid[1].describe()


def test_a_pin_holds_one_knob_for_every_model_or_for_one() -> None:
    assert parse_pin("instances=2") == Pin(None, "instances", 2)
    assert parse_pin("preprocessing.max-batch-size=8") == Pin("preprocessing", "max_batch_size", 8)
    assert parse_pin("a.b.window=5ms") == Pin("a.b", "batch_window", 5000)
    assert parse_pin("preferred=4+8") == Pin(None, "preferred_batch", (4, 8))
    assert str(parse_pin("m.queue_timeout=20ms")) == "m.queue_timeout=20ms"
    for bad in ("instances", "colour=red", ".instances=2", "instances=1,2"):
        with pytest.raises(ConfigError, match="--pin"):
            parse_pin(bad)
    with pytest.raises(ConfigError, match="'colour' is not a knob tritonkit sweeps") as err:
        parse_pin("m.colour=red")
    assert "instances, max_batch_size" in (err.value.hint or "")
    grid = SweepGrid(max_batch_sizes=[4, 8], pins=(Pin("a", "instances", 2), Pin(None, "batch_window", 0)))
    assert [(v.instances, v.window_us) for v in grid.variants(BASE, "a")[1:]] == [(2, 0), (2, 0)]
    assert {v.instances for v in grid.variants(BASE, "b")} == {1}  # b keeps its own count
    assert grid.composing_pins(["b"]) == {"a": [Pin("a", "instances", 2)]}


def test_the_command_lines_texts_build_the_grid_each_read_as_its_option_reads_it() -> None:
    grid = SweepGrid.from_text(("m.instances=2",), instances="1:2", max_batch_size="1:8:x2", batch_window="0,off",
                               preferred_batch=None, max_queue_size="", queue_timeout="off,10ms")
    assert grid == SweepGrid(instances=[1, 2], max_batch_sizes=[1, 2, 4, 8], windows_us=[0, None],
                             queue_timeouts_us=[0, 10000], pins=(Pin("m", "instances", 2),))
    with pytest.raises(ConfigError, match="--instances: 'two' is not a whole number"):
        SweepGrid.from_text(instances="two")


def test_pins_that_contradict_an_axis_or_each_other_are_refused_before_anything_runs() -> None:
    with pytest.raises(ConfigError, match="--pin instances=2 and --instances both set instances"):
        SweepGrid(instances=[1, 2], pins=(Pin(None, "instances", 2),)).validate(["m"])
    with pytest.raises(ConfigError, match="hold the same knob at two values"):
        SweepGrid(pins=(Pin("a", "instances", 2), Pin("a", "instances", 3))).validate(["a", "b"])
    SweepGrid(instances=[1, 2], pins=(Pin("a", "instances", 2),)).validate(["a", "b"])  # a joint sweep: fine


def test_a_composing_model_is_loaded_with_its_pins_and_everything_else_as_written() -> None:
    pinned = pinned_config(BASE, [Pin("m", "instances", 3), Pin("m", "max_queue_size", 8)])
    assert pinned.instance_group[0].count == 3
    assert pinned.dynamic_batching.default_queue_policy.max_queue_size == 8
    assert pinned.dynamic_batching.max_queue_delay_microseconds == 5000  # kept
    assert pinned.max_batch_size == 8
    assert pinned_config(BASE, []) is BASE
