"""The main job on the built-in default model: build → serve → sweep → write back the winner → verdict.

Everything here is the public library, composed: ``builders.make_demo_model`` and
``builders.build_onnx`` write ``model_repository/demo_mlp``; the model folder is copied into the
run's folder (``results/<UTC>-demo_mlp-sweep/model_repository``) and
``perf.sweep.run_sweep`` serves that copy on one bundled tritonserver, tries the default config
and its variants (instances × batching window) with the real perf_analyzer, writes the winner
back into the copy and judges it against the SLA. ``model_repository/`` itself is left exactly
as the builder wrote it: the tuned configuration is a measurement of this machine, not source.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.builders import OnnxBuildResult, build_onnx, make_demo_model
from tritonkit.errors import MissingComponentError
from tritonkit.perf import parse_sla
from tritonkit.perf.measure.folders import run_folder
from tritonkit.perf.sweep import SweepEvent, SweepGrid, SweepResult, SweepSettings, run_sweep
from tritonkit.provision.bundled import install_server
from tritonkit.provision.perf_analyzer import install_perf_analyzer, locate_perf_analyzer
from tritonkit.provision.server import SERVER_BIN_ENV, bundled_root, locate_server
from tritonkit.repository import DEFAULT_WINDOW

__all__ = [
    "DEFAULT_DEMO_INSTANCES",
    "DEFAULT_DEMO_LEVELS",
    "DEFAULT_DEMO_MODEL",
    "DEFAULT_DEMO_SLA",
    "DEFAULT_DEMO_WINDOWS_US",
    "DemoRun",
    "run_demo",
]

DEFAULT_DEMO_MODEL = "demo_mlp"
#: Interactive-service SLA for a small CPU model: tail latency bounded, no failed request.
DEFAULT_DEMO_SLA = "p99<=50ms,errors==0"
DEFAULT_DEMO_LEVELS = (1, 2, 4, 8, 16)
#: One or two CPU instances (this machine has two cores), ...
DEFAULT_DEMO_INSTANCES = (1, 2)
#: ... and the builder's 5 ms batching window against none: below concurrency 8 the default
#: config's requests spend most of their time waiting in the batcher.
DEFAULT_DEMO_WINDOWS_US = (0, 5000)


@dataclass
class DemoRun:
    """What the demo built, swept and wrote."""

    build: OnnxBuildResult
    sweep: SweepResult
    tuned_repository: Path

    @property
    def exit_code(self) -> int:
        """0 a configuration meets the SLA, 1 none does, 2 nothing could be measured."""
        return self.sweep.exit_code

    @property
    def status(self) -> str:
        """The verdict in a word: ``pass``, ``fail`` or ``unmeasured`` (as :attr:`exit_code` says)."""
        return {0: "pass", 1: "fail"}.get(self.exit_code, "unmeasured")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``tritonkit demo --json``)."""
        return {"exit_code": self.exit_code, "model": DEFAULT_DEMO_MODEL, "built": str(self.build.model_dir),
                "tuned_repository": str(self.tuned_repository), "sweep": self.sweep.to_dict()}


def run_demo(
    *,
    repo: Path = Path("model_repository"),
    results_root: Path = Path("results"),
    sla: str = DEFAULT_DEMO_SLA,
    levels: str | Sequence[float] = DEFAULT_DEMO_LEVELS,
    instances: Sequence[int] = DEFAULT_DEMO_INSTANCES,
    windows_us: Sequence[int | None] = DEFAULT_DEMO_WINDOWS_US,
    step_window_ms: int = 500,
    warmup_s: float = 0.5,
    batch_window: str = DEFAULT_WINDOW,
    backend_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    on_event: Callable[[SweepEvent], None] | None = None,
    install_progress: Callable[[str], None] | None = None,
) -> DemoRun:
    """Build the default model into ``repo``, copy it into the run folder, sweep the copy within ``sla``.

    ``windows_us``: the batching windows to try; every variant keeps the dynamic batcher, so a
    ``None`` (no batcher) is dropped, and with none left the defaults are tried. Checks everything
    cheap first (SLA syntax; the server and perf_analyzer present, each installed with progress when it is
    missing; the bundled server able to run this Python's models) so a bad option costs nothing. The server is
    stopped however this ends; ``repo`` is never changed by the sweep. ``backend_dir``: the backends the
    model is built for (``--runtime auto``: the onnxruntime backend when it is there) and the sweep's
    server loads. ``install_progress`` receives the lines of an install the demo makes (default ``progress``).
    """
    windows = [w for w in windows_us if w is not None] or list(DEFAULT_DEMO_WINDOWS_US)
    say = progress or (lambda _message: None)
    parse_sla(sla)
    _ensure_installed(install_progress or say, backend_dir)
    repo.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tritonkit-demo-") as tmp:
        source = make_demo_model(Path(tmp) / f"{DEFAULT_DEMO_MODEL}.onnx")
        say(f"building {source.name} into {repo}/{DEFAULT_DEMO_MODEL} (verify, batch window {batch_window})")
        build = build_onnx(
            source, name=DEFAULT_DEMO_MODEL, repo=repo, batch_window=batch_window, force=True, log=say,
            backend_dir=backend_dir,
        )
    for line in build.summary().splitlines():
        say(line)
    folder = run_folder(DEFAULT_DEMO_MODEL, results_root, kind="sweep")
    tuned = folder / "model_repository"
    shutil.copytree(repo / DEFAULT_DEMO_MODEL, tuned / DEFAULT_DEMO_MODEL)
    say(f"sweeping a copy, {tuned}/{DEFAULT_DEMO_MODEL}: the default config and its variants, one server")
    settings = SweepSettings(
        sla=sla,
        grid=SweepGrid(instances=list(instances), windows_us=list(windows)),
        concurrency=levels if isinstance(levels, str) else [float(level) for level in levels],
        step_window_ms=step_window_ms,
        warmup_s=warmup_s,
        out=folder,
        backend_dir=backend_dir,
    )
    sweep = run_sweep(tuned, DEFAULT_DEMO_MODEL, settings, on_event=on_event)
    return DemoRun(build=build, sweep=sweep, tuned_repository=tuned)


def _ensure_installed(say: Callable[[str], None], backend_dir: Path | None) -> None:
    """perf_analyzer and the bundled server, each installed (with progress) when it is missing; then the
    server checked for this Python, so a Python its python backend cannot run is said within seconds."""
    try:
        locate_perf_analyzer()
    except MissingComponentError:
        say("perf_analyzer is not installed: installing it (tritonkit install perf_analyzer)")
        install_perf_analyzer(progress=say)
    if bundled_root() is None and not os.environ.get(SERVER_BIN_ENV):
        say("the bundled tritonserver is not installed: installing it (tritonkit install server)")
        install_server(progress=say)
    locate_server(backend_dir=backend_dir)
