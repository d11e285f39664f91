"""`tritonkit doctor` tells the truth about this machine: each check is compared with a real probe."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritonkit.cli import main

pytestmark = pytest.mark.server


def test_doctor_reports_the_real_server_its_python_and_perf_analyzer() -> None:
    result = CliRunner().invoke(main, ["doctor", "--json"])
    checks = {c["name"]: c for c in json.loads(result.output)}
    assert result.exit_code == 0, result.output

    assert checks["tritonserver start"]["ok"]
    assert checks["tritonserver start"]["data"]["version"].startswith("2.")
    releases = checks["Triton releases"]
    assert releases["ok"] and releases["data"]["known_lines"][0] == "2.51" and releases["data"]["known_lines"][-1] == "2.73"
    assert checks["tritonserver start"]["data"]["version"].startswith(f"{releases['data']['server_line']}.")
    assert "python" in checks["backends"]["data"]["backends"]

    models = checks["python-backend models run in"]
    assert models["ok"]
    # The probe model ran inside the server: it must have seen this interpreter's environment.
    assert Path(models["data"]["executable"]).parent == Path(sys.executable).parent
    assert any(Path(p).is_relative_to(Path(sys.prefix)) for p in models["data"]["site_packages"])

    # A request went through the probe model and its output came back intact.
    assert checks["python-backend outputs"]["ok"], checks["python-backend outputs"]

    perf = checks["perf_analyzer"]
    assert perf["ok"] and perf["data"]["version"]

    assert checks["GPU"]["ok"] == (shutil.which("nvidia-smi") is not None)
    assert "CPUExecutionProvider" in checks["onnxruntime"]["data"]["providers"]


def test_doctor_with_a_missing_server_binary_names_it_and_the_fix(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["doctor", "--server-bin", str(tmp_path / "tritonserver")])
    assert result.exit_code == 1
    assert "does not exist or is not executable" in result.output
    assert "fix:" in result.output


def test_empty_python_backend_outputs_with_numpy_2_name_the_numpy_version_and_the_fix() -> None:
    """The failure seen on a machine whose model environment had numpy 2 (this one pins numpy<2)."""
    from tritonkit.provision.doctor import _round_trip_check

    check = _round_trip_check([], {"numpy": "2.5.2", "executable": "/opt/env/bin/python3"})
    assert not check.ok
    assert "numpy 2.5.2" in check.detail and "came back as []" in check.detail
    assert check.fix is not None and "numpy<2" in check.fix and "/opt/env/bin/python3" in check.fix
    assert _round_trip_check([3.0], {"numpy": "2.5.2"}).ok
    other = _round_trip_check("HTTP 500: boom", {"numpy": "1.26.4"})
    assert not other.ok and "numpy" not in (other.fix or "")
