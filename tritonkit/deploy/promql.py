"""What the generated rules and dashboards write in PromQL, and the server flags they rely on.

The metric families themselves (names, types, labels, when each appears) are Triton's:
:mod:`tritonkit.triton_metrics` holds them for every reader; this module only builds selectors and
checks durations for the rule and dashboard writers.
"""

from __future__ import annotations

import re

__all__ = ["SERVER_FLAGS", "duration_text", "selector"]

#: tritonserver flags the generated rules and dashboards rely on, with the reason.
SERVER_FLAGS: dict[str, str] = {
    "--allow-metrics=true": "the /metrics endpoint (on by default)",
    "--metrics-port=8002": "the port Prometheus scrapes (8002 by default)",
    "--metrics-config=summary_latencies=true": "latency percentiles (p50…p99): off by default in Triton 2.51",
    "--allow-gpu-metrics=true": "GPU utilisation and memory gauges (on by default; need a GPU)",
}

_DURATION_RE = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def duration_text(value: str, flag: str) -> str:
    """A Prometheus duration (``30s``, ``5m``, ``1h30m``), checked; ``flag`` names it in errors."""
    from tritonkit.errors import ConfigError

    text = value.strip()
    if not _DURATION_RE.match(text):
        raise ConfigError(
            f"{flag} {value!r} is not a Prometheus duration",
            hint=f"write a number and a unit, e.g. {flag} 5m (units ms, s, m, h, d)",
        )
    return text


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def selector(**matchers: str | None) -> str:
    """A PromQL label selector ``{a="x",b=~"y|z"}``; ``None`` values are left out.

    A value starting with ``~`` is a regular-expression match.
    """
    parts = []
    for label, value in matchers.items():
        if value is None:
            continue
        if value.startswith("~"):
            parts.append(f'{label}=~"{_quote(value[1:])}"')
        else:
            parts.append(f'{label}="{_quote(value)}"')
    return "{" + ",".join(parts) + "}" if parts else ""
