"""What this machine can do, checked for real, each missing piece with the command that fixes it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tritonkit._version import __version__
from tritonkit.errors import TritonKitError

__all__ = ["Check", "run_checks"]


@dataclass
class Check:
    """One line of the doctor's report."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None
    #: Optional pieces (a GPU, TensorRT) are reported but do not make the machine unfit.
    required: bool = True
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _platform_check() -> Check:
    glibc = platform.libc_ver()[1] or "unknown"
    debian = Path("/etc/debian_version")
    distro = f"Debian {debian.read_text().strip()}" if debian.exists() else platform.platform()
    return Check(
        "platform",
        True,
        f"tritonkit {__version__}, Python {platform.python_version()} ({sys.executable}), {distro}, glibc {glibc}",
        data={"python": sys.executable, "glibc": glibc, "distro": distro},
    )


# A model that reports, from inside the server, which Python it runs in.
_PROBE_PY = '''
import json, sys, site
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        out = config["parameters"]["report_path"]["string_value"]
        info = {"executable": sys.executable, "version": sys.version.split()[0], "prefix": sys.prefix,
                "site_packages": [p for p in sys.path if p.endswith("site-packages")]}
        for name in ("numpy", "onnxruntime"):
            try:
                module = __import__(name)
                info[name] = getattr(module, "__version__", "?")
            except Exception as exc:  # report, never fail the probe
                info[name] = "not importable: %s" % exc
        with open(out, "w") as handle:
            json.dump(info, handle)

    def execute(self, requests):
        # Doubles X: the doctor checks the answer to see that outputs survive the trip back.
        import numpy as np

        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            y = pb_utils.Tensor("Y", (x * 2).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[y]))
        return responses
'''

_PROBE_CONFIG = """
name: "tritonkit_probe"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters {{ key: "report_path" value: {{ string_value: "{report}" }} }}
"""


def _backends_check(install: Any) -> Check:
    """Each backend the server can load, with the version its files give (the onnxruntime backend's
    ONNX Runtime, the Python a python-backend stub embeds), and where the folder came from."""
    details = install.backend_details()
    where = f"; from {install.backends_from}" if install.backends_from else ""
    return Check(
        "backends",
        bool(details),
        (", ".join(info.describe() for info in details) or f"none found in {install.backend_dir}") + where,
        None if details else "pass --backend-dir DIR (or set TRITONKIT_BACKEND_DIR) to the folder holding the "
                             "server's backends, e.g. an NGC container's /opt/tritonserver/backends",
        data={"backend_dir": str(install.backend_dir), "backends_from": install.backends_from,
              "backends": [info.name for info in details], "details": [info.to_dict() for info in details]},
    )


def _server_checks(server_bin: str | None, backend_dir: str | None = None) -> list[Check]:
    from tritonkit.server import TritonServer, locate_server

    try:
        install = locate_server(server_bin, backend_dir=backend_dir)
    except TritonKitError as exc:
        return [Check("tritonserver", False, exc.message, exc.hint)]
    checks = [
        Check(
            "tritonserver binary",
            True,
            f"{install.binary} (from {install.source})",
            data={"binary": str(install.binary), "source": install.source},
        ),
        _backends_check(install),
    ]
    with tempfile.TemporaryDirectory(prefix="tritonkit-doctor-") as tmp:
        repo = Path(tmp) / "repo"
        report = Path(tmp) / "probe.json"
        model = repo / "tritonkit_probe"
        (model / "1").mkdir(parents=True)
        (model / "config.pbtxt").write_text(textwrap.dedent(_PROBE_CONFIG.format(report=report)))
        (model / "1" / "model.py").write_text(_PROBE_PY)
        has_python = "python" in install.backends()
        round_trip: list[Any] | str = "not sent"
        try:
            with TritonServer(
                repo, server_bin=server_bin, backend_dir=backend_dir, model_control="explicit", startup_timeout_s=60,
                backends_cache=Path(tmp) / "backends",  # doctor only looks: it leaves no cache behind
            ) as server:
                version = server.version()
                checks.append(
                    Check("tritonserver start", True, f"version {version}, ready in this machine",
                          data={"version": version})
                )
                checks.append(_release_check(version))
                if has_python:
                    server.load_model("tritonkit_probe")
                    round_trip = _probe_round_trip(server.http_url)
        except TritonKitError as exc:
            checks.append(Check("tritonserver start", False, exc.message, exc.hint))
            return checks
        if has_python and report.exists():
            info = json.loads(report.read_text())
            numpy_ok = not str(info.get("numpy", "")).startswith("not importable")
            checks.append(
                Check(
                    "python-backend models run in",
                    numpy_ok,
                    f"{info['executable']} (Python {info['version']}), site-packages: "
                    f"{', '.join(info['site_packages']) or 'none'}; numpy {info.get('numpy')}, "
                    f"onnxruntime {info.get('onnxruntime')}",
                    None if numpy_ok else f"{sys.executable} -m pip install numpy",
                    data=info,
                )
            )
            checks.append(_round_trip_check(round_trip, info))
    return checks


def _release_check(version: str) -> Check:
    """Which Triton release lines tritonkit knows, and which one the server here is."""
    from tritonkit.triton_releases import KNOWN_LINES, client_shm_note, install_release, known_lines_text

    here = install_release(version)
    data: dict[str, Any] = {"known_lines": list(KNOWN_LINES), "server_line": str(here) if here else None}
    if here is None:
        return Check("Triton releases", False, f"tritonkit knows {known_lines_text()}; this server ({version}) is "
                     "none of them", "lint, serve and deploy check for the line you name: --server-version X.Y",
                     required=False, data=data)
    shm = client_shm_note(here)
    return Check("Triton releases", True,
                 f"this server is {here.describe()}; lint, writers, serve and deploy know {', '.join(KNOWN_LINES)} "
                 "(NGC tags: `tritonkit repo lint --help`)" + (f"; {shm}" if shm else ""),
                 required=False, data=data)


