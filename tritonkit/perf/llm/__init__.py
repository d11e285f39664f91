"""LLM load tests: streamed TTFT, inter-token latency, token throughput and goodput; traffic shapes;
recovery after load; client time-outs told apart from server rejections.

perf_analyzer is the load engine, over Triton's gRPC stream or an OpenAI-compatible HTTP server
(``run_llm(..., openai=OpenAITarget())``, :mod:`tritonkit.perf.llm.openai`): it streams from decoupled models and its profile export records
every request's send time and every response's time and outputs; the metrics are computed from
that with GenAI-Perf's definitions (``metrics``). Traffic shapes it cannot express become a
``--request-intervals`` schedule (``shapes``). ``run_llm`` ties it together::

    from tritonkit.perf.llm import LLMPlan, Spike, run_llm, synthetic_prompts

    result = run_llm("ensemble", "127.0.0.1:8001", synthetic_prompts(100, input_tokens_mean=128),
                     LLMPlan(shape=Spike(base_per_s=2, burst_per_s=20)), results_dir="results/llm",
                     metrics_url="http://127.0.0.1:8002/metrics")
    print(result.steps[0].metrics.ttft_ms.p99, result.steps[0].recovery.recovery_s)
"""

from tritonkit.perf.llm.compare import (
    LLM_COMPARE_LIMITS,
    LLMComparison,
    LLMComparisonRow,
    compare_llm_results,
    latest_llm_baseline,
    llm_compare_limits,
    save_llm_baseline,
)
from tritonkit.perf.llm.engine_metrics import engine_figures, queueing_starts
from tritonkit.perf.llm.judge import evaluate_llm, goodput_slo_from_sla, llm_measurement
from tritonkit.perf.llm.loadtest import LLMPlan, run_llm
from tritonkit.perf.llm.metrics import (
    Distribution,
    Drift,
    DriftWindow,
    GoodputSLO,
    LLMMetrics,
    RequestRecord,
    compute_metrics,
    count_output_tokens,
    drift,
    load_export_records,
    records_from_export,
)
from tritonkit.perf.llm.openai import OPENAI_ENDPOINTS, OpenAITarget, records_from_openai_export
from tritonkit.perf.llm.prompts import (
    Prompt,
    RequestLayout,
    detect_layout,
    load_prompts,
    prompts_for_lengths,
    synthetic_prompts,
    write_llm_input_data,
)
from tritonkit.perf.llm.report import render_llm_markdown, render_timeline_png, write_llm_report
from tritonkit.perf.llm.result import LLMResult, LLMStep, TimelinePoint
from tritonkit.perf.llm.shapes import (
    Phase,
    Ramp,
    Replay,
    ReplayEntry,
    Schedule,
    Soak,
    Spike,
    load_replay_log,
    parse_shape,
    write_intervals,
)
from tritonkit.perf.llm.timeline import (
    FailureReport,
    Recovery,
    ServerPoint,
    classify_failures,
    in_flight,
    recovery,
    server_timeline,
)

__all__ = ["Distribution", "Drift", "DriftWindow", "FailureReport", "GoodputSLO", "LLM_COMPARE_LIMITS",
           "OPENAI_ENDPOINTS", "LLMComparison", "LLMComparisonRow", "LLMMetrics", "LLMPlan", "LLMResult",
           "LLMStep", "OpenAITarget", "Phase", "Prompt", "Ramp", "Recovery", "Replay", "ReplayEntry",
           "RequestLayout", "RequestRecord", "Schedule", "ServerPoint", "Soak", "Spike", "TimelinePoint",
           "classify_failures", "compare_llm_results", "compute_metrics", "count_output_tokens", "detect_layout",
           "drift", "engine_figures", "evaluate_llm", "goodput_slo_from_sla", "in_flight", "latest_llm_baseline",
           "llm_compare_limits", "llm_measurement", "load_export_records", "load_prompts", "load_replay_log",
           "parse_shape", "prompts_for_lengths", "queueing_starts", "records_from_export",
           "records_from_openai_export", "recovery", "render_llm_markdown", "render_timeline_png", "run_llm",
           "save_llm_baseline", "server_timeline", "synthetic_prompts", "write_intervals", "write_llm_input_data",
           "write_llm_report"]
