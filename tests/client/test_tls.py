"""Reaching a secured server: the bundled tritonserver with gRPC over mutual TLS and its
model-repository protocol restricted to an admin key, started by the test with certificates the
test made (:mod:`tests.support.tls`).

``infer``, ``perf run`` and ``perf sweep --url`` over mutual TLS; each TLS mismatch and each header
refusal with its own error naming the option that fixes it; and no file a run wrote holding the
admin key (it is grepped for).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.support.pymodels import write_add_sub
from tests.support.remote_server import RemoteFixture
from tests.support.sweep_models import write_sleepy
from tests.support.tls import ADMIN_HEADER, ADMIN_KEY, Pki, make_pki, mutual_tls_args
from tritonkit._dial import Dial
from tritonkit.cli import main
from tritonkit.client import AsyncClient, Client
from tritonkit.errors import NotAuthorisedError, TLSError
from tritonkit.server import ServerAdmin

pytestmark = pytest.mark.server

_A = [[1.0, 2.0, 3.0, 4.0]]
_B = [[10.0, 20.0, 30.0, 40.0]]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[RemoteFixture]:
    repo = tmp_path_factory.mktemp("secured-repo")
    write_sleepy(repo)
    write_add_sub(repo)
    fixture = RemoteFixture(repo, ["sleepy", "add_sub"], extra_args=tuple(mutual_tls_args(pki)))
    try:
        yield fixture
    finally:
        fixture.stop()


def _mutual(pki: Pki, **more: object) -> Dial:
    cert, key = pki.client
    return Dial(ca=pki.ca, cert=cert, key=key, **more)  # type: ignore[arg-type]


def _mutual_options(pki: Pki) -> list[str]:
    """The command-line options of a mutual-TLS client."""
    cert, key = pki.client
    return ["--tls-ca", str(pki.ca), "--tls-cert", str(cert), "--tls-key", str(key)]


def _no_secret_in(folder: Path) -> list[Path]:
    """Every file under ``folder`` that holds the admin key."""
    return [p for p in folder.rglob("*") if p.is_file() and ADMIN_KEY.encode() in p.read_bytes()]


def _infer_args(url: str) -> list[str]:
    return ["infer", "add_sub", "--url", url, "--input", f"INPUT0={_A}", "--input", f"INPUT1={_B}", "--json"]


def test_infer_over_mutual_tls_answers_and_without_the_tls_options_fails_naming_tls(
        secured: RemoteFixture, pki: Pki) -> None:
    result = CliRunner().invoke(main, [*_infer_args(secured.url), *_mutual_options(pki)])
    assert result.exit_code == 0, result.output
    outputs = json.loads(result.output)["outputs"]
    assert outputs["OUTPUT0"]["data"] == [[11.0, 22.0, 33.0, 44.0]]
    assert outputs["OUTPUT1"]["data"] == [[-9.0, -18.0, -27.0, -36.0]]

    plain = CliRunner().invoke(main, _infer_args(secured.url))
    assert plain.exit_code == 2, plain.output
    assert "speaks TLS, and this connection was plain text" in plain.output
    assert "fix:" in plain.output and "--tls-ca" in plain.output
    assert "Traceback" not in plain.output


def test_the_options_also_come_from_the_environment(secured: RemoteFixture, pki: Pki) -> None:
    cert, key = pki.client
    env = {"TRITONKIT_TLS_CA": str(pki.ca), "TRITONKIT_TLS_CERT": str(cert), "TRITONKIT_TLS_KEY": str(key)}
    result = CliRunner().invoke(main, _infer_args(secured.url), env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["outputs"]["OUTPUT0"]["data"] == [[11.0, 22.0, 33.0, 44.0]]


def _tls_error(url: str, dial: Dial) -> TLSError:
    with Client(url, dial=dial, timeouts=20.0) as client, pytest.raises(TLSError) as caught:
        client.infer("add_sub", {"INPUT0": np.ones((1, 4), np.float32), "INPUT1": np.ones((1, 4), np.float32)})
    return caught.value


@pytest.mark.parametrize(("case", "said", "fix"), [
    ("plain", "speaks TLS, and this connection was plain text", "--tls-ca"),
    ("no client certificate", "asks for a client certificate (mutual TLS) and none was given", "--tls-cert"),
    ("unknown CA", "its certificate is not signed by the CA in", "--tls-ca"),
    ("refused client certificate", "refused the client certificate", "--grpc-root-cert"),
    ("name not on the certificate", "does not carry the name dialed", "--tls-server-name"),
    ("TLS to a plain port", "does not speak TLS", "drop the --tls options"),
])
def test_each_tls_mismatch_has_its_own_error_naming_the_option_that_fixes_it(
        secured: RemoteFixture, pki: Pki, case: str, said: str, fix: str) -> None:
    cert, key = pki.client
    url, dial = secured.url, {
        "plain": Dial(),
        "no client certificate": Dial(ca=pki.ca),
        "unknown CA": Dial(ca=pki.path("other-ca.crt"), cert=cert, key=key),
        "refused client certificate": Dial(ca=pki.ca, cert=pki.path("stranger.crt"), key=pki.path("stranger.key")),
        "name not on the certificate": _mutual(pki, server_name="triton.example.com"),
        "TLS to a plain port": _mutual(pki),
    }[case]
    if case == "TLS to a plain port":
        url = secured.server.http_url  # the server's HTTP port speaks plain text
    error = _tls_error(url, dial)
    assert said in error.message, error.message
    assert error.hint is not None and fix in error.hint, error.hint


def test_the_asyncio_client_reaches_it_over_mutual_tls_and_names_a_missing_certificate(
        secured: RemoteFixture, pki: Pki) -> None:
    feeds = {"INPUT0": np.asarray(_A, np.float32), "INPUT1": np.asarray(_B, np.float32)}

    async def calls() -> tuple[np.ndarray, TLSError | None]:
        async with AsyncClient(secured.url, dial=_mutual(pki)) as client:
            out = (await client.infer("add_sub", feeds))["OUTPUT0"]
        try:
            async with AsyncClient(secured.url, dial=Dial(ca=pki.ca)) as client:
                await client.infer("add_sub", feeds)
        except TLSError as exc:
            return out, exc
        return out, None

    out, error = asyncio.run(calls())
    assert out.tolist() == [[11.0, 22.0, 33.0, 44.0]]
    assert error is not None and "asks for a client certificate" in error.message


def test_a_restricted_protocol_says_which_header_it_expects_and_whether_it_was_missing_or_wrong(
        secured: RemoteFixture, pki: Pki) -> None:
    said = {}
    for label, headers in (("missing", ()), ("wrong", ((ADMIN_HEADER, "not-the-key"),))):
        admin = ServerAdmin(secured.url, protocol="grpc", dial=_mutual(pki, headers=headers))
        try:
            with pytest.raises(NotAuthorisedError) as caught:
                admin.index()
        finally:
            admin.close()
        assert caught.value.header == ADMIN_HEADER
        assert caught.value.hint is not None and f"--header {ADMIN_HEADER}=VALUE" in caught.value.hint
        assert "not-the-key" not in str(caught.value)
        said[label] = caught.value.message
    assert "it was not sent" in said["missing"]
    assert "the value sent is not the one it expects" in said["wrong"]
    admin = ServerAdmin(secured.url, protocol="grpc", dial=_mutual(pki, headers=((ADMIN_HEADER, ADMIN_KEY),)))
    try:
        assert {"sleepy", "add_sub"} <= {state.name for state in admin.index()}
    finally:
        admin.close()


@pytest.mark.perf_analyzer
def test_perf_run_over_mutual_tls_measures_its_steps_and_no_file_holds_the_header_value(
        secured: RemoteFixture, pki: Pki, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(main, [
        "perf", "run", "add_sub", "--url", secured.url, "--concurrency", "1,2", "--duration-s", "1.5",
        "--warmup-s", "0.5", "--out", str(out), *_mutual_options(pki)],
        env={"TRITONKIT_HEADERS": f"{ADMIN_HEADER}={ADMIN_KEY}"})
    assert result.exit_code == 0, result.output
    steps = json.loads((out / "result.json").read_text())["steps"]
    assert [s["load_value"] for s in steps] == [1.0, 2.0]
    assert all(s["throughput_per_s"] and s["throughput_per_s"] > 0 and not s.get("failure") for s in steps), steps
    argv = json.loads((out / "step01-c1.argv.json").read_text())
    assert "--ssl-grpc-use-ssl" in argv and str(pki.ca) in argv
    assert "tritonkit.perf.llm._keyed" in argv  # the header's value reaches perf_analyzer from its environment
    assert _no_secret_in(out) == [] and ADMIN_KEY not in result.output
    plain = CliRunner().invoke(main, ["perf", "run", "add_sub", "--url", secured.url, "--concurrency", "1",
                                      "--out", str(tmp_path / "plain")])
    assert plain.exit_code == 2 and "speaks TLS, and this connection was plain text" in plain.output, plain.output


@pytest.mark.perf_analyzer
def test_perf_sweep_by_url_over_mutual_tls_with_the_admin_header_measures_and_leaves_the_served_config(
        secured: RemoteFixture, pki: Pki, tmp_path: Path) -> None:
    before = secured.served("sleepy")
    headers = tmp_path / "headers.txt"  # the key in a file: never typed on the command line
    headers.write_text(f"# the server's admin key\n{ADMIN_HEADER}: {ADMIN_KEY}\n")
    out = tmp_path / "sweep"
    result = CliRunner().invoke(main, [
        "perf", "sweep", "sleepy", "--url", secured.url, "--metrics-url", secured.server.metrics_url,
        "--sla", "p99<=200ms", "--instances", "1,2", "--concurrency", "2,4", "--window-ms", "300",
        "--warmup-s", "0.3", "--out", str(out), "--json", *_mutual_options(pki), "--header", f"@{headers}"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    measured = [v for v in document["variants"] if v["status"] == "measured"]
    assert len(measured) >= 2, document["variants"]
    assert secured.served("sleepy") == before
    restore = document["remote"]["restore_command"]
    assert f"--tls-ca {pki.ca}" in restore and f"--header {ADMIN_HEADER}=<value>" in restore
    assert _no_secret_in(out) == [] and ADMIN_KEY not in result.output


@pytest.fixture(scope="module")
def restricted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteFixture]:
    """A plain server whose inference protocol wants ``triton-grpc-protocol-infer-key``."""
    repo = tmp_path_factory.mktemp("restricted-repo")
    write_add_sub(repo)
    fixture = RemoteFixture(repo, ["add_sub"], extra_args=(f"--grpc-restricted-protocol=inference:infer-key={ADMIN_KEY}",))
    try:
        yield fixture
    finally:
        fixture.stop()


def test_headers_go_with_every_call_of_a_client_or_with_one_call_and_one_stream(restricted: RemoteFixture) -> None:
    feeds = {"INPUT0": np.asarray(_A, np.float32), "INPUT1": np.asarray(_B, np.float32)}
    key = {"triton-grpc-protocol-infer-key": ADMIN_KEY}
    with Client(restricted.url) as client:
        with pytest.raises(NotAuthorisedError, match="it was not sent"):
            client.infer("add_sub", feeds)
        assert client.infer("add_sub", feeds, headers=key)["OUTPUT0"].tolist() == [[11.0, 22.0, 33.0, 44.0]]
        with pytest.raises(NotAuthorisedError, match="not the one it expects"):
            client.infer("add_sub", feeds, headers={"triton-grpc-protocol-infer-key": "wrong"})
        with client.stream("add_sub", feeds, headers=key) as stream:
            assert [r["OUTPUT1"].tolist() for r in stream] == [[[-9.0, -18.0, -27.0, -36.0]]]
    with Client(restricted.url, dial=Dial(headers=tuple(key.items()))) as client:
        assert client.infer("add_sub", feeds)["OUTPUT0"].tolist() == [[11.0, 22.0, 33.0, 44.0]]

    async def streamed() -> list[list[list[float]]]:
        async with AsyncClient(restricted.url, dial=Dial(headers=tuple(key.items()))) as client, \
                client.stream("add_sub", feeds) as stream:
            return [r["OUTPUT0"].tolist() async for r in stream]

    assert asyncio.run(streamed()) == [[[11.0, 22.0, 33.0, 44.0]]]


def test_doctor_and_repo_lint_read_the_secured_server_with_the_same_options(secured: RemoteFixture, pki: Pki) -> None:
    doctor = CliRunner().invoke(main, ["doctor", "--url", secured.url, "--json", *_mutual_options(pki),
                                       "--header", f"{ADMIN_HEADER}={ADMIN_KEY}"])
    assert doctor.exit_code == 0, doctor.output
    data = json.loads(doctor.output)
    assert data["version"] == "2.51.0" and data["explicit_model_control"] is True  # asked through the admin key
    assert ADMIN_KEY not in doctor.output
    args = ["repo", "lint", str(secured.repo), "--server", secured.url, "--format", "json", *_mutual_options(pki)]
    refused = CliRunner().invoke(main, args)  # it reads the repository index: a model-repository call
    assert refused.exit_code == 2 and f"header '{ADMIN_HEADER}', and it was not sent" in refused.output
    lint = CliRunner().invoke(main, [*args, "--header", f"{ADMIN_HEADER}={ADMIN_KEY}"])
    assert lint.exit_code in (0, 1), lint.output
    assert "2.51" in json.dumps(json.loads(lint.output).get("target", {})), lint.output
