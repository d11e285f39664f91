"""What ``tritonkit.client`` costs over raw tritonclient, on one server and model, in one run.

Three measurements, each against its reference in the same run, interleaved in
rounds so that drift on a shared machine hits every side alike. Every side has its
own client object, created once and warmed up before anything is timed; all sides
send the same arrays. tritonkit always sets a deadline (60 s by default), so raw
tritonclient is also measured with that deadline, for reference; the targets are
against raw tritonclient without one.

1. sync latency at concurrency 1: ``Client.infer`` vs ``tritonclient.grpc`` (target ratio <= 1.05);
2. throughput with 64 requests in flight: ``AsyncClient.infer`` vs ``tritonclient.grpc.aio``
   (target ratio >= 0.95);
3. a 16 MB input: ``Client.infer`` through system shared memory vs in-band gRPC;
4. client CPU per call, without the network: each side's gRPC stub answers a recorded reply
   at once, so what the client itself costs is not diluted in a round trip, nor drowned by
   other processes' load on a shared machine (the figure to compare between versions).

    .venv/bin/python benchmarks/client_overhead.py
    .venv/bin/python benchmarks/client_overhead.py --requests 2000 --rounds 6 --json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient

from tritonkit.client import DEFAULT_TIMEOUT_S, AsyncClient, Client
from tritonkit.server import TritonServer

ADD_CONFIG = """
name: "add"
backend: "python"
max_batch_size: 8
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
ADD_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(r, "B").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", a + b)]))
        return out
"""
BIG_ELEMENTS = 4 * 1024 * 1024  # FP32: 16 MiB
SUM_CONFIG = f"""
name: "checksum"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ {BIG_ELEMENTS} ] }} ]
output [ {{ name: "S" data_type: TYPE_FP64 dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
SUM_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("S", np.array([x.sum(dtype=np.float64)]))]))
        return out
