"""Certificates made by the test with the ``openssl`` CLI, and the tritonserver flags that serve
gRPC over mutual TLS with its model-repository protocol restricted to an admin key.

:func:`make_pki` writes, into a folder of the test's: a CA and a server certificate it signed
(for ``localhost`` and ``127.0.0.1``), a client certificate it signed, and a second CA with a
client certificate of its own, which the server does not trust.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["ADMIN_HEADER", "ADMIN_KEY", "Pki", "make_pki", "mutual_tls_args"]

#: The header and value ``--grpc-restricted-protocol=model-repository:admin-key=VALUE`` asks of
#: model-repository calls (Triton names the header ``triton-grpc-protocol-`` and the key).
ADMIN_HEADER, ADMIN_KEY = "triton-grpc-protocol-admin-key", "s3cr3t-admin-key-1207"
_OPENSSL = "/usr/bin/openssl"


@dataclass(frozen=True)
class Pki:
    folder: Path

    def path(self, name: str) -> Path:
        return self.folder / name

    @property
    def ca(self) -> Path:
        return self.path("ca.crt")

    @property
    def client(self) -> tuple[Path, Path]:
        """(certificate, key) the server's CA signed."""
        return self.path("client.crt"), self.path("client.key")


def _run(*args: str | Path) -> None:
    subprocess.run([_OPENSSL, *map(str, args)], check=True, capture_output=True, timeout=60)


def _signed(folder: Path, name: str, ca: str) -> None:
    _run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", folder / f"{name}.key", "-out", folder / f"{name}.csr",
         "-subj", f"/CN={name}")
    (folder / f"{name}.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _run("x509", "-req", "-in", folder / f"{name}.csr", "-CA", folder / f"{ca}.crt", "-CAkey", folder / f"{ca}.key",
         "-CAcreateserial", "-out", folder / f"{name}.crt", "-days", "2", "-extfile", folder / f"{name}.ext")


def make_pki(folder: Path) -> Pki:
    """The CAs and certificates (see the module docstring), in ``folder``."""
    if shutil.which(_OPENSSL) is None:
        pytest.fail(f"{_OPENSSL} is needed to make the test's certificates")
    folder.mkdir(parents=True, exist_ok=True)
    for ca in ("ca", "other-ca"):
        _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", folder / f"{ca}.key", "-out",
             folder / f"{ca}.crt", "-days", "2", "-subj", f"/CN=tritonkit test {ca}")
    _signed(folder, "server", "ca")
    _signed(folder, "client", "ca")
    _signed(folder, "stranger", "other-ca")
    return Pki(folder)


def mutual_tls_args(pki: Pki) -> list[str]:
    """tritonserver's flags: gRPC over mutual TLS, the model-repository protocol restricted to the admin key."""
    return ["--grpc-use-ssl=true", "--grpc-use-ssl-mutual=true", f"--grpc-server-cert={pki.path('server.crt')}",
            f"--grpc-server-key={pki.path('server.key')}", f"--grpc-root-cert={pki.ca}",
            "--grpc-restricted-protocol=model-repository:admin-key=" + ADMIN_KEY]
