"""Prometheus alerting and recording rules from an SLA and a repository, on Triton's own metrics.

Three sustained signals, each a rule of thumb for a serving fleet, and the decision they feed:

* GPU utilisation above 85 % for 5 minutes (the compute wall is near: more load only queues);
* p99 latency above the SLA for 3 minutes (from Triton's latency summaries);
* queue depth above half the concurrency limit, persistently (the bounded queue is filling);
* any two of the three at once → scale out (one alone is often a burst or a slow client).

Every other SLA term that a server-side metric can answer becomes an alert too (other
percentiles, mean latency, mean queue time, failed requests, error rate, throughput under
load); the rest are listed with the reason they cannot be alerted on.

Rendering is pure (:func:`build_rules` → :class:`RuleSet`, :meth:`RuleSet.render`); writing is
:func:`write_rules`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tritonkit._fs import atomic_write
from tritonkit.deploy.promql import SERVER_FLAGS, duration_text, selector
from tritonkit.deploy.source import RepositoryFacts
from tritonkit.errors import ConfigError
from tritonkit.perf.judge.sla import METRICS, SLA, Constraint, fmt_number
from tritonkit.triton_metrics import (
    GPU_UTILIZATION,
    INFERENCE_COUNT,
    PENDING_REQUESTS,
    QUEUE_DURATION_US,
    REASON_REJECTED,
    REQUEST_DURATION_US,
    REQUEST_FAILURE,
    REQUEST_SUCCESS,
    REQUEST_SUMMARY_US,
)

__all__ = [
    "GPU_ALERT",
    "P99_ALERT",
    "QUEUE_ALERT",
    "SCALE_OUT_ALERT",
    "SCALE_OUT_RECORD",
    "SCALE_OUT_SIGNALS_RECORD",
    "AlertOptions",
    "RuleSet",
    "TermMapping",
    "build_rules",
    "limits_text",
    "write_rules",
]

GPU_ALERT = "TritonGpuUtilisationHigh"
P99_ALERT = "TritonLatencyP99AboveSla"
QUEUE_ALERT = "TritonQueueDeep"
SCALE_OUT_ALERT = "TritonScaleOut"
SCALE_OUT_SIGNALS_RECORD = "tritonkit:scale_out_signals"
SCALE_OUT_RECORD = "tritonkit:scale_out"

# SLA terms no Triton 2.51 server metric can answer, and why (the LLM terms are measured by
# `tritonkit perf` from perf_analyzer's streaming profile export instead).
_NO_SERVER_METRIC = {
    "ttft": "time to first token: Triton 2.51 exposes no first-response metric (measure with tritonkit perf)",
    "itl": "inter-token latency: no per-token timing on the server (measure with tritonkit perf)",
    "tokens": "tokens per second: the server counts requests, not tokens (measure with tritonkit perf)",
    "goodput": "goodput needs each request's latency judged against the SLA: client side only "
    "(measure with tritonkit perf)",
}


@dataclass(frozen=True)
class AlertOptions:
    """Thresholds and windows; the defaults are the rules of thumb in the module docstring."""

    gpu_utilisation: float = 0.85
    gpu_for: str = "5m"
    p99_for: str = "3m"
    queue_fraction: float = 0.5
    queue_for: str = "5m"
    #: ``for:`` of the other SLA-term alerts.
    sla_for: str = "3m"
    #: Window of ``rate()`` / ``increase()``: at least four scrape intervals.
    rate_window: str = "2m"
    #: Overrides every model's concurrency limit (else: read from the repository).
    concurrency_limit: int | None = None
    #: Restrict every rule to one scrape job (``job="triton"``).
    job: str | None = None
    #: How many of the three signals advise scaling out.
    scale_out_signals: int = 2

    def __post_init__(self) -> None:
        if not 0 < self.gpu_utilisation <= 1:
            raise ConfigError(f"GPU utilisation threshold {self.gpu_utilisation} is not in (0, 1]",
                              hint="write e.g. --gpu-utilisation 85%")
        if not 0 < self.queue_fraction <= 1:
            raise ConfigError(f"queue fraction {self.queue_fraction} is not in (0, 1]",
                              hint="write e.g. --queue-fraction 50%")
        if self.concurrency_limit is not None and self.concurrency_limit < 1:
            raise ConfigError(f"concurrency limit {self.concurrency_limit} must be at least 1")
        if not 1 <= self.scale_out_signals <= 3:
            raise ConfigError(f"scale-out signals {self.scale_out_signals} must be 1, 2 or 3")
        for flag, value in (("--gpu-for", self.gpu_for), ("--p99-for", self.p99_for),
                            ("--queue-for", self.queue_for), ("--for", self.sla_for),
                            ("--rate-window", self.rate_window)):
            duration_text(value, flag)


@dataclass(frozen=True)
class TermMapping:
    """What one SLA term became: the alert that watches it, or why none can."""

    term: str
    alert: str | None
    note: str


@dataclass
class RuleSet:
    """Prometheus rule groups plus what a reader must know to use them."""

    groups: list[dict[str, Any]]
    mapped: list[TermMapping] = field(default_factory=list)
    unmapped: list[TermMapping] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    server_flags: dict[str, str] = field(default_factory=dict)

    @property
    def alert_names(self) -> list[str]:
        """Every alert, in file order."""
        return [r["alert"] for g in self.groups for r in g["rules"] if "alert" in r]

    def rule(self, name: str) -> dict[str, Any]:
        """The first alerting or recording rule named ``name``."""
        for group in self.groups:
            for rule in group["rules"]:
                if rule.get("alert") == name or rule.get("record") == name:
                    return rule
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The rule file's content (``groups:``), as Prometheus reads it."""
        return {"groups": self.groups}

    def mapping_dict(self) -> dict[str, Any]:
        """JSON-ready: the alerts, which SLA term each answers and which none can, the notes and the
        server flags the rules need (``tritonkit deploy alerts --json``)."""
        return {
            "alerts": self.alert_names,
            "mapped": [{"term": m.term, "alert": m.alert, "metric": m.note} for m in self.mapped],
            "unmapped": [{"term": m.term, "reason": m.note} for m in self.unmapped],
            "notes": self.notes,
            "server_flags": self.server_flags,
        }

    def render(self) -> str:
        """The rule file: a comment header (server flags, term mapping, notes), then YAML."""
        lines = ["# Prometheus rules for Triton Inference Server, generated by tritonkit.",
                 "# The server must run with:"]
        lines += [f"#   {flag:<42} {why}" for flag, why in self.server_flags.items()]
        if self.mapped or self.unmapped:
            lines.append("# SLA terms:")
            lines += [f"#   {m.term:<22} -> {m.alert}: {m.note}" for m in self.mapped]
            lines += [f"#   {m.term:<22} -> no alert: {m.note}" for m in self.unmapped]
        lines += [f"# {note}" for note in self.notes]
        body = yaml.safe_dump(self.to_dict(), sort_keys=False, width=1000, allow_unicode=True)
        return "\n".join(lines) + "\n" + body


