"""The manifests know the Triton release the image runs: ``--allow-client-shm=true`` only when asked
(``--client-shm``) and only for a release that needs it (2.68+, the server's src/command_line_parser.cc
at r26.04); a release the image tag does not name is asked for, not guessed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support import deploy_repos
from tritonkit.cli import main
from tritonkit.deploy import K8sOptions, RepositoryFacts, RepositorySource, build_manifests
from tritonkit.errors import ConfigError
from tritonkit.triton_releases import CLIENT_SHM_FLAG

cpu_facts = deploy_repos.cpu_facts
OLD, NEW = "nvcr.io/nvidia/tritonserver:24.10-py3", "nvcr.io/nvidia/tritonserver:26.04-py3"
DIGEST = "nvcr.io/nvidia/tritonserver@sha256:" + "a" * 64


def _server_args(facts: RepositoryFacts, options: K8sOptions) -> tuple[list[str], list[str]]:
    manifests = build_manifests(facts, None, options)
    docs: list[dict[str, Any]] = manifests.all()
    workload = next(d for d in docs if d["kind"] in ("Deployment", "InferenceService"))
    if workload["kind"] == "Deployment":
        args = workload["spec"]["template"]["spec"]["containers"][0]["args"]
    else:
        args = workload["spec"]["predictor"]["model"]["args"]
    return list(args), list(manifests.notes)


def test_the_flag_is_added_only_when_asked_for_a_release_that_needs_it(cpu_facts: RepositoryFacts) -> None:
    asked, notes = _server_args(cpu_facts, K8sOptions(image=NEW, client_shm=True))
    assert CLIENT_SHM_FLAG in asked and not any("shared" in n for n in notes)
    plain, notes = _server_args(cpu_facts, K8sOptions(image=NEW))
    assert CLIENT_SHM_FLAG not in plain
    assert any("Triton 2.68 refuses client shared-memory registration" in n and "--client-shm" in n for n in notes)


def test_an_older_release_gets_no_flag_it_would_refuse_to_start_with(cpu_facts: RepositoryFacts) -> None:
    args, notes = _server_args(cpu_facts, K8sOptions(image=OLD, client_shm=True))
    assert not any(a.startswith("--allow-client-shm") for a in args)
    assert any("Triton 2.51 takes client shared memory without a flag" in n for n in notes)
    assert not any("shared" in n for n in _server_args(cpu_facts, K8sOptions(image=OLD))[1])


def test_kserve_args_follow_the_same_rule(cpu_facts: RepositoryFacts) -> None:
    options = K8sOptions(image=NEW, kserve=True, client_shm=True, source=RepositorySource(uri="gs://bucket/repo"))
    assert CLIENT_SHM_FLAG in _server_args(cpu_facts, options)[0]


def test_an_image_without_a_release_needs_server_version_for_client_shm(cpu_facts: RepositoryFacts) -> None:
    with pytest.raises(ConfigError, match="--client-shm: whether the server needs a flag") as caught:
        K8sOptions(image=DIGEST, client_shm=True)
    assert caught.value.hint is not None and "--server-version" in caught.value.hint
    args, _ = _server_args(cpu_facts, K8sOptions(image=DIGEST, client_shm=True, server_version="2.69"))
    assert CLIENT_SHM_FLAG in args
    # A stated release wins over the tag.
    assert CLIENT_SHM_FLAG not in _server_args(cpu_facts, K8sOptions(image=NEW, client_shm=True,
                                                                     server_version="2.67"))[0]


def test_an_unknown_server_version_is_refused_with_the_known_lines(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["deploy", "k8s", str(tmp_path), "--image", OLD, "--server-version", "2.99"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--server-version '2.99' is not a Triton release" in result.output and "2.73 (NGC 26.09)" in result.output
