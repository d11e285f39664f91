"""An engine sweep on the real engine: vLLM's CPU build swept over max_num_seqs × max_num_batched_tokens.

A tiny Llama is made on the spot (tests/support/tiny_llama.py, with the engine's own Python from
``.venv-vllm/``; nothing from a model hub), and :func:`tritonkit.perf.sweep.engine.run_engine_sweep`
starts vLLM once per variant through the ``--engine vllm`` preset (its own process group, a free
loopback port), load-tests its OpenAI endpoint on a concurrency ladder, stops it, and picks the
winner by the Triton sweep's rules. Printed: each variant's tokens/s within the SLA (at which
concurrency), TTFT / ITL p99 there, the engine's start time; the winner, its ratio to the engine's
default (``*``: vLLM 0.32's own defaults on CPU for its OpenAI server, 128 sequences and 2048 batched
tokens), and the wall time. Take the timing lock:

    flock /work/notes/timing.lock .venv/bin/python benchmarks/llm_engine_sweep.py
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.vllm_engine import ENGINE_PYTHON, make_tiny_model  # noqa: E402
from tritonkit.perf.llm.engine import vllm_cpu_env  # noqa: E402
from tritonkit.perf.llm.settings import LLMSettings  # noqa: E402
from tritonkit.perf.sweep.engine import EngineEvent, EngineSweepSettings, run_engine_sweep  # noqa: E402
from tritonkit.perf.sweep.engine_template import parse_knob, vllm_template  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqs", default="4,128*", help="max_num_seqs values (* the engine's default)")
    parser.add_argument("--batched-tokens", default="512,2048*", help="max_num_batched_tokens values")
    parser.add_argument("--concurrency", default="1,4,8")
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--output-tokens", default="32")
    parser.add_argument("--input-tokens", default="32")
    parser.add_argument("--sla", default="ttft_p99<=300ms,itl_p99<=30ms")
    parser.add_argument("--out", type=Path, default=None, help="sweep folder (default: a temporary one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tk-engine-sweep-") as tmp:
        made = time.monotonic()
        model_dir = make_tiny_model(Path(tmp))
        made_s = time.monotonic() - made
        knobs = (parse_knob(f"max_num_seqs={args.seqs}"), parse_knob(f"max_num_batched_tokens={args.batched_tokens}"))
        settings = EngineSweepSettings(
            template=vllm_template(str(ENGINE_PYTHON), str(model_dir), knobs), knobs=knobs, sla=args.sla,
            out=args.out or Path(tmp) / "sweep",
            llm=LLMSettings(protocol="openai", concurrency=args.concurrency, requests=args.requests,
                            input_tokens=args.input_tokens, output_tokens=args.output_tokens),
            env=vllm_cpu_env(1.0, base={}), ready_timeout_s=400)

        def say(event: EngineEvent) -> None:
            print(event.message, file=sys.stderr, flush=True)

        result = run_engine_sweep("tiny", settings, on_event=say)
    rows = []
    for outcome in result.search.outcomes:
        record = result.records[outcome.variant.id]
        score = outcome.score()
        figures = record.figures.get(f"{score.load:g}", {}) if score is not None else {}
        rows.append({"variant": outcome.variant.id, "status": outcome.status,
                     "tokens_per_s": None if score is None else round(score.throughput_per_s, 1),
                     "concurrency": None if score is None else score.load,
                     "ttft_p99_ms": figures.get("ttft_p99"), "itl_p99_ms": figures.get("itl_p99"),
                     "engine_start_s": None if record.start_s is None else round(record.start_s, 1),
                     "reason": outcome.reason[:200]})
    winner = result.search.winner
    report = {"sla": args.sla, "concurrency": args.concurrency, "requests": args.requests, "variants": rows,
              "winner": winner.variant.id if winner is not None else None,
              "ratio_to_default": None if result.ratio_to_default is None else round(result.ratio_to_default, 3),
              "noise_note": result.search.noise_note, "make_model_s": round(made_s, 1),
              "sweep_wall_s": round(result.wall_s, 1), "wall_s": round(time.monotonic() - began, 1)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"vLLM CPU engine sweep (tiny Llama made in {made_s:.1f} s), SLA {args.sla}, concurrency "
          f"{args.concurrency} × {args.requests} requests")
    print(f"{'variant':<48} {'tokens/s':>9} {'at c':>5} {'TTFT p99':>9} {'ITL p99':>8} {'start s':>8}")
    for row in rows:
        def num(v: object, fmt: str = ".1f") -> str:
            return "-" if v is None else format(v, fmt)

        print(f"{row['variant']:<48} {num(row['tokens_per_s']):>9} {num(row['concurrency'], 'g'):>5} "
              f"{num(row['ttft_p99_ms']):>9} {num(row['itl_p99_ms']):>8} {num(row['engine_start_s']):>8}"
              + (f"  {row['status']}: {row['reason']}" if row["status"] != "measured" else ""))
    print(result.headline())
    print(f"winner {report['winner']}, winner/default {report['ratio_to_default']}, "
          f"sweep {report['sweep_wall_s']} s, wall {report['wall_s']} s")


if __name__ == "__main__":
    main()
