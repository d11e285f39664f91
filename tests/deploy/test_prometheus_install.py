"""Prometheus and promtool from Debian's package, unpacked privately (scripts/test installs it first)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritonkit.cli import main
from tritonkit.deploy import install_prometheus, locate_prometheus
from tritonkit.deploy.prometheus import PROMETHEUS_DIR_ENV, default_prometheus_dir
from tritonkit.errors import MissingComponentError


def test_the_private_install_is_debians_package_inside_this_environment() -> None:
    found = locate_prometheus()
    root = default_prometheus_dir()
    assert root.is_relative_to(Path(sys.prefix))
    assert found.promtool == root / "usr" / "bin" / "promtool"
    record = json.loads((root / "install.json").read_text())
    assert record["package"].startswith("prometheus_") and record["package"].endswith(".deb")
    proc = subprocess.run([str(found.prometheus), "--version"], capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 0 and found.version in (proc.stdout + proc.stderr)


def test_installing_again_is_quick_and_changes_nothing() -> None:
    before = (default_prometheus_dir() / "install.json").stat().st_mtime_ns
    said: list[str] = []
    again = install_prometheus(progress=said.append)
    assert again == locate_prometheus()
    assert said == []  # nothing fetched
    assert (default_prometheus_dir() / "install.json").stat().st_mtime_ns == before


def test_a_wrong_override_folder_is_named_with_a_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROMETHEUS_DIR_ENV, str(tmp_path))
    with pytest.raises(MissingComponentError) as info:
        locate_prometheus()
    assert str(tmp_path) in info.value.message and info.value.hint


def test_cli_install_reports_the_version() -> None:
    result = CliRunner().invoke(main, ["deploy", "install-prometheus", "--quiet"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"prometheus {locate_prometheus().version}")