def _labels(severity: str, signal: str | None = None) -> dict[str, str]:
    labels = {"severity": severity, "source": "tritonkit"}
    if signal:
        labels["signal"] = signal
    return labels


def _model_regex(facts: RepositoryFacts | None) -> str | None:
    if facts is None:
        return None
    return "~" + "|".join(sorted(m.name for m in facts.models))


def _fmt_ms(value_ms: float) -> str:
    return f"{fmt_number(value_ms)} ms"


def _quantile_ms(quantile: str, sel: str) -> str:
    """A latency quantile in ms from Triton's request summary (which reports µs)."""
    q_sel = sel[:-1] + f',quantile="{quantile}"}}' if sel else f'{{quantile="{quantile}"}}'
    return f"{REQUEST_SUMMARY_US.name}{q_sel} / 1000"


def _p99_ms(sel: str) -> str:
    """The p99 latency in ms, at the summary quantile the metric registry names for p99."""
    quantile = METRICS["p99"].prometheus_quantile
    assert quantile is not None  # the registry's p99 has Triton's 0.99
    return _quantile_ms(quantile, sel)


def _breach(c: Constraint) -> str:
    """The comparison that breaks the bound: ``p99<=50ms`` breaks at ``> 50``, ``p99<50ms`` at ``>= 50``."""
    op = {"<=": ">", "<": ">=", "==": ">", ">=": "<", ">": "<="}[c.op]
    return f"{op} {fmt_number(c.value)}"


