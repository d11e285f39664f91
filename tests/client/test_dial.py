"""The dial (TLS and headers) without a server: what it keeps of a secret, the options it becomes for
tritonclient and perf_analyzer, its command-line forms and their refusals.

The handshakes themselves are tested against a real server in ``test_tls.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritonkit._dial import PLAIN, Dial, dial_for, parse_headers, registered
from tritonkit.cli import main
from tritonkit.errors import ConfigError
from tritonkit.perf.llm._keyed import (
    HEADERS_VAR,
    headers_command,
    key_environment,
    keyed_command,
    split_keyed,
)
from tritonkit.perf.measure.spec import PerfSpec, to_argv

_SECRET = "hunter2-not-for-files"


def test_a_header_value_never_shows_in_the_repr_or_the_options_it_prints() -> None:
    dial = Dial(ca="ca.crt", cert="c.crt", key="c.key", headers=(("X-Admin-Key", _SECRET),))
    assert dial.tls and dial.headers == (("x-admin-key", _SECRET),)  # names travel lower case, as gRPC wants
    assert _SECRET not in repr(dial) and _SECRET not in dial.options()
    assert dial.options() == " --tls-ca ca.crt --tls-cert c.crt --tls-key c.key --header x-admin-key=<value>"


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"cert": "c.crt"}, "--tls-cert and --tls-key go together"),
    ({"key": "c.key"}, "--tls-cert and --tls-key go together"),
    ({"headers": (("bad name", "v"),)}, "is not a header name"),
    ({"headers": (("x", "two\nlines"),)}, "a line break"),
    ({"headers": (("x", "  "),)}, "an empty value"),
])
def test_a_dial_that_cannot_work_is_refused_naming_what_is_wrong_never_a_value(kwargs: dict, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Dial(**kwargs)
    assert said in caught.value.message and "two" not in caught.value.message


def test_headers_are_read_as_name_value_pairs_and_from_a_file_of_lines(tmp_path: Path) -> None:
    (tmp_path / "h.txt").write_text(f"# a comment\nx-one: {_SECRET}\n\nX-Two=2\n")
    assert parse_headers(["a=b=c", "k: v", f"@{tmp_path / 'h.txt'}"]) == (
        ("a", "b=c"), ("k", "v"), ("x-one", _SECRET), ("x-two", "2"))
    with pytest.raises(ConfigError) as caught:
        parse_headers([f"no-separator-{_SECRET}"])
    assert _SECRET not in str(caught.value)
    with pytest.raises(ConfigError, match="--header file"):
        parse_headers([f"@{tmp_path / 'missing.txt'}"])


def test_perf_analyzer_gets_the_tls_files_of_the_servers_dial_and_never_a_header_value() -> None:
    dial = Dial(ca="/p/ca.crt", cert="/p/c.crt", key="/p/c.key", headers=(("x-k", _SECRET),))
    assert dial.perf_analyzer_args("grpc") == [
        "--ssl-grpc-use-ssl", "--ssl-grpc-root-certifications-file", "/p/ca.crt",
        "--ssl-grpc-private-key-file", "/p/c.key", "--ssl-grpc-certificate-chain-file", "/p/c.crt"]
    assert Dial(tls=True).perf_analyzer_args("grpc") == ["--ssl-grpc-use-ssl"]
    assert PLAIN.perf_analyzer_args("grpc") == []
    with registered("10.0.0.9:8000", dial):
        argv = to_argv(PerfSpec(model="m", url="10.0.0.9:8000", protocol="http"))
        assert dial_for("10.0.0.9:8000") is dial and dial_for("10.0.0.8:8000") is PLAIN
    assert argv[argv.index("-u") + 1] == "https://10.0.0.9:8000"
    assert "--ssl-https-ca-certificates-file" in argv and _SECRET not in argv
    assert dial_for("10.0.0.9:8000") is PLAIN  # registered for the block only


def test_headers_reach_perf_analyzer_through_its_environment_and_its_argv_names_the_variable_only() -> None:
    command = headers_command((("x-one", _SECRET), ("x-two", "2")), ["/bin/echo", "-m", "model"])
    assert _SECRET not in " ".join(command)
    variable, inner = split_keyed(command)
    assert variable == HEADERS_VAR and inner == ["/bin/echo", "-m", "model"]
    assert key_environment(variable)[HEADERS_VAR] == f"x-one: {_SECRET}\nx-two: 2"
    # With an OpenAI key too: both variables, the command once.
    both = headers_command((("x-one", _SECRET),), keyed_command("TK_TEST_KEY", ["/bin/echo"]))
    assert split_keyed(both) == (f"TK_TEST_KEY,{HEADERS_VAR}", ["/bin/echo"])
    ran = subprocess.run([sys.executable, "-m", "tritonkit.perf.llm._keyed", *command[3:]], capture_output=True,
                         text=True, timeout=60, check=True, env={**os.environ, HEADERS_VAR: f"x-one: {_SECRET}"})
    assert ran.stdout.split() == ["-m", "model", "-H", "x-one:", _SECRET]
    assert headers_command((), ["/bin/pa"]) == ["/bin/pa"]


def test_a_ca_file_that_is_no_certificate_is_refused_naming_the_option(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="--tls-ca .*not a PEM certificate"):
        Dial(ca=tmp_path / "ca.crt").ssl_context()


def test_the_command_line_refuses_a_malformed_header_and_tls_options_without_a_server_to_dial(
        tmp_path: Path) -> None:
    bad = CliRunner().invoke(main, ["infer", "m", "--header", f"oops-{_SECRET}"])
    assert bad.exit_code == 2 and "error: --header" in bad.output and "fix:" in bad.output
    assert _SECRET not in bad.output
    (tmp_path / "repo" / "m").mkdir(parents=True)
    local = CliRunner().invoke(main, ["perf", "sweep", str(tmp_path / "repo"), "m", "--sla", "p99<=1s", "--tls"])
    assert local.exit_code == 2 and "go with --url" in local.output


def test_a_dry_run_shows_the_tls_options_and_the_header_wrapper_without_the_value(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("not a certificate\n")  # nothing answers: the dry run never reads it
    result = CliRunner().invoke(main, ["perf", "run", "m", "--url", "127.0.0.1:1", "--concurrency", "1",
                                       "--dry-run", "--tls-ca", str(tmp_path / "ca.crt"),
                                       "--header", f"x-k={_SECRET}"])
    assert result.exit_code == 0, result.output
    assert "--ssl-grpc-root-certifications-file" in result.output and HEADERS_VAR in result.output
    assert _SECRET not in result.output


def test_a_step_a_restricted_grpc_protocol_refused_says_perf_analyzer_sends_headers_over_http_only() -> None:
    from tritonkit.perf.measure.failures import diagnose_request_errors

    # The console of a gRPC step against --grpc-restricted-protocol=inference:... (perf_analyzer 2.60, seen here).
    said = diagnose_request_errors("Thread [0] had error: This protocol is restricted, expecting header "
                                   "'triton-grpc-protocol-infer-key'\n")
    assert said is not None and "--protocol http" in said.message