def _probe_round_trip(http_url: str) -> list[Any] | str:
    """Send X = [1.5] to the probe over HTTP/JSON; the Y values it answered, or why there are none."""
    body = json.dumps({"inputs": [{"name": "X", "shape": [1], "datatype": "FP32", "data": [1.5]}]}).encode()
    request = urllib.request.Request(f"http://{http_url}/v2/models/tritonkit_probe/infer", data=body,
                                     method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback URL we built
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}: {exc.read().decode(errors='replace').strip()}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return str(exc)
    outputs = {o.get("name"): o.get("data", []) for o in answer.get("outputs", [])}
    return list(outputs.get("Y", []))


def _round_trip_check(round_trip: list[Any] | str, info: dict[str, Any]) -> Check:
    """Whether a python-backend model's output arrives intact (1.5 doubled is 3.0)."""
    if round_trip == [3.0]:
        return Check("python-backend outputs", True, "a probe request came back intact (1.5 × 2 = 3.0)")
    numpy_version = str(info.get("numpy", ""))
    detail = f"a probe request for 1.5 × 2 came back as {round_trip!r}, not [3.0]"
    if numpy_version[:1].isdigit() and int(numpy_version.split(".")[0]) >= 2:
        # WAR: the python backend of Triton 2.51 (and older) predates numpy 2: with numpy 2 in the
        # model's environment its outputs reach the client empty, without any error on the server.
        return Check("python-backend outputs", False,
                     f"{detail}; the models' environment has numpy {numpy_version}, which this server's "
                     "python backend does not support",
                     f"install numpy<2 into the environment models run in ({info.get('executable')} -m pip "
                     "install 'numpy<2'), or use a server whose python backend supports numpy 2")
    return Check("python-backend outputs", False, detail, "read the server log; run `tritonkit doctor` again")


def _perf_analyzer_check() -> Check:
    from tritonkit.provision.perf_analyzer import locate_perf_analyzer

    try:
        found = locate_perf_analyzer(check=True)
    except TritonKitError as exc:
        return Check("perf_analyzer", False, exc.message, exc.hint or "tritonkit perf install")
    data = {"argv": list(found.argv), "source": found.source, "mode": found.mode, "version": found.version}
    return Check("perf_analyzer", True, found.describe(), data=data)


def _onnxruntime_check() -> list[Check]:
    cpu, gpu = _dist_version("onnxruntime"), _dist_version("onnxruntime-gpu")
    if cpu and gpu:
        return [
            Check(
                "onnxruntime",
                False,
                f"both onnxruntime {cpu} and onnxruntime-gpu {gpu} are installed; they overwrite each other",
                f"{sys.executable} -m pip uninstall -y onnxruntime onnxruntime-gpu && "
                f"{sys.executable} -m pip install 'tritonkit[gpu]'  (or [cpu])",
            )
        ]
    if importlib.util.find_spec("onnxruntime") is None:
        return [Check("onnxruntime", False, "not installed", f"{sys.executable} -m pip install 'tritonkit[cpu]'")]
    import onnxruntime

    providers = list(onnxruntime.get_available_providers())
    return [
        Check(
            "onnxruntime",
            True,
            f"{onnxruntime.__version__} ({'onnxruntime-gpu' if gpu else 'onnxruntime'}); "
            f"execution providers: {', '.join(providers)}",
            data={"version": onnxruntime.__version__, "providers": providers},
        )
    ]


def _gpu_check() -> Check:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return Check(
            "GPU",
            False,
            "no NVIDIA GPU visible (nvidia-smi not found): CPU instances only; TensorRT builds unavailable",
            "run on a machine with an NVIDIA GPU and driver for GPU instances and TensorRT",
            required=False,
        )
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("GPU", False, f"nvidia-smi failed: {exc}", "check the NVIDIA driver", required=False)
    gpus = [line for line in listing.stdout.splitlines() if line.startswith("GPU ")]
    return Check(
        "GPU",
        bool(gpus),
        "; ".join(gpus) or f"nvidia-smi found no GPU: {listing.stderr.strip()}",
        None if gpus else "check the NVIDIA driver",
        required=False,
        data={"gpus": gpus},
    )


def _optional_import_check(module: str, extra: str) -> Check:
    if importlib.util.find_spec(module) is None:
        return Check(module, False, "not installed", f"{sys.executable} -m pip install 'tritonkit[{extra}]'",
                     required=False)
    try:
        imported = __import__(module)
    except Exception as exc:  # a CUDA-less machine fails here in many ways; report, don't crash
        return Check(module, False, f"installed but not importable: {exc}",
                     "needs CUDA and an NVIDIA GPU", required=False)
    return Check(module, True, f"{getattr(imported, '__version__', '?')}", required=False)


def run_checks(*, server_bin: str | None = None, backend_dir: str | None = None) -> list[Check]:
    """Run every check; never raises for a missing piece (that is what the report is for).

    ``server_bin`` / ``backend_dir`` choose the server and its backends as ``locate_server`` does."""
    checks = [_platform_check()]
    checks += _server_checks(server_bin, backend_dir)
    checks.append(_perf_analyzer_check())
    checks += _onnxruntime_check()
    checks.append(_gpu_check())
    checks.append(_optional_import_check("tensorrt", "gpu"))
    checks.append(_optional_import_check("tensorrt_llm", "llm"))
    return checks
