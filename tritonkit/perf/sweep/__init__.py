"""Find the configuration that carries the most load within an SLA, on one live server.

A sweep serves the model's repository on one tritonserver with explicit model control and, for
each variant of the model's config (instances × max batch × batching window × preferred batch
sizes × queue policy), loads it with that config, warms it up, measures it from its top load
down, and unloads it. It measures the default config first, then the variant a model of
throughput and latency over the knobs (fitted to what was measured,
:mod:`tritonkit.perf.sweep.model`) predicts highest, then, refitting after each, the variant
that could reach highest, until none left can beat the best (``exhaustive=True`` measures them
all); the report says why each variant was measured or skipped. The
leaders are re-measured and a tie is a tie. The winner is written back beside a backup of the
old config, and a report (table, throughput-vs-p99 plot with the Pareto front) is written.

Example::

    from tritonkit.perf.sweep import SweepGrid, run_sweep

    settings = SweepSettings(sla="p99<=50ms",
                             grid=SweepGrid(instances=[1, 2], max_batch_sizes=[1, 4, 8], windows_us=[0, 5000]))
    result = run_sweep("model_repository", "resnet", settings)
    print(result.headline(), result.exit_code)
"""

from __future__ import annotations

from tritonkit.perf.sweep.driver import VariantMeter
from tritonkit.perf.sweep.joint_run import JointResult, run_joint_sweep
from tritonkit.perf.sweep.live import LiveModel, config_json, mean_exec_us
from tritonkit.perf.sweep.model import ModelSettings, PerfModel, Prediction, fit_model
from tritonkit.perf.sweep.outcome import StepPoint, StoredResultError, VariantOutcome
from tritonkit.perf.sweep.report import render_sweep_markdown, render_sweep_plot, write_sweep_report
from tritonkit.perf.sweep.result import Exit, SweepEvent, SweepOutcome, SweepResult
from tritonkit.perf.sweep.runner import run_sweep
from tritonkit.perf.sweep.search import (
    Decision,
    SearchResult,
    SearchSettings,
    WinnerChoice,
    choose_winner,
    first_guess,
    interpolate_cost_us,
    pareto_front,
    search,
    throughput_bound_per_s,
    useful_loads,
)
from tritonkit.perf.sweep.settings import SweepGrid, SweepSettings
from tritonkit.perf.sweep.store import SweepStore
from tritonkit.perf.sweep.variants import (
    DEFAULT_ID,
    Pin,
    Variant,
    apply_variant,
    grid_warnings,
    parse_instances,
    parse_max_batch_sizes,
    parse_pin,
    parse_preferred,
    parse_queue_sizes,
    parse_queue_timeouts,
    parse_windows,
    pinned_config,
    variant_grid,
    variant_of,
)
from tritonkit.perf.sweep.writeback import (
    PendingWriteBack,
    WriteBack,
    plan_write_back,
    restore_command,
    write_winner,
)

__all__ = [
    "DEFAULT_ID",
    "Decision",
    "ModelSettings",
    "PerfModel",
    "Pin",
    "Prediction",
    "fit_model",
    "parse_pin",
    "parse_queue_sizes",
    "parse_queue_timeouts",
    "pinned_config",
    "Exit",
    "SweepEvent",
    "SweepOutcome",
    "SweepGrid",
    "SweepResult",
    "SweepSettings",
    "JointResult",
    "run_joint_sweep",
    "StoredResultError",
    "PendingWriteBack",
    "grid_warnings",
    "plan_write_back",
    "VariantMeter",
    "render_sweep_markdown",
    "render_sweep_plot",
    "run_sweep",
    "write_sweep_report",
    "LiveModel",
    "SearchResult",
    "SearchSettings",
    "StepPoint",
    "SweepStore",
    "Variant",
    "VariantOutcome",
    "WinnerChoice",
    "WriteBack",
    "apply_variant",
    "choose_winner",
    "config_json",
    "first_guess",
    "interpolate_cost_us",
    "mean_exec_us",
    "pareto_front",
    "parse_instances",
    "parse_max_batch_sizes",
    "parse_preferred",
    "parse_windows",
    "restore_command",
    "search",
    "throughput_bound_per_s",
    "useful_loads",
    "variant_grid",
    "variant_of",
    "write_winner",
]
