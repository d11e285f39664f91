"""Load testing against SLAs with the real perf_analyzer.

Two halves, each re-exported here:

* core (install, spec → argv, runner, parsers, percentiles, metrics, ladder, result schema);
* SLA spec and verdict, reports, baselines / compare (see the marked section below).
"""

from __future__ import annotations

# --- core: install / spec / runner / parse / percentiles / metrics / ladder / result ---------
from tritonkit.perf.install import (
    PERF_ANALYZER_ENV,
    PERF_ANALYZER_VERSION,
    PerfAnalyzerInstall,
    default_install_dir,
    install_perf_analyzer,
    locate_perf_analyzer,
)
from tritonkit.perf.ladder import (
    LadderCommand,
    LadderPlan,
    SlaCheck,
    default_results_dir,
    doubling_levels,
    ladder_commands,
    levels_from_text,
    partial_result_of,
    run_ladder,
)
from tritonkit.perf.metrics import (
    MetricsWatcher,
    generator_cpu_warning,
    parse_metrics,
    scrape_metrics,
    step_metrics,
)
from tritonkit.perf.parse import (
    ConsoleSummary,
    CsvRow,
    ExportExperiment,
    build_steps,
    cross_check,
    parse_console,
    parse_csv,
    parse_profile_export,
)
from tritonkit.perf.percentiles import (
    PERCENTILE_METHOD,
    STANDARD_PERCENTILES,
    latency_stats,
    percentile,
    percentiles,
)
from tritonkit.perf.result import (
    SCHEMA_VERSION,
    ClientBreakdown,
    LatencyStats,
    RunMetadata,
    RunResult,
    ServerBreakdown,
    StepMetrics,
    StepResult,
    WarmupInfo,
)
from tritonkit.perf.runner import PerfRunner, RunOutcome, check_target
from tritonkit.perf.spec import ConcurrencyRange, PerfSpec, RequestRateRange, to_argv, write_input_data

# --- SLA / verdict / report / baseline (owned by the other half of issue 7) ------------------
# Add imports here, and the names to the marked part of __all__ below.
# isort: split
from tritonkit.perf.compare import (
    DEFAULT_BASELINE_ROOT,
    Comparison,
    ComparisonRow,
    baseline_path,
    compare_results,
    latest_baseline,
    list_baselines,
    load_result,
    parse_percent,
    save_baseline,
)
from tritonkit.perf.report import (
    PLOT_NAMES,
    ReportFiles,
    render_html,
    render_markdown,
    render_plots,
    stored_verdict,
    write_report,
)
from tritonkit.perf.run import (
    PerfRun,
    PlannedCommand,
    StepEvent,
    judge_step,
    planned_commands,
    rejudge,
    run_perf,
)
from tritonkit.perf.sla import METRICS, SLA, Constraint, MetricSpec, format_metric, load_sla, parse_sla
from tritonkit.perf.verdict import (
    EXIT_PASS,
    EXIT_SLA_MISSED,
    EXIT_UNMEASURED,
    VERDICT_SCHEMA_VERSION,
    CheckResult,
    StepMeasurement,
    StepVerdict,
    Verdict,
    evaluate,
    evaluate_result,
    measurement_from_step,
)

# --- end of SLA / verdict / report / baseline imports ----------------------------------------

__all__ = [
    # core
    "PERCENTILE_METHOD",
    "PERF_ANALYZER_ENV",
    "PERF_ANALYZER_VERSION",
    "SCHEMA_VERSION",
    "STANDARD_PERCENTILES",
    "ClientBreakdown",
    "ConcurrencyRange",
    "ConsoleSummary",
    "CsvRow",
    "ExportExperiment",
    "LadderCommand",
    "LadderPlan",
    "LatencyStats",
    "MetricsWatcher",
    "PerfAnalyzerInstall",
    "PerfRunner",
    "PerfSpec",
    "RequestRateRange",
    "RunMetadata",
    "RunOutcome",
    "RunResult",
    "ServerBreakdown",
    "SlaCheck",
    "StepMetrics",
    "StepResult",
    "WarmupInfo",
    "build_steps",
    "check_target",
    "cross_check",
    "default_install_dir",
    "default_results_dir",
    "doubling_levels",
    "generator_cpu_warning",
    "install_perf_analyzer",
    "ladder_commands",
    "latency_stats",
    "levels_from_text",
    "locate_perf_analyzer",
    "parse_console",
    "parse_csv",
    "parse_metrics",
    "parse_profile_export",
    "partial_result_of",
    "percentile",
    "percentiles",
    "run_ladder",
    "scrape_metrics",
    "step_metrics",
    "to_argv",
    "write_input_data",
    # --- SLA / verdict / report / baseline names go here ---
    "DEFAULT_BASELINE_ROOT",
    "EXIT_PASS",
    "EXIT_SLA_MISSED",
    "EXIT_UNMEASURED",
    "METRICS",
    "PLOT_NAMES",
    "SLA",
    "VERDICT_SCHEMA_VERSION",
    "CheckResult",
    "Comparison",
    "ComparisonRow",
    "Constraint",
    "MetricSpec",
    "PerfRun",
    "PlannedCommand",
    "ReportFiles",
    "StepEvent",
    "StepMeasurement",
    "StepVerdict",
    "Verdict",
    "baseline_path",
    "compare_results",
    "evaluate",
    "evaluate_result",
    "format_metric",
    "judge_step",
    "latest_baseline",
    "list_baselines",
    "load_result",
    "load_sla",
    "measurement_from_step",
    "parse_percent",
    "parse_sla",
    "planned_commands",
    "rejudge",
    "render_html",
    "render_markdown",
    "render_plots",
    "run_perf",
    "save_baseline",
    "stored_verdict",
    "write_report",
]