"""


def write_repo(root: Path) -> Path:
    for name, config, code in (("add", ADD_CONFIG, ADD_PY), ("checksum", SUM_CONFIG, SUM_PY)):
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(config.strip() + "\n")
        (root / name / "1" / "model.py").write_text(code.lstrip())
    return root


def percentile_ms(samples_s: list[float], q: float) -> float:
    ordered = sorted(samples_s)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index] * 1000.0


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def sync_latency(url: str, requests: int) -> dict[str, Any]:
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    # One client object per side, so that no side finds another's channel warm.
    raw = grpcclient.InferenceServerClient(url)
    raw_dl = grpcclient.InferenceServerClient(url)

    def raw_call() -> np.ndarray:
        first = grpcclient.InferInput("A", [1, 4], "FP32").set_data_from_numpy(a)
        second = grpcclient.InferInput("B", [1, 4], "FP32").set_data_from_numpy(a)
        return raw.infer("add", [first, second]).as_numpy("SUM")

    def raw_deadline_call() -> np.ndarray:
        # The same call with the deadline tritonkit always sets (gRPC arms a timer for it).
        first = grpcclient.InferInput("A", [1, 4], "FP32").set_data_from_numpy(a)
        second = grpcclient.InferInput("B", [1, 4], "FP32").set_data_from_numpy(a)
        return raw_dl.infer("add", [first, second], client_timeout=DEFAULT_TIMEOUT_S).as_numpy("SUM")

    with Client(url) as client:

        def ours_call() -> np.ndarray:
            return client.infer("add", {"A": a, "B": a})["SUM"]

        assert np.array_equal(raw_call(), ours_call())
        sides: dict[str, tuple[Callable[[], Any], list[float]]] = {
            "raw": (raw_call, []),
            "raw_deadline": (raw_deadline_call, []),
            "tritonkit": (ours_call, []),
        }
        for fn, _ in sides.values():
            timed(fn, 200)
        # Small blocks in rotating order: load from other processes hits every side alike.
        block = 20
        names = list(sides)
        gc.collect()
        for index in range(max(1, requests // block)):
            for name in names[index % 3 :] + names[: index % 3]:
                fn, sink = sides[name]
                sink.extend(timed(fn, block))
    raw.close()
    raw_dl.close()
    p50 = {name: percentile_ms(samples, 50) for name, (_, samples) in sides.items()}
    p99 = {name: percentile_ms(samples, 99) for name, (_, samples) in sides.items()}
    return {
        "requests_each": len(sides["raw"][1]),
        "raw_p50_ms": round(p50["raw"], 4),
        "raw_with_deadline_p50_ms": round(p50["raw_deadline"], 4),
        "tritonkit_p50_ms": round(p50["tritonkit"], 4),
        "raw_p99_ms": round(p99["raw"], 4),
        "tritonkit_p99_ms": round(p99["tritonkit"], 4),
        "ratio_p50": round(p50["tritonkit"] / p50["raw"], 4),
        "ratio_p50_vs_raw_with_deadline": round(p50["tritonkit"] / p50["raw_deadline"], 4),
        "target": "<= 1.05",
    }


async def _throughput(call: Callable[[], Awaitable[Any]], total: int, in_flight: int) -> float:
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return total / (time.perf_counter() - started)


async def async_throughput(url: str, round_requests: int, rounds: int, in_flight: int) -> dict[str, Any]:
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    # One client object per side, created once.
    raw = aioclient.InferenceServerClient(url)
    raw_dl = aioclient.InferenceServerClient(url)

    async def raw_call() -> np.ndarray:
        first = grpcclient.InferInput("A", [1, 4], "FP32").set_data_from_numpy(a)
        second = grpcclient.InferInput("B", [1, 4], "FP32").set_data_from_numpy(a)
        return (await raw.infer("add", [first, second])).as_numpy("SUM")

    async def raw_deadline_call() -> np.ndarray:
        first = grpcclient.InferInput("A", [1, 4], "FP32").set_data_from_numpy(a)
        second = grpcclient.InferInput("B", [1, 4], "FP32").set_data_from_numpy(a)
        result = await raw_dl.infer("add", [first, second], client_timeout=DEFAULT_TIMEOUT_S)
        return result.as_numpy("SUM")

    async with AsyncClient(url) as client:

        async def ours_call() -> np.ndarray:
            return (await client.infer("add", {"A": a, "B": a}))["SUM"]

        sides: dict[str, tuple[Callable[[], Awaitable[Any]], list[float]]] = {
            "raw": (raw_call, []),
            "raw_deadline": (raw_deadline_call, []),
            "tritonkit": (ours_call, []),
        }
        expected = await raw_call()
        for fn, _ in sides.values():
            assert np.array_equal(await fn(), expected)
            await _throughput(fn, 500, in_flight)
        names = list(sides)
        for index in range(rounds):
            # Rotating order within each round; a round is long enough (about half a
            # second) that one scheduler hiccup does not decide it, and a full garbage
            # collection before each side keeps a collector pause out of the timing.
            for name in names[index % 3 :] + names[: index % 3]:
                fn, sink = sides[name]
                gc.collect()
                sink.append(await _throughput(fn, round_requests, in_flight))
    await raw.close()
    await raw_dl.close()
    raw_rps, raw_dl_rps, ours_rps = (sides[name][1] for name in names)
    # Each round's sides ran back to back; the median of their ratios shrugs off a noisy round.
    pair_ratios = [ours / ref for ours, ref in zip(ours_rps, raw_rps, strict=True)]
    dl_ratios = [ours / ref for ours, ref in zip(ours_rps, raw_dl_rps, strict=True)]
    return {
        "in_flight": in_flight,
        "rounds": rounds,
        "requests_each": round_requests * rounds,
        "raw_rps_median": round(statistics.median(raw_rps), 1),
        "raw_with_deadline_rps_median": round(statistics.median(raw_dl_rps), 1),
        "tritonkit_rps_median": round(statistics.median(ours_rps), 1),
        "ratio": round(statistics.median(pair_ratios), 4),
        "ratio_min": round(min(pair_ratios), 4),
        "ratio_max": round(max(pair_ratios), 4),
        "ratio_vs_raw_with_deadline": round(statistics.median(dl_ratios), 4),
        "target": ">= 0.95",
    }


def _per_call_us(sides: dict[str, Callable[[], Any]], blocks: int, block: int = 100) -> dict[str, float]:
    """Median over ``blocks`` blocks (sides in rotating order) of each side's time per call, in us."""
    names = list(sides)
    samples: dict[str, list[float]] = {name: [] for name in names}
    gc.collect()
    for index in range(blocks):
        for name in names[index % len(names) :] + names[: index % len(names)]:
            started = time.perf_counter()
            for _ in range(block):
                sides[name]()
            samples[name].append((time.perf_counter() - started) / block * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def client_cpu(url: str, blocks: int) -> dict[str, Any]:
    """Client CPU per call: raw tritonclient vs tritonkit, with the reply recorded once and answered at once.

    Both sides build, check and decode everything as usual; only the gRPC call itself
    is replaced (tritonclient's private ``_client_stub``, in this benchmark only).
    """
    a = np.arange(4, dtype=np.float32).reshape(1, 4)

    def raw_inputs() -> list[grpcclient.InferInput]:
        first = grpcclient.InferInput("A", [1, 4], "FP32").set_data_from_numpy(a)
        second = grpcclient.InferInput("B", [1, 4], "FP32").set_data_from_numpy(a)
        return [first, second]

    raw = grpcclient.InferenceServerClient(url)
    reply = raw.infer("add", raw_inputs()).get_response()

    def answer(
        request: Any = None, metadata: Any = None, timeout: Any = None, compression: Any = None
    ) -> Any:
        return reply

    raw._client_stub.ModelInfer = answer
    with Client(url) as client:
        client.infer("add", {"A": a, "B": a})  # the metadata cached, the channel up
        client._tc._client_stub.ModelInfer = answer
        sync_us = _per_call_us(
            {
                "raw": lambda: raw.infer("add", raw_inputs()).as_numpy("SUM"),
                "tritonkit": lambda: client.infer("add", {"A": a, "B": a})["SUM"],
            },
            blocks,
        )
    raw.close()

    async def async_us() -> dict[str, float]:
        raw_aio = aioclient.InferenceServerClient(url)

        async def answer_aio(
            request: Any = None, metadata: Any = None, timeout: Any = None, compression: Any = None
        ) -> Any:
            return reply

        raw_aio._client_stub.ModelInfer = answer_aio
        async with AsyncClient(url) as aclient:
            await aclient.infer("add", {"A": a, "B": a})
            aclient._tc._client_stub.ModelInfer = answer_aio

            async def raw_block() -> None:
                for _ in range(100):
                    (await raw_aio.infer("add", raw_inputs())).as_numpy("SUM")

            async def ours_block() -> None:
                for _ in range(100):
                    (await aclient.infer("add", {"A": a, "B": a}))["SUM"]

            samples: dict[str, list[float]] = {"raw": [], "tritonkit": []}
            sides = [("raw", raw_block), ("tritonkit", ours_block)]
            gc.collect()
            for index in range(blocks):
                for name, run in sides if index % 2 == 0 else reversed(sides):
                    started = time.perf_counter()
                    await run()
                    samples[name].append((time.perf_counter() - started) / 100 * 1e6)
        await raw_aio.close()
        return {name: statistics.median(values) for name, values in samples.items()}

    report: dict[str, Any] = {"blocks": blocks, "calls_per_block": 100}
    for label, us in (("sync", sync_us), ("async", asyncio.run(async_us()))):
        report[f"{label}_raw_us"] = round(us["raw"], 2)
        report[f"{label}_tritonkit_us"] = round(us["tritonkit"], 2)
        report[f"{label}_overhead_us"] = round(us["tritonkit"] - us["raw"], 2)
        report[f"{label}_ratio"] = round(us["tritonkit"] / us["raw"], 4)
    return report


def shared_memory_transfer(url: str, repeats: int) -> dict[str, Any]:
    x = np.random.default_rng(0).random(BIG_ELEMENTS, dtype=np.float32)
    expected = float(x.sum(dtype=np.float64))
    raw = grpcclient.InferenceServerClient(url)

    def raw_call() -> float:
        tensor = grpcclient.InferInput("X", [BIG_ELEMENTS], "FP32").set_data_from_numpy(x)
        return float(raw.infer("checksum", [tensor]).as_numpy("S")[0])

    with Client(url) as client:

        def shm_call() -> float:
            return float(client.infer("checksum", {"X": x}, shared_memory="always")["S"][0])

        def plain_call() -> float:
            return float(client.infer("checksum", {"X": x}, shared_memory="never")["S"][0])

        for fn in (raw_call, shm_call, plain_call):
            assert abs(fn() - expected) < 1e-3 * abs(expected)
        samples: dict[str, list[float]] = {"raw": [], "shm": [], "plain": []}
        for index in range(repeats):
            order = [("raw", raw_call), ("shm", shm_call), ("plain", plain_call)]
            for name, fn in order if index % 2 == 0 else reversed(order):
                samples[name].extend(timed(fn, 1))
    raw.close()
    p50 = {name: percentile_ms(values, 50) for name, values in samples.items()}
    return {
        "input_mb": round(x.nbytes / 1e6, 1),
        "repeats": repeats,
        "raw_grpc_p50_ms": round(p50["raw"], 2),
        "tritonkit_plain_p50_ms": round(p50["plain"], 2),
        "tritonkit_shm_p50_ms": round(p50["shm"], 2),
        "ratio_shm_to_plain": round(p50["shm"] / p50["plain"], 4),
        "ratio_plain_to_raw": round(p50["plain"] / p50["raw"], 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000, help="sync latency: requests per side")
    parser.add_argument("--rounds", type=int, default=8, help="throughput rounds (sides rotate)")
    parser.add_argument(
        "--round-requests", type=int, default=1500, help="throughput: requests per side, per round"
    )
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--shm-repeats", type=int, default=20)
    parser.add_argument(
        "--cpu-blocks", type=int, default=200, help="client CPU: blocks of 100 calls per side"
    )
    parser.add_argument("--url", default=None, help="use a running server (models add, checksum) instead")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tritonkit-bench-") as tmp:
        server = None
        if args.url is None:
            server = TritonServer(write_repo(Path(tmp)), startup_timeout_s=120).start()
        url = args.url or server.grpc_url  # type: ignore[union-attr]
        try:
            report: dict[str, Any] = {
                "url": url,
                "sync_latency_concurrency_1": sync_latency(url, args.requests),
                "async_throughput": asyncio.run(
                    async_throughput(url, args.round_requests, args.rounds, args.in_flight)
                ),
                "shared_memory_16mb": shared_memory_transfer(url, args.shm_repeats),
                "client_cpu_per_call": client_cpu(url, args.cpu_blocks),
            }
        finally:
            if server is not None:
                server.stop()

    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    lat, thr, shm = (
        report["sync_latency_concurrency_1"],
        report["async_throughput"],
        report["shared_memory_16mb"],
    )
    print(f"sync latency, concurrency 1 ({lat['requests_each']} requests each)")
    print(
        f"  raw tritonclient.grpc            p50 {lat['raw_p50_ms']:.3f} ms  p99 {lat['raw_p99_ms']:.3f} ms"
    )
    print(
        f"  raw, with a {DEFAULT_TIMEOUT_S:g} s deadline       p50 {lat['raw_with_deadline_p50_ms']:.3f} ms"
    )
    print(
        f"  tritonkit Client                 p50 {lat['tritonkit_p50_ms']:.3f} ms  p99 {lat['tritonkit_p99_ms']:.3f} ms"
    )
    print(f"  ratio (p50) vs raw               {lat['ratio_p50']:.3f}   target <= 1.05")
    print(f"  ratio (p50) vs raw with deadline {lat['ratio_p50_vs_raw_with_deadline']:.3f}")
    print(
        f"async throughput, {thr['in_flight']} in flight ({thr['requests_each']} requests each, {thr['rounds']} rounds)"
    )
    print(f"  raw tritonclient.grpc.aio  {thr['raw_rps_median']:.1f} req/s (median round)")
    print(f"  raw, with a {DEFAULT_TIMEOUT_S:g} s deadline   {thr['raw_with_deadline_rps_median']:.1f} req/s")
    print(f"  tritonkit AsyncClient      {thr['tritonkit_rps_median']:.1f} req/s (median round)")
    print(
        f"  ratio (median of rounds)   {thr['ratio']:.3f}   (rounds {thr['ratio_min']:.3f} to {thr['ratio_max']:.3f})"
        "   target >= 0.95"
    )
    print(f"  ratio vs raw with deadline {thr['ratio_vs_raw_with_deadline']:.3f}")
    print(f"16 MB input ({shm['repeats']} calls each, p50)")
    print(f"  raw tritonclient.grpc, in-band  {shm['raw_grpc_p50_ms']:.1f} ms")
    print(f"  tritonkit, in-band              {shm['tritonkit_plain_p50_ms']:.1f} ms")
    print(f"  tritonkit, shared memory        {shm['tritonkit_shm_p50_ms']:.1f} ms")
    print(f"  ratio shm / in-band             {shm['ratio_shm_to_plain']:.3f}")
    cpu = report["client_cpu_per_call"]
    print(f"client CPU per call, no network (median of {cpu['blocks']} blocks of {cpu['calls_per_block']})")
    for label in ("sync", "async"):
        print(
            f"  {label:5s} raw {cpu[label + '_raw_us']:.1f} us  tritonkit {cpu[label + '_tritonkit_us']:.1f} us"
            f"  overhead {cpu[label + '_overhead_us']:+.1f} us  ratio {cpu[label + '_ratio']:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
