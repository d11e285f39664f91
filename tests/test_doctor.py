"""`tritonkit doctor` tells the truth about this machine: each check is compared with a real probe."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from click.testing import CliRunner

from tritonkit.cli import main


def test_doctor_reports_the_real_server_its_python_and_perf_analyzer() -> None:
    result = CliRunner().invoke(main, ["doctor", "--json"])
    checks = {c["name"]: c for c in json.loads(result.output)}
    assert result.exit_code == 0, result.output

    assert checks["tritonserver start"]["ok"]
    assert checks["tritonserver start"]["data"]["version"].startswith("2.")
    assert "python" in checks["backends"]["data"]["backends"]

    models = checks["python-backend models run in"]
    assert models["ok"]
    # The probe model ran inside the server: it must have seen this interpreter's environment.
    assert Path(models["data"]["executable"]).parent == Path(sys.executable).parent
    assert any(Path(p).is_relative_to(Path(sys.prefix)) for p in models["data"]["site_packages"])

    perf = checks["perf_analyzer"]
    assert perf["ok"] and perf["data"]["version"]

    assert checks["GPU"]["ok"] == (shutil.which("nvidia-smi") is not None)
    assert "CPUExecutionProvider" in checks["onnxruntime"]["data"]["providers"]


def test_doctor_with_a_missing_server_binary_names_it_and_the_fix(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["doctor", "--server-bin", str(tmp_path / "tritonserver")])
    assert result.exit_code == 1
    assert "does not exist or is not executable" in result.output
    assert "fix:" in result.output
