"""``tritonkit infer`` against a real server, through click's CliRunner."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.support.client_models import write_counter
from tests.support.pymodels import write_add_sub
from tritonkit.cli import main
from tritonkit.server import TritonServer, free_ports

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("client_cli_repo")
    write_add_sub(repo)
    write_counter(repo, "tokens")
    with TritonServer(repo) as started:
        yield started


def test_infer_command_reads_npy_and_json_inputs_and_prints_json(
    server: TritonServer, tmp_path: Path
) -> None:
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "a.npy", a)
    result = CliRunner().invoke(
        main,
        [
            "infer", "add_sub", "--url", server.grpc_url,
            "--input", f"INPUT0={tmp_path / 'a.npy'}",
            "--input", "INPUT1=[[1, 1, 1, 1], [2, 2, 2, 2]]",
            "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["model"] == "add_sub"
    assert report["latency_ms"] > 0
    assert report["outputs"]["OUTPUT0"] == {
        "dtype": "float32",
        "shape": [2, 4],
        "data": [[1.0, 2.0, 3.0, 4.0], [6.0, 7.0, 8.0, 9.0]],
    }
    assert report["outputs"]["OUTPUT1"]["data"][1] == [2.0, 3.0, 4.0, 5.0]


def test_infer_command_prints_selected_outputs_for_people(server: TritonServer) -> None:
    result = CliRunner().invoke(
        main,
        ["infer", "add_sub", "--url", server.grpc_url, "--input", "INPUT0=[[1, 2, 3, 4]]",
         "--input", "INPUT1=[[1, 1, 1, 1]]", "--output", "OUTPUT1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "OUTPUT1  float32  shape [1, 4]" in result.output
    assert "OUTPUT0" not in result.output
    assert "[[0. 1. 2. 3.]]" in result.output


def test_infer_command_streams_a_decoupled_model(server: TritonServer) -> None:
    result = CliRunner().invoke(
        main, ["infer", "tokens", "--url", server.grpc_url, "--input", "N=[3]", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert [r["I"]["data"] for r in report["responses"]] == [[0], [1], [2]]


def test_infer_command_reports_a_bad_input_in_one_line_with_exit_2(server: TritonServer) -> None:
    result = CliRunner().invoke(
        main, ["infer", "add_sub", "--url", server.grpc_url, "--input", "INPUT0=[[1, 2, 3]]"]
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "error: model 'add_sub': request refused before sending" in result.output
    assert "missing input 'INPUT1'" in result.output
    assert "fix:" in result.output


def test_infer_command_rejects_a_malformed_input_flag(server: TritonServer, tmp_path: Path) -> None:
    runner = CliRunner()
    no_equals = runner.invoke(main, ["infer", "add_sub", "--url", server.grpc_url, "--input", "INPUT0"])
    assert no_equals.exit_code == 2
    assert "is not NAME=FILE.npy or NAME=JSON" in no_equals.output
    missing_file = runner.invoke(
        main, ["infer", "add_sub", "--url", server.grpc_url, "--input", f"INPUT0={tmp_path / 'nope.npy'}"]
    )
    assert missing_file.exit_code == 2
    assert "--input INPUT0 file not found" in missing_file.output and "fix:" in missing_file.output


def test_infer_command_reports_a_dead_server_as_a_connect_error() -> None:
    url = f"127.0.0.1:{free_ports(1)[0]}"
    result = CliRunner().invoke(main, ["infer", "add_sub", "--url", url, "--input", "INPUT0=[[1, 2, 3, 4]]"])
    assert result.exit_code == 2
    assert f"cannot connect to Triton at {url}" in result.output
    assert "Traceback" not in result.output


def test_infer_command_help_has_an_example() -> None:
    result = CliRunner().invoke(main, ["infer", "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output
    assert "tritonkit infer add_sub" in result.output


def test_infer_command_refuses_a_port_out_of_range_at_once() -> None:
    result = CliRunner().invoke(main, ["infer", "add_sub", "--url", "127.0.0.1:99999"])
    assert result.exit_code == 2
    # Refused at the edge (the CLI's --url check) or by the client's own: both name the port.
    assert re.search(r"port '?99999'? is not a number from 1 to 65535", result.output)
    assert "Traceback" not in result.output
