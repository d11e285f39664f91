"""tests/support/slow_relay.py against the stand-in of known timing: a build slowed by a known amount.

Truth: the stand-in's first token 80 ms after the request, each next 20 ms after the one before; through
a relay of factor 1.2 both are 1.2 × as long (96 ms, 24 ms) and an answer of 12 tokens takes
1.2 × (80 + 11 × 20) = 360 ms; through a relay of a fixed 10 ms each, 90 ms and 30 ms. Tolerances: the
OpenAI path's own (TTFT 15 %, ITL 10 %), and tokens/s within 10 % of 12 tokens per answer's time (a
step's time also holds perf_analyzer's gap between requests, which no relay slows).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.openai_standin import openai_standin
from tests.support.slow_relay import SlowRelay
from tritonkit.cli import main


def _metrics(url: str, out: Path, requests: int) -> dict[str, object]:
    result = CliRunner().invoke(main, [
        "perf", "run", "standin", "--llm", "--protocol", "openai", "--url", url, "--concurrency", "1",
        "--requests", str(requests), "--input-tokens", "16", "--output-tokens", "12", "--out", str(out)],
        catch_exceptions=False)
    assert result.exit_code == 0, result.output
    metrics: dict[str, object] = json.loads((out / "llm_result.json").read_text())["steps"][0]["metrics"]
    return metrics


def test_a_relay_only_slows() -> None:
    with pytest.raises(ValueError, match="only slows"):
        SlowRelay(9, factor=0.8)


@pytest.mark.perf_analyzer
@pytest.mark.serial
def test_a_relay_slows_the_stream_by_its_factor_or_its_fixed_delay(tmp_path: Path) -> None:
    with openai_standin("--first-ms", "80", "--next-ms", "20") as server:
        port = int(server.url.rsplit(":", 1)[1])
        with SlowRelay(port, factor=1.2) as relay:
            slowed = _metrics(relay.url, tmp_path / "factor", 10)
        with SlowRelay(port, delay_ms=10) as relay:
            delayed = _metrics(relay.url, tmp_path / "delay", 5)
    assert slowed["ttft_ms"]["mean"] == pytest.approx(96.0, rel=0.15)  # type: ignore[index]
    assert slowed["itl_ms"]["mean"] == pytest.approx(24.0, rel=0.10)  # type: ignore[index]
    assert slowed["output_token_throughput_per_s"] == pytest.approx(12 / 0.360, rel=0.10)
    assert slowed["output_tokens_total"] == 10 * 12 and slowed["token_source"] == "usage"
    assert delayed["ttft_ms"]["mean"] == pytest.approx(90.0, rel=0.15)  # type: ignore[index]
    assert delayed["itl_ms"]["mean"] == pytest.approx(30.0, rel=0.10)  # type: ignore[index]
