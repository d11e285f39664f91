"""The value bounds: one check that the command line and every settings value share."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonkit._values import COUNT, FRACTION, INT32_MAX, SECONDS, Bounds, field_bounds
from tritonkit.builders.plan import BuildOptions
from tritonkit.builders.trtllm.params import EngineOverrides
from tritonkit.cli import main
from tritonkit.cli._common import Number
from tritonkit.client import Timeouts
from tritonkit.deploy.k8s_options import K8sOptions
from tritonkit.errors import ConfigError
from tritonkit.perf.command import LoadTestSettings
from tritonkit.perf.llm.settings import LLMSettings
from tritonkit.perf.measure.plan import LadderPlan
from tritonkit.perf.sweep.settings import SweepSettings
from tritonkit.planner import PlanAssumptions, Workload

#: Each settings value, with what it needs besides the field under test.
SETTINGS: list[tuple[type, dict[str, Any]]] = [
    (LoadTestSettings, {}), (SweepSettings, {"sla": "p99<=50ms"}), (LadderPlan, {"levels": (1, 2)}),
    (LLMSettings, {}), (Timeouts, {}), (K8sOptions, {"image": "nvcr.io/nvidia/tritonserver:24.10-py3"}),
    (BuildOptions, {}), (EngineOverrides, {}), (Workload, {}), (PlanAssumptions, {}),
]
BOUNDED = [(cls, base, f.name) for cls, base in SETTINGS for f in fields(cls) if "tritonkit.bounds" in f.metadata]


@pytest.mark.parametrize(("cls", "base", "name"), BOUNDED, ids=[f"{c.__name__}.{n}" for c, _, n in BOUNDED])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1e300, "7"])
def test_a_settings_value_refuses_an_unbounded_field_naming_it(cls: type, base: dict[str, Any], name: str,
                                                               bad: object) -> None:
    with pytest.raises(ConfigError) as info:
        cls(**{**base, name: bad})
    assert info.value.message.startswith(f"{cls.__name__}.{name} "), info.value.message
    assert info.value.hint and "e.g." in info.value.hint


def test_every_settings_value_named_in_the_brief_declares_bounds() -> None:
    declared = {cls for cls, _, _ in BOUNDED}
    assert declared == {cls for cls, _ in SETTINGS}


@pytest.mark.parametrize(("command", "option", "cls", "name"), [
    (("perf", "run"), "--duration-s", LoadTestSettings, "duration_s"),
    (("perf", "run"), "--warmup-s", LoadTestSettings, "warmup_s"),
    (("perf", "run"), "--batch-size", LoadTestSettings, "batch_size"),
    (("perf", "run"), "--num-prompts", LLMSettings, "num_prompts"),
    (("perf", "sweep"), "--window-ms", SweepSettings, "step_window_ms"),
    (("build", "onnx"), "--max-queue-size", BuildOptions, "max_queue_size"),
    (("deploy", "k8s"), "--gpus", K8sOptions, "gpus"),
    (("plan",), "--efficiency", PlanAssumptions, "efficiency"),
])
def test_an_option_and_its_settings_field_hold_the_same_bounds(command: tuple[str, ...], option: str, cls: type,
                                                               name: str) -> None:
    """One declaration, two readers: the option's type is the field's own bounds, not a copy."""
    group: Any = main
    for word in command:
        group = group.commands[word]
    (param,) = [p for p in group.params if isinstance(p, click.Option) and option in p.opts]
    assert isinstance(param.type, Number) and param.type.bounds is field_bounds(cls, name)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(text=st.text(max_size=12), bounds=st.sampled_from([COUNT, SECONDS, FRACTION]))
def test_parsing_any_text_gives_a_number_within_bounds_or_a_config_error(text: str, bounds: Bounds) -> None:
    try:
        value = bounds.parse(text, "--x")
    except ConfigError as exc:
        assert exc.message.startswith("--x ") and exc.hint
        return
    assert math.isfinite(value) and bounds.problem(value) is None
    assert isinstance(value, int) == bounds.integer


def test_limits_are_the_real_ones_where_there_is_one() -> None:
    assert COUNT.parse(str(INT32_MAX), "--x") == INT32_MAX
    with pytest.raises(ConfigError, match="too large"):
        COUNT.parse(str(INT32_MAX + 1), "--x")  # protobuf's int32
    with pytest.raises(ConfigError, match="not a whole number"):
        COUNT.parse("1e3", "--x")
    assert FRACTION.parse("1", "--x") == 1.0
    for bad in ("0", "nan", "-1", "2"):
        with pytest.raises(ConfigError):
            FRACTION.parse(bad, "--kv-cache-fraction")
    assert COUNT.describe() == "a whole number from 1 to 2147483647"
    assert SECONDS.describe() == "a number of seconds > 0 and ≤ 2592000"


# ---- addresses, text and numbers as typed: the one home every option and file reader uses ----------

@pytest.mark.parametrize(("text", "problem"), [
    ("127.0.0.1:8001", None), ("[::1]:6379", None), ("[fe80::1%eth0]:1", None), ("node-1.example_x:65535", None),
    ("127.0.0.1:²", "ASCII digits"), ("h:١٢", "ASCII digits"), ("h:0", "1 to 65535"), ("h:65536", "1 to 65535"),
    ("::1:6379", "[::1]:6379"), ("[::1]", "both needed"), ("[::1]x", "[IPv6]:PORT"), ("[zz]:1", "not an IPv6 address"), (":", "both needed"),
    ("a b:1", "not a host name"), ("http://h:1", "without a scheme"), ("h", "both needed"), ("-h:1", "not a host"),
])
def test_host_port_problem_names_what_is_wrong(text: str, problem: str | None) -> None:
    from tritonkit._values import host_port_problem

    found = host_port_problem(text)
    assert (found is None) if problem is None else (found is not None and problem in found), found


@pytest.mark.parametrize("text", ["12", "0", "65535"])
def test_ascii_int_reads_ascii_digits(text: str) -> None:
    from tritonkit._values import ascii_int

    assert ascii_int(text) == int(text)


@pytest.mark.parametrize("text", ["²", "١٢", "1_0", "", " 1", "+1", "-1", "1.0", "0x1"])
def test_ascii_int_refuses_anything_else(text: str) -> None:
    from tritonkit._values import ascii_int

    assert ascii_int(text) is None


@pytest.mark.parametrize("text", ["١٢", "1_000", "²", "1e3_0"])
def test_a_number_in_other_digits_or_with_underscores_is_refused_as_typed(text: str) -> None:
    with pytest.raises(ConfigError, match="--x"):
        COUNT.parse(text, "--x")


@pytest.mark.parametrize(("text", "problem"), [
    ("fine name", None), ("café", None), ("²", None), ("caf\udce9", "not UTF-8"), ("a\nb", "control character"),
    ("a\x1bb", "control character"), ("a\u2028b", "control character"), ("a\0b", "control character"),
])
def test_text_problem_refuses_bytes_that_were_not_utf8_and_control_characters(text: str, problem: str | None) -> None:
    from tritonkit._values import text_problem

    found = text_problem(text)
    assert (found is None) if problem is None else (found is not None and problem in found), found


@pytest.mark.parametrize(("text", "ok"), [
    ("http://127.0.0.1:8002/metrics", True), ("https://[::1]:1/x", True), ("http://prometheus.monitoring:9090", True),
    ("http://h", True), ("127.0.0.1:8002", False), ("ftp://h/x", False), ("http://", False), ("http://h:²/", False),
    ("http://::1:8002/metrics", False), ("http://h:0/", False), ("http://a b/", False), ("http://h/a\nb", False),
])
def test_check_http_url(text: str, ok: bool) -> None:
    from tritonkit._values import check_http_url

    if ok:
        assert check_http_url(text, "--metrics-url") == text
    else:
        with pytest.raises(ConfigError, match="--metrics-url"):
            check_http_url(text, "--metrics-url")
