"""A running server's own facts, read over its API from a real tritonserver: ``doctor --url``,
the model-control probe (which must change nothing), and ``repo lint --server`` for its release."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.remote_server import RemoteFixture
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.server import ServerAdmin
from tritonkit.server.facts import CONTROL_EXPLICIT, CONTROL_NOT_EXPLICIT, model_control_of, read_facts

pytestmark = [pytest.mark.server]


@pytest.fixture(scope="module", params=["explicit", "none", "poll"])
def remote(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteFixture]:
    repo = tmp_path_factory.mktemp("facts-repo")
    write_sleepy(repo)
    write_sleepy(repo, "idle")  # in explicit mode, known to the index but never loaded
    fixture = RemoteFixture(repo, ["sleepy"], mode=request.param)
    try:
        yield fixture
    finally:
        fixture.stop()


def test_the_model_control_probe_tells_explicit_from_not_and_changes_nothing(remote: RemoteFixture) -> None:
    admin = ServerAdmin(remote.server.http_url, timeout_s=30.0)
    index = admin.index()
    control = model_control_of(ServerAdmin(remote.url, protocol="grpc", timeout_s=30.0))
    assert control == (CONTROL_EXPLICIT if remote.mode == "explicit" else CONTROL_NOT_EXPLICIT)
    assert admin.index() == index  # nothing loaded, unloaded or added


def test_read_facts_names_the_version_extensions_and_each_models_state_and_backend(remote: RemoteFixture) -> None:
    facts = read_facts(ServerAdmin(remote.url, protocol="grpc", timeout_s=30.0))
    assert facts.version == "2.51.0" and "model_repository" in facts.extensions
    assert facts.explicit is (remote.mode == "explicit") and facts.backends_in_use == ["python"]
    assert facts.client_shm.startswith("allowed")  # 2.51 predates the --allow-client-shm policy
    states = {m.name: m for m in facts.models}
    assert states["sleepy"].state == "READY" and states["sleepy"].backend == "python"
    assert states["sleepy"].instances == "instances 1×CPU" and "python backend" in states["sleepy"].runtime
    if remote.mode == "explicit":
        assert states["idle"].state != "READY" and states["idle"].backend == ""


def test_doctor_url_prints_the_servers_facts_and_json(remote: RemoteFixture) -> None:
    text = CliRunner().invoke(main, ["doctor", "--url", remote.url])
    assert text.exit_code == 0, text.output
    assert f"server: triton 2.51.0 at {remote.url}" in text.output and "sleepy v1: READY" in text.output
    if remote.mode != "explicit":
        assert "fix: start tritonserver with --model-control-mode=explicit" in text.output
    data = json.loads(CliRunner().invoke(main, ["doctor", "--url", remote.url, "--json"]).output)
    assert data["explicit_model_control"] is (remote.mode == "explicit")
    assert data["backends_in_use"] == ["python"] and data["version"] == "2.51.0"


def test_repo_lint_with_server_lints_for_the_release_that_server_reports(remote: RemoteFixture) -> None:
    result = CliRunner().invoke(main, ["repo", "lint", str(remote.repo), "--server", remote.url, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    assert "2.51" in json.dumps(json.loads(result.output).get("target", {})), result.output


def test_doctor_url_refuses_local_server_options_and_names_a_dead_address(tmp_path: Path) -> None:
    from tritonkit.server import free_ports

    result = CliRunner().invoke(main, ["doctor", "--url", "127.0.0.1:8001", "--backend-dir", str(tmp_path)])
    assert result.exit_code == 2 and "not with --url" in result.output
    port = free_ports(1)[0]
    result = CliRunner().invoke(main, ["doctor", "--url", f"127.0.0.1:{port}"])
    assert result.exit_code == 2 and "nothing answered" in result.output and "Traceback" not in result.output
