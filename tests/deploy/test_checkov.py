"""checkov 3.3 (the real scanner, in its own venv) on every kind of manifest `deploy k8s` writes.

Every checkov Kubernetes check passes except those on the repository's accepted list
(``tritonkit/deploy/data/checkov_accepted.yaml``), and each accepted check must still fail where
its ``when`` says (so the list cannot go stale). checkov does not know KServe's InferenceService,
so the Pod KServe builds from the predictor is scanned instead (tests/support/kserve.py).
scripts/test installs checkov first (``tritonkit deploy install-checkov``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tests.support import deploy_repos
from tests.support.kserve import predictor_pod
from tritonkit.cli import main
from tritonkit.deploy import (
    GrpcIngress,
    K8sOptions,
    RepositoryFacts,
    RepositorySource,
    accepted_checks,
    build_manifests,
    check_manifest_folder,
    install_checkov,
    locate_checkov,
    render_yaml,
    scan_manifests,
    write_manifests,
)
from tritonkit.deploy.checkov import CHECKOV_VERSION, default_checkov_dir
from tritonkit.deploy.kuberay import RayClusterOptions, build_ray_cluster, write_ray_cluster
from tritonkit.errors import MissingComponentError
from tritonkit.perf import parse_sla

pytestmark = pytest.mark.timeout(600)

# The shared repositories, as fixtures of this module.
cpu_facts, gpu_facts = deploy_repos.cpu_facts, deploy_repos.gpu_facts
IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
PINNED = "nvcr.io/nvidia/tritonserver:24.10-py3@sha256:" + "0123456789abcdef" * 4


@pytest.fixture(scope="module")
def checkov() -> Path:
    try:
        return locate_checkov()
    except MissingComponentError as exc:
        pytest.fail(f"{exc} — scripts/test installs it (tritonkit deploy install-checkov)")


def _written(tmp_path: Path, facts: RepositoryFacts, sla: str | None, **options: Any) -> list[Path]:
    manifests = build_manifests(facts, parse_sla(sla) if sla else None, K8sOptions(**options))
    out = tmp_path / "k8s"
    return [p for p in write_manifests(manifests, out) if p.name != "prometheus-adapter-values.yaml"]


# name → (repository, SLA, options)
CASES: dict[str, tuple[str, str | None, dict[str, Any]]] = {
    "CPU, autoscaled, a tag-pinned image": ("cpu", "p99<=50ms", {"image": IMAGE}),
    "GPU, object store with credentials, gRPC Ingress, digest-pinned image": (
        "gpu", "p99<=50ms", {"image": PINNED, "source": RepositorySource(uri="s3://models/prod",
                                                                         credentials_secret="s3-creds"),
                             "ingress": GrpcIngress("triton.example.com"), "namespace": "serving",
                             "min_replicas": 2, "max_replicas": 8}),
    "fixed replicas on a claim, no SLA, digest-pinned image": (
        "cpu", None, {"image": PINNED, "source": RepositorySource(pvc="models"), "min_replicas": 3,
                      "max_replicas": 3}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_generated_manifests_pass_every_check_but_the_accepted_ones(
    case: str, tmp_path: Path, cpu_facts: RepositoryFacts, gpu_facts: RepositoryFacts, checkov: Path,
) -> None:
    repo, sla, options = CASES[case]
    paths = _written(tmp_path, cpu_facts if repo == "cpu" else gpu_facts, sla, **options)
    report = scan_manifests(paths, checkov)
    assert report.version == CHECKOV_VERSION
    assert report.resources >= 4 and report.passed >= 80  # the checks ran on the objects
    assert not report.outside(accepted_checks()), [(f.check_id, f.check_name, f.resource) for f in report.failed]
    expected = {"CKV_K8S_43"} if "@sha256:" not in options["image"] else set()
    assert report.failed_ids == expected


def test_the_kserve_predictor_pod_passes_the_same_checks(tmp_path: Path, gpu_facts: RepositoryFacts,
                                                         checkov: Path) -> None:
    manifests = build_manifests(gpu_facts, parse_sla("p99<=50ms"), K8sOptions(
        image=PINNED, kserve=True, source=RepositorySource(uri="gs://bucket/repo"), max_replicas=4))
    isvc, *rest = manifests.all()
    stream = tmp_path / "kserve.yaml"
    stream.write_text(render_yaml([predictor_pod(isvc, PINNED), *rest]))
    report = scan_manifests([stream], checkov)
    assert report.resources >= 1 and report.passed >= 60
    assert report.failed_ids == set(), [(f.check_id, f.check_name) for f in report.failed]


@pytest.mark.parametrize("image", [IMAGE, PINNED])
def test_the_ray_pods_kuberay_builds_pass_the_same_checks(tmp_path: Path, image: str, checkov: Path) -> None:
    """checkov does not know KubeRay's kinds: `deploy check` scans the pods KubeRay builds from the
    RayJob (head, GPU and CPU workers, the submitter Job) with the NetworkPolicy that covers them."""
    out = tmp_path / "ray"
    write_ray_cluster(build_ray_cluster(RayClusterOptions(
        image=image, gpu_workers=2, cpu_workers=1, pvc="models", job="perf sweep /models a b --sla p99<=50ms")), out)
    check = check_manifest_folder(out, checkov)
    assert check.report.resources >= 5 and check.report.passed >= 200  # the pods were scanned, not only the policy
    assert not check.not_accepted, [(f.check_id, f.check_name, f.resource) for f in check.report.failed]
    assert check.report.failed_ids == ({"CKV_K8S_43"} if "@sha256:" not in image else set())


def test_every_accepted_check_has_a_reason_and_still_fails_where_it_says(
    tmp_path: Path, cpu_facts: RepositoryFacts, checkov: Path,
) -> None:
    accepted = accepted_checks()
    assert accepted and all(entry["reason"] and entry["when"] and entry["title"] for entry in accepted.values())
    report = scan_manifests(_written(tmp_path, cpu_facts, None, image=IMAGE), checkov)
    assert set(accepted) <= report.failed_ids, "an accepted check no longer fails: drop it from the list"


def test_checkov_catches_what_the_hardening_prevents(tmp_path: Path, cpu_facts: RepositoryFacts,
                                                     checkov: Path) -> None:
    """The scan is not vacuous: the same Deployment without its security contexts, resources and
    token setting fails the checks those fields answer."""
    deployment = build_manifests(cpu_facts, None, K8sOptions(image=PINNED)).all()[0]
    pod = deployment["spec"]["template"]["spec"]
    del pod["securityContext"], pod["automountServiceAccountToken"]
    for key in ("securityContext", "resources"):
        del pod["containers"][0][key]
    path = tmp_path / "weak.yaml"
    path.write_text(render_yaml([deployment]))
    failed = scan_manifests([path], checkov).failed_ids
    assert {"CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_23", "CKV_K8S_28", "CKV_K8S_37", "CKV_K8S_38",
            "CKV_K8S_10", "CKV_K8S_12", "CKV2_K8S_6"} <= failed


def test_cli_check_passes_generated_manifests_and_fails_a_weakened_one(
    tmp_path: Path, cpu_facts: RepositoryFacts, checkov: Path,
) -> None:
    paths = _written(tmp_path, cpu_facts, "p99<=50ms", image=IMAGE)
    folder = paths[0].parent
    ok = CliRunner().invoke(main, ["deploy", "check", str(folder)])
    assert ok.exit_code == 0, ok.output
    assert "0 not accepted" in ok.output and "CKV_K8S_43" in ok.output and "accepted:" in ok.output
    deployment = folder / "deployment.yaml"
    doc = yaml.safe_load(deployment.read_text())
    doc["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] = False
    deployment.write_text(render_yaml([doc]))
    weak = CliRunner().invoke(main, ["deploy", "check", str(folder), "--json"])
    assert weak.exit_code == 1, weak.output
    assert "CKV_K8S_22" in weak.output


def test_a_written_folder_is_judged_against_the_accepted_list_without_the_adapter_values(
    tmp_path: Path, cpu_facts: RepositoryFacts, checkov: Path,
) -> None:
    folder = _written(tmp_path, cpu_facts, "p99<=50ms", image=IMAGE)[0].parent
    assert (folder / "prometheus-adapter-values.yaml").is_file()  # helm values, not a Kubernetes object
    check = check_manifest_folder(folder, checkov)
    assert check.exit_code == 0 and check.not_accepted == ()
    assert {Path(f.file).name for f in check.report.failed} <= {p.name for p in folder.glob("*.yaml")} - {
        "prometheus-adapter-values.yaml"}
    listed = check.to_dict()["failed"]
    assert listed and all(row["accepted"] == accepted_checks()[row["check"]]["reason"] for row in listed)


def test_installing_again_is_quick_and_changes_nothing(checkov: Path) -> None:
    record = default_checkov_dir() / "install.json"
    before = record.stat().st_mtime_ns
    said: list[str] = []
    assert install_checkov(progress=said.append) == checkov
    assert said == []  # nothing installed
    assert record.stat().st_mtime_ns == before
