"""checkov, the IaC scanner platform teams gate merges on, in its own virtual environment; scanning manifests.

checkov pins dozens of packages (boto3, pydantic, networkx …) that would fight the toolkit's
own, so :func:`install_checkov` gives it a private venv under
``<sys.prefix>/share/tritonkit/checkov/`` (created with this interpreter, ``pip install
checkov==3.3.30``). The version is pinned: check IDs and what each one demands change between
releases, and the list of accepted failures (``data/checkov_accepted.yaml``) is written against
this one. Scans run offline (``--skip-download``: no policy download from Prisma Cloud).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from tritonkit._fs import atomic_write
from tritonkit.deploy._tools import Progress, run_step, share_dir
from tritonkit.errors import ConfigError, MissingComponentError

__all__ = [
    "CHECKOV_ENV",
    "CHECKOV_VERSION",
    "CheckovFinding",
    "CheckovReport",
    "ManifestCheck",
    "accepted_checks",
    "check_manifest_folder",
    "default_checkov_dir",
    "install_checkov",
    "locate_checkov",
    "scan_manifests",
]

CHECKOV_VERSION = "3.3.30"
#: A ``checkov`` executable to use instead of the private install.
CHECKOV_ENV = "TRITONKIT_CHECKOV"
_RECORD = "install.json"

def default_checkov_dir(prefix: str | os.PathLike[str] | None = None) -> Path:
    """``<prefix>/share/tritonkit/checkov`` (prefix: this environment's ``sys.prefix``, resolved).

    Resolved because a venv's scripts name their interpreter by absolute path: a venv made
    through a symlinked prefix would break when that link goes away.
    """
    return share_dir("checkov", prefix, resolve=True)


def _from_dir(root: Path) -> Path | None:
    """``checkov`` in ``root`` when its install finished (the record is written last) at the pinned version."""
    exe = root / "bin" / "checkov"
    try:
        record = json.loads((root / _RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return exe if exe.is_file() and record.get("version") == CHECKOV_VERSION else None


def locate_checkov() -> Path:
    """``$TRITONKIT_CHECKOV``, else the private install; MissingComponentError with the fix otherwise."""
    override = os.environ.get(CHECKOV_ENV)
    if override:
        if not Path(override).is_file():
            raise MissingComponentError(f"${CHECKOV_ENV}={override} is not a file",
                                        hint="unset it, or run: tritonkit deploy install-checkov")
        return Path(override)
    found = _from_dir(default_checkov_dir())
    if found is None:
        raise MissingComponentError(
            f"checkov {CHECKOV_VERSION} is not installed in this environment",
            hint="run: tritonkit deploy install-checkov  (its own venv under .venv/share/tritonkit/checkov; "
                 "scripts/test does it)")
    return found


def install_checkov(*, force: bool = False, progress: Progress | None = None,
                    target: Path | None = None) -> Path:
    """Create the private venv and ``pip install checkov==CHECKOV_VERSION``; quick when already there.

    A venv cannot be moved once made, so it is built in place; the record written last marks
    it finished, and an unfinished one is removed and built again.
    """
    root = target or default_checkov_dir()
    if not force:
        found = _from_dir(root)
        if found is not None:
            return found
    say = progress or (lambda _message: None)
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    say(f"creating a venv for checkov in {root}")
    hint = "check access to PyPI and retry"
    run_step([sys.executable, "-m", "venv", str(root)], f"python -m venv {root}", hint)
    say(f"installing checkov=={CHECKOV_VERSION} (a few minutes)")
    run_step([str(root / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              f"checkov=={CHECKOV_VERSION}"], f"pip install checkov=={CHECKOV_VERSION}", hint, timeout_s=1800)
    atomic_write(root / _RECORD, json.dumps({"version": CHECKOV_VERSION}, indent=2) + "\n")
    installed = _from_dir(root)
    assert installed is not None  # the record was just written
    say(f"checkov {CHECKOV_VERSION}: {installed}")
    return installed


@dataclass(frozen=True)
class CheckovFinding:
    """One failed check on one resource."""

    check_id: str
    check_name: str
    resource: str
    file: str


@dataclass(frozen=True)
class CheckovReport:
    """What checkov said about a set of manifests."""

    passed: int
    failed: tuple[CheckovFinding, ...]
    resources: int
    version: str

    @property
    def failed_ids(self) -> set[str]:
        """The IDs of the checks that failed."""
        return {f.check_id for f in self.failed}

    def outside(self, accepted: dict[str, Any]) -> tuple[CheckovFinding, ...]:
        """Failures not on the ``accepted`` list."""
        return tuple(f for f in self.failed if f.check_id not in accepted)


def accepted_checks() -> dict[str, dict[str, str]]:
    """The checks generated manifests may fail, by ID, each with ``title``, ``reason`` and ``when``."""
    text = resources.files("tritonkit.deploy").joinpath("data/checkov_accepted.yaml").read_text(encoding="utf-8")
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


def _report(parsed: Any) -> CheckovReport:
    # One framework gives one object; an empty scan only a summary without "results".
    runs = parsed if isinstance(parsed, list) else [parsed]
    passed, resources_n, version, failed = 0, 0, "", []
    for run in runs:
        summary = run.get("summary", run)
        passed += int(summary.get("passed", 0))
        resources_n += int(summary.get("resource_count", 0))
        version = str(summary.get("checkov_version", version))
        for check in run.get("results", {}).get("failed_checks", []):
            failed.append(CheckovFinding(check["check_id"], check.get("check_name", ""),
                                         check.get("resource", ""), check.get("file_path", "")))
    return CheckovReport(passed, tuple(failed), resources_n, version)


def scan_manifests(paths: Sequence[str | Path], checkov: Path | None = None) -> CheckovReport:
    """``checkov -f P… --framework kubernetes --compact --quiet -o json --skip-download``.

    All files in one run, so graph checks (a NetworkPolicy covering the pods) see every object.
    """
    if not paths:
        raise ConfigError("no manifests to scan", hint="pass the folder `tritonkit deploy k8s --out` wrote")
    for path in paths:
        if not Path(path).is_file():
            raise ConfigError(f"manifest {path} does not exist")
    exe = checkov or locate_checkov()
    argv = [str(exe), *[a for p in paths for a in ("-f", str(p))], "--framework", "kubernetes",
            "--compact", "--quiet", "-o", "json", "--skip-download"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingComponentError(f"checkov could not run: {exc}", hint="run: tritonkit deploy install-checkov") from exc
    # Exit 1 means "some check failed"; anything else without JSON is checkov itself failing.
    try:
        parsed = json.loads(proc.stdout)
    except ValueError as exc:
        tail = " | ".join(proc.stderr.strip().splitlines()[-4:])
        raise MissingComponentError(f"checkov exited {proc.returncode} without a JSON report: {tail}",
                                    hint="run: tritonkit deploy install-checkov --force") from exc
    return _report(parsed)


@dataclass(frozen=True)
class ManifestCheck:
    """A folder of manifests judged: checkov's ``report`` and the ``accepted`` list it is held to."""

    report: CheckovReport
    accepted: dict[str, dict[str, str]]

    @property
    def not_accepted(self) -> tuple[CheckovFinding, ...]:
        """The failures not on the accepted list."""
        return self.report.outside(self.accepted)

    @property
    def exit_code(self) -> int:
        """0 when every failure is accepted, 1 otherwise (``tritonkit deploy check``)."""
        return 1 if self.not_accepted else 0

    def reason(self, finding: CheckovFinding) -> str | None:
        """Why ``finding`` is accepted, or ``None`` when it is not."""
        return self.accepted.get(finding.check_id, {}).get("reason")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``tritonkit deploy check --json``)."""
        return {"passed": self.report.passed, "resources": self.report.resources, "checkov_version": self.report.version,
                "failed": [{"check": f.check_id, "name": f.check_name, "resource": f.resource, "file": f.file,
                            "accepted": self.reason(f)} for f in self.report.failed]}


def check_manifest_folder(folder: str | Path, checkov: Path | None = None) -> ManifestCheck:
    """checkov's Kubernetes checks on the manifests ``tritonkit deploy k8s --out`` (or ``deploy
    ray-cluster --out``) wrote into ``folder`` (every ``*.yaml`` but the prometheus-adapter values,
    which are no Kubernetes object), held to :func:`accepted_checks`. checkov does not know KubeRay's
    kinds: the pods KubeRay builds from a RayCluster or RayJob are scanned with them
    (:func:`~tritonkit.deploy.kuberay.kuberay_pods`)."""
    import tempfile

    from tritonkit.deploy.k8s import ADAPTER_FILE, render_yaml
    from tritonkit.deploy.kuberay import kuberay_pods

    paths = sorted(p for p in Path(folder).glob("*.yaml") if p.name != ADAPTER_FILE)
    pods = [pod for path in paths for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
            if isinstance(doc, dict) for pod in kuberay_pods(doc)]
    if not pods:
        return ManifestCheck(scan_manifests(paths, checkov), accepted_checks())
    with tempfile.TemporaryDirectory(prefix="tritonkit-kuberay-") as scratch:
        built = Path(scratch) / "kuberay-pods.yaml"
        built.write_text(render_yaml(pods), encoding="utf-8")
        return ManifestCheck(scan_manifests([*paths, built], checkov), accepted_checks())
