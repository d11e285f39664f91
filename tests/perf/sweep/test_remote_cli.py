"""``perf sweep --url`` refusals that need no server, and the journal on disk.

Each refusal is a usage error or a TritonKitError (exit 2, ``error:`` and ``fix:`` lines, no
traceback), made before anything could be loaded on a server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.sweep_models import plain_config
from tritonkit.cli import main
from tritonkit.errors import ConfigError
from tritonkit.perf.sweep.journal import STATUS_OPEN, Journal
from tritonkit.server import free_ports
from tritonkit.server.remote import RemoteServer, default_metrics_url

SLA = ["--sla", "p99<=50ms"]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["perf", "sweep", *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.mark.parametrize(("args", "said"), [
    (["m", "--apply", *SLA], "--apply only go with --url"),
    (["repo", "m", "--repo", ".", *SLA], "--repo only go with --url"),
    (["--url", "127.0.0.1:8001", *SLA], "Missing argument 'MODEL'"),
    (["--url", "127.0.0.1:8001", "--restore"], "--restore needs --out DIR"),
    (["--url", "127.0.0.1:8001", "a", "b", "--cluster", "auto", *SLA], "sweep one model at a time with --cluster"),
    (["--url", "127.0.0.1:8001", "a", "b", "--share", "c=2", *SLA], "--share names model(s) not swept: c"),
    (["--url", "127.0.0.1:8001", "m"], "Missing option '--sla'"),
    (["m", *SLA], "Missing argument 'REPO MODEL [MODEL...]'"),
    (["--url", "http://127.0.0.1:8001", "m", *SLA], "without a scheme"),
    (["--url", "127.0.0.1:8001", "../m", *SLA], "MODEL"),
    (["repo", "m", "--clients", "2", *SLA], "--clients only go with --url"),
    (["--url", "127.0.0.1:8001", "m", "--clients", "2", *SLA], "need --cluster ADDR"),
    (["--url", "127.0.0.1:8001", "m", "--cluster", "auto", "--separately", *SLA], "not with --url"),
    (["--url", "127.0.0.1:8001", "m", "--backend-dir", ".", *SLA], "describe a server the sweep starts"),
    (["--url", "127.0.0.1:8001", "m", "--pin", "pre.instances=2", *SLA], "--pin names pre"),
], ids=["apply-local", "repo-local", "no-model", "restore-no-out", "cluster-several", "share-unknown", "no-sla",
        "no-repo", "scheme", "bad-name", "clients-local", "clients-no-cluster", "separately", "backend-dir",
        "composing-pin-no-target"])
def test_a_sweep_by_url_is_refused_with_a_usage_error_before_any_server_is_asked(args: list[str], said: str) -> None:
    code, output = _run(*args)
    assert code == 2 and said in output and "error:" in output, output


def test_the_local_form_still_refuses_a_repository_that_does_not_exist(tmp_path: Path) -> None:
    code, output = _run(str(tmp_path / "nowhere"), "m", *SLA)
    assert code == 2 and "does not exist" in output, output


@pytest.mark.perf_analyzer
def test_nothing_answering_at_the_url_is_a_clear_error_and_no_journal_is_written(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    code, output = _run("m", "--url", f"127.0.0.1:{port}", *SLA, "--out", str(tmp_path / "out"))
    assert code == 2 and f"nothing answered at 127.0.0.1:{port}" in output and "fix:" in output, output
    assert not (tmp_path / "out" / "journal.json").exists()


def test_the_metrics_page_defaults_to_the_same_host_on_port_8002() -> None:
    assert default_metrics_url("10.0.0.9:8001") == "http://10.0.0.9:8002/metrics"
    assert default_metrics_url("[::1]:9001") == "http://[::1]:8002/metrics"


def test_a_journal_is_written_atomically_and_read_back_as_the_served_config(tmp_path: Path) -> None:
    config = plain_config()
    server = RemoteServer("127.0.0.1:1")
    server._metadata = {"version": "2.51.0"}  # what the server said; no server here
    journal = Journal.begin(tmp_path, server, {"m": config})
    again = Journal.read(tmp_path)
    assert again is not None and again.status == STATUS_OPEN and again.url == "127.0.0.1:1"
    assert again.config("m") == config and again.server_version == "2.51.0"
    journal.close("restored", "put back")
    assert json.loads((tmp_path / "journal.json").read_text())["status"] == "restored"
    assert not [p for p in tmp_path.iterdir() if p.name != "journal.json"]  # no temp file left


@pytest.mark.parametrize("text", ["{", '{"url": "x"}', '{"url": "x", "status": "open", "configs": {"m": {"nope": 1}}}'])
def test_a_damaged_journal_is_a_config_error_naming_it(tmp_path: Path, text: str) -> None:
    (tmp_path / "journal.json").write_text(text)
    with pytest.raises(ConfigError) as caught:
        journal = Journal.read(tmp_path)
        assert journal is not None
        journal.config("m")
    assert "journal" in caught.value.message and caught.value.hint


def test_restore_without_a_journal_or_of_another_server_is_refused(tmp_path: Path) -> None:
    code, output = _run("--url", "127.0.0.1:8001", "--restore", "--out", str(tmp_path))
    assert code == 2 and "no sweep journal in" in output, output
    server = RemoteServer("10.0.0.9:8001")
    server._metadata = {"version": "2.51.0"}
    Journal.begin(tmp_path, server, {"m": plain_config()})
    code, output = _run("--url", "127.0.0.1:8001", "--restore", "--out", str(tmp_path))
    assert code == 2 and "journals the server at 10.0.0.9:8001" in output and "--url 10.0.0.9:8001" in output, output
