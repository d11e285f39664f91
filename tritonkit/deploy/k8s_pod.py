"""The hardened pod around tritonserver: who it runs as, what it may write, what it may reach.

Shared by the Deployment and the KServe predictor (the same container either way):

* a non-root user with a high UID (10001: clear of the host's system and login users), no
  privilege escalation, every Linux capability dropped (tritonserver binds ports above 1024 and
  needs none), the runtime's default seccomp profile, no service-account token (the server
  never calls the Kubernetes API);
* a read-only root filesystem, with exactly the writable places Triton uses: ``/tmp`` (where it
  localises an object-store repository and where the python backend unpacks execution
  environments; ``HOME`` points there too) and ``/dev/shm`` in memory (the python backend's
  tensors), each with a size limit;
* ``imagePullPolicy: Always``: a tag can be re-pushed; with Always every node resolves it to the
  same digest at pod start (layers already present are not fetched again).
"""

from __future__ import annotations

from typing import Any

from tritonkit.deploy.k8s_sizing import MIB, PodResources

__all__ = [
    "RUN_AS_UID",
    "TMP_MOUNT",
    "container_security_context",
    "hardened_env",
    "pod_security_context",
    "writable_mounts",
]

#: A high UID/GID: no clash with a host user should a container escape (checkov CKV_K8S_40
#: asks for ≥ 10000). The Triton images' files are world-readable, so any UID can run them.
RUN_AS_UID = 10001
TMP_MOUNT = "/tmp"  # noqa: S108 (the container's own emptyDir, not the host's /tmp)
#: /tmp holds an object-store repository once localised: its size on disk, twice (a reload
#: downloads the new version beside the old one), plus this.
TMP_EXTRA_BYTES = 1024 * MIB

_SECCOMP = {"type": "RuntimeDefault"}


def pod_security_context() -> dict[str, Any]:
    """``spec.securityContext`` of the pod."""
    return {"runAsNonRoot": True, "runAsUser": RUN_AS_UID, "runAsGroup": RUN_AS_UID, "fsGroup": RUN_AS_UID,
            # Only chown a writable volume when its root is not the group's already (large claims).
            "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": dict(_SECCOMP)}


def container_security_context() -> dict[str, Any]:
    """``securityContext`` of the tritonserver container."""
    return {"runAsNonRoot": True, "runAsUser": RUN_AS_UID, "runAsGroup": RUN_AS_UID,
            "allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": dict(_SECCOMP)}


def writable_mounts(resources: PodResources, model_bytes: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, volumeMounts) for the places tritonserver writes under a read-only root."""
    tmp_mi = (2 * model_bytes + TMP_EXTRA_BYTES + MIB - 1) // MIB
    volumes = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": resources.size.shm_size}},
        {"name": "tmp", "emptyDir": {"sizeLimit": f"{tmp_mi}Mi"}},
    ]
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "tmp", "mountPath": TMP_MOUNT}]
    return volumes, mounts


def hardened_env() -> list[dict[str, str]]:
    """Environment the read-only root needs: a writable ``HOME`` (the UID has no home directory)."""
    return [{"name": "HOME", "value": TMP_MOUNT}]