def _term_text(c: Constraint) -> str:
    """The term as written (``p99<=50ms``); a metric this version's SLA table lacks, plainly."""
    return str(c) if c.metric in METRICS else f"{c.metric}{c.op}{fmt_number(c.value)}"


def _term_alert(c: Constraint, sel: str, options: AlertOptions) -> tuple[dict[str, Any], str] | str:
    """The alert for one SLA term, with a note; or the reason there is none."""
    w = options.rate_window
    metric = c.metric
    quantile = METRICS[metric].prometheus_quantile if metric in METRICS else None
    if quantile is not None:
        name = P99_ALERT if metric == "p99" else f"TritonLatency{metric.upper()}AboveSla"
        expr = f"{_quantile_ms(quantile, sel)} {_breach(c)}"
        rule = {
            "alert": name,
            "expr": expr,
            "for": options.p99_for if metric == "p99" else options.sla_for,
            "labels": _labels("critical" if metric == "p99" else "warning", "p99" if metric == "p99" else None),
            "annotations": {
                "summary": f"{metric} latency of {{{{ $labels.model }}}} above the SLA ({_fmt_ms(c.value)})",
                "description": f"{metric} request latency is {{{{ $value | printf \"%.1f\" }}}} ms on "
                               f"{{{{ $labels.instance }}}}, over the SLA's {_fmt_ms(c.value)}.",
            },
        }
        return rule, f"{REQUEST_SUMMARY_US.name} quantile {quantile} (needs summary_latencies=true)"
    if metric in ("mean", "queue"):
        counter = REQUEST_DURATION_US.name if metric == "mean" else QUEUE_DURATION_US.name
        name = "TritonMeanLatencyAboveSla" if metric == "mean" else "TritonQueueTimeAboveSla"
        expr = f"rate({counter}{sel}[{w}]) / rate({REQUEST_SUCCESS.name}{sel}[{w}]) / 1000 {_breach(c)}"
        what = "mean request latency" if metric == "mean" else "mean queue time"
        rule = {
            "alert": name, "expr": expr, "for": options.sla_for, "labels": _labels("warning"),
            "annotations": {
                "summary": f"{what} of {{{{ $labels.model }}}} above the SLA ({_fmt_ms(c.value)})",
                "description": f"{what} is {{{{ $value | printf \"%.1f\" }}}} ms over {w}.",
            },
        }
        return rule, f"rate({counter}) / rate({REQUEST_SUCCESS.name})"
    if metric == "errors":
        expr = f"increase({REQUEST_FAILURE.name}{sel}[{w}]) {_breach(c)}"
        rule = {
            "alert": "TritonRequestsFailing", "expr": expr, "labels": _labels("critical"),
            "annotations": {
                "summary": "{{ $labels.model }} failed requests",
                "description": f"{{{{ $value | printf \"%.0f\" }}}} requests failed in {w}; "
                               f"the SLA allows {fmt_number(c.value)}.",
            },
        }
        return rule, f"increase({REQUEST_FAILURE.name})"
    if metric == "error_rate":
        fail, ok = f"rate({REQUEST_FAILURE.name}{sel}[{w}])", f"rate({REQUEST_SUCCESS.name}{sel}[{w}])"
        expr = f"{fail} / ({fail} + {ok}) {_breach(c)}"
        rule = {
            "alert": "TritonErrorRateAboveSla", "expr": expr, "for": options.sla_for, "labels": _labels("critical"),
            "annotations": {
                "summary": f"error rate of {{{{ $labels.model }}}} above the SLA ({fmt_number(c.value * 100)} %)",
                "description": "{{ $value | humanizePercentage }} of requests failed.",
            },
        }
        return rule, f"{REQUEST_FAILURE.name} / all requests"
    if metric == "rejected":
        rejected_sel = sel[:-1] + f',reason="{REASON_REJECTED}"}}' if sel else f'{{reason="{REASON_REJECTED}"}}'
        refused, fail = f"rate({REQUEST_FAILURE.name}{rejected_sel}[{w}])", f"rate({REQUEST_FAILURE.name}{sel}[{w}])"
        ok = f"rate({REQUEST_SUCCESS.name}{sel}[{w}])"
        expr = f"{refused} / ({fail} + {ok}) {_breach(c)}"
        rule = {
            "alert": "TritonRejectedShareAboveSla", "expr": expr, "for": options.sla_for, "labels": _labels("warning"),
            "annotations": {
                "summary": f"{{{{ $labels.model }}}} rejects more requests than the SLA allows "
                           f"({fmt_number(c.value * 100)} %)",
                "description": "{{ $value | humanizePercentage }} of requests were refused by the queue policy.",
            },
        }
        return rule, f"{REQUEST_FAILURE.name}{{reason=\"{REASON_REJECTED}\"}} / all requests"
    if metric == "throughput":
        # A floor is only broken when demand is there: below it with an empty queue is just
        # quiet traffic. So: below the floor *while requests wait*.
        expr = f"rate({INFERENCE_COUNT.name}{sel}[{w}]) {_breach(c)} and {PENDING_REQUESTS.name}{sel} > 0"
        rule = {
            "alert": "TritonThroughputBelowSlaUnderLoad", "expr": expr, "for": options.sla_for,
            "labels": _labels("warning"),
            "annotations": {
                "summary": f"{{{{ $labels.model }}}} serves under {fmt_number(c.value)} infer/s while requests queue",
                "description": "Requests are waiting, yet throughput is {{ $value | printf \"%.1f\" }} infer/s.",
            },
        }
        return rule, f"rate({INFERENCE_COUNT.name}) while {PENDING_REQUESTS.name} > 0 (quiet traffic is no breach)"
    for prefix, why in _NO_SERVER_METRIC.items():
        if metric.startswith(prefix):
            return why
    return "no Triton server metric measures it"


def build_rules(sla: SLA | None, facts: RepositoryFacts | None = None,
                options: AlertOptions | None = None) -> RuleSet:
    """Alerting and recording rules for ``sla`` over the models in ``facts`` (all models if None)."""
    options = options or AlertOptions()
    job = options.job
    sel = selector(job=job, model=_model_regex(facts))
    result = RuleSet(groups=[], server_flags=dict(SERVER_FLAGS))
    alerts: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []

    gpu_sel = selector(job=job)
    alerts.append({
        "alert": GPU_ALERT,
        "expr": f"{GPU_UTILIZATION.name}{gpu_sel} > {fmt_number(options.gpu_utilisation)}",
        "for": options.gpu_for,
        "labels": _labels("warning", "gpu"),
        "annotations": {
            "summary": f"GPU {{{{ $labels.gpu_uuid }}}} above {fmt_number(options.gpu_utilisation * 100)} % "
                       f"for {options.gpu_for}",
            "description": "GPU utilisation is {{ $value | humanizePercentage }} on {{ $labels.instance }}: "
                           "the compute wall is near; more load only adds queueing.",
        },
    })

    signals = [GPU_ALERT]
    for c in (sla.constraints if sla else ()):
        made = _term_alert(c, sel, options)
        if isinstance(made, str):
            result.unmapped.append(TermMapping(_term_text(c), None, made))
            continue
        rule, note = made
        alerts.append(rule)
        result.mapped.append(TermMapping(_term_text(c), rule["alert"], note))
        if rule["alert"] == P99_ALERT:
            signals.append(P99_ALERT)
            records.append({"record": "tritonkit:request_latency_p99:ms", "expr": _p99_ms(sel)})
    if P99_ALERT not in signals:
        result.notes.append("The SLA bounds no p99: the p99 signal of the scale-out rule is absent.")

    queue_rules = _queue_rules(facts, options, result)
    alerts += queue_rules
    if queue_rules:
        signals.append(QUEUE_ALERT)

    w = options.rate_window
    records += [
        {"record": "tritonkit:inference_rate:per_s", "expr": f"rate({INFERENCE_COUNT.name}{sel}[{w}])"},
        {"record": "tritonkit:queue_time_mean:ms",
         "expr": f"rate({QUEUE_DURATION_US.name}{sel}[{w}]) / rate({REQUEST_SUCCESS.name}{sel}[{w}]) / 1000"},
    ]
    signal_re = "|".join(signals)
    need = min(options.scale_out_signals, len(signals))
    # ALERTS holds an alert's labels; count distinct firing signal alerts per job, so two
    # models both over their p99 count once (one signal), not twice. With none firing the count
    # is 0, not absent: the autoscaler reads this series, and a missing metric stops an HPA
    # from ever scaling in.
    scale = [
        {"record": SCALE_OUT_SIGNALS_RECORD,
         "expr": f'count by (job) (count by (job, alertname) '
                 f'(ALERTS{{alertstate="firing",alertname=~"{signal_re}"}})) '
                 f"or 0 * count by (job) ({INFERENCE_COUNT.name}{sel})"},
        {"record": SCALE_OUT_RECORD, "expr": f"{SCALE_OUT_SIGNALS_RECORD} >= {need}"},
        {"alert": SCALE_OUT_ALERT, "expr": SCALE_OUT_RECORD,
         "labels": _labels("warning", "scale_out"),
         "annotations": {
             "summary": "scale out {{ $labels.job }}: {{ $value }} of the saturation signals hold",
             "description": f"At least {need} of {', '.join(signals)} are firing. Rule of thumb: add replicas "
                            "before the fleet reaches 100 %; a new replica takes minutes to start.",
         }},
    ]
    result.groups = [
        {"name": "tritonkit.records", "rules": records},
        # The scale-out rules read ALERTS, so they follow the alerts in the same group: rules in a
        # group are evaluated in order, each seeing what the earlier ones wrote.
        {"name": "tritonkit.alerts", "rules": alerts + scale},
    ]
    return result


def _queue_rules(facts: RepositoryFacts | None, options: AlertOptions, result: RuleSet) -> list[dict[str, Any]]:
    """One queue-depth alert; a model's own threshold each (half its concurrency limit by default)."""
    job = options.job
    limits: list[tuple[str | None, int]]
    if options.concurrency_limit is not None:
        limits = [(_model_regex(facts), options.concurrency_limit)]
    elif facts is not None:
        limits = [(m.name, m.concurrency_limit) for m in facts.queued_models()]
    else:
        result.notes.append("No repository and no --concurrency-limit: the queue-depth alert is left out.")
        return []
    if not limits:
        return []
    # One rule, its thresholds joined with `or`: per-model rules of one name and the same labels
    # would be duplicates to Prometheus (promtool's lint refuses them).
    expr = " or ".join(f"{PENDING_REQUESTS.name}{selector(job=job, model=model)} > "
                       f"{fmt_number(limit * options.queue_fraction)}" for model, limit in limits)
    share = fmt_number(options.queue_fraction * 100)
    return [{
        "alert": QUEUE_ALERT,
        "expr": expr,
        "for": options.queue_for,
        "labels": _labels("warning", "queue"),
        "annotations": {
            "summary": f"{{{{ $labels.model }}}}: queue above {share} % of its concurrency limit for {options.queue_for}",
            "description": "{{ $value }} requests are waiting on {{ $labels.instance }}: the queue is the "
                           "overload warning; past it clients time out and retry.",
        },
    }]


def write_rules(rules: RuleSet, path: str | Path) -> Path:
    """Write the rule file atomically; returns its path."""
    return atomic_write(path, rules.render())


def limits_text(facts: RepositoryFacts, options: AlertOptions) -> list[str]:
    """One line per model: the concurrency limit its queue alert uses, and where it came from."""
    lines = []
    for m in facts.queued_models():
        if options.concurrency_limit is not None:
            lines.append(f"{m.name}: concurrency limit {options.concurrency_limit} (--concurrency-limit)")
        elif m.max_queue_size:
            lines.append(f"{m.name}: concurrency limit {m.concurrency_limit} (max_queue_size)")
        else:
            lines.append(f"{m.name}: concurrency limit {m.concurrency_limit} "
                         f"({m.instances} instance(s) × max batch {max(1, m.max_batch_size)})")
    return lines
