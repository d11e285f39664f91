"""How a server is reached beyond its address: TLS (mutual too) and headers, defined once.

:class:`Dial` is what the client (sync, asyncio, streams), the admin API, perf_analyzer's options and
every command's ``--tls-*`` / ``--header`` options (:func:`tritonkit.cli._common.dial_options`) share.
A command registers its dial (:func:`registered`); whatever later dials a server without a dial of
its own (the preflight, the input data's metadata, the sweep's loads and its restore) finds it with
:func:`dial_for`, as ``~/.ssh/config`` names a host's keys.

Secrets: a header's value lives in the ``Dial`` only (never in its ``repr``, an error or a log line);
perf_analyzer, which takes headers only on its command line, gets them through
:mod:`tritonkit.perf.llm._keyed` from its environment, so its saved argv names a variable. Key files
are named by path, read by gRPC and ``ssl`` only.

When a connection fails, :func:`diagnose` asks the address once with Python's ``ssl`` (a TLS
handshake, milliseconds) and says which of plain text to a TLS port, TLS to a plain port, an
unknown CA, a name the certificate does not carry, or a missing / refused client certificate it is
(:class:`~tritonkit.errors.TLSError`); :func:`header_refusal` says which header a restricted
protocol expects, and whether it was missing or had another value.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import socket
import ssl
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonkit._fs import read_user_file, read_user_text
from tritonkit.errors import ConfigError, NotAuthorisedError, TLSError

__all__ = ["PLAIN", "Dial", "dial_for", "diagnose", "header_refusal", "parse_headers", "registered"]

#: A header name as HTTP/2 and gRPC metadata carry it (lower case, token characters).
_NAME_RE = re.compile(r"[a-z0-9!#$%&'*+.^_`|~-]+")
#: Triton's answer to a call of a protocol restricted by ``--grpc-restricted-protocol`` /
#: ``--http-restricted-api`` without the header's expected value (2.51 to 2.73, gRPC UNAVAILABLE,
#: HTTP 403): missing and wrong values get the same words, so the header sent tells them apart.
_RESTRICTED_RE = re.compile(r"restricted, expecting header '([^']+)'")
#: OpenSSL's verify code for a certificate that does not carry the name asked for.
_HOSTNAME_MISMATCH = 62
_FIX_CA = "pass the CA that signed the server's certificate: --tls-ca FILE (TRITONKIT_TLS_CA)"
_FIX_CERT = "pass a client certificate and its key: --tls-cert FILE --tls-key FILE"
_FIX_HEADER = "--header {name}=VALUE (or from a file: --header @FILE; or one per line in $TRITONKIT_HEADERS)"


@dataclass(frozen=True)
class Dial:
    """TLS and headers for one server. ``tls``: speak TLS (implied by any other TLS field), trusting
    ``ca`` (PEM; default the system's CAs); ``cert`` / ``key``: the client certificate and its key
    (mutual TLS); ``server_name``: the name the server's certificate must carry, when it is not the
    host dialed (an address, a tunnel); ``headers``: (name, value) sent with every call (values
    are secrets: kept out of ``repr`` and records)."""

    tls: bool = False
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    server_name: str | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        for name in ("ca", "cert", "key"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))
        if (self.cert is None) != (self.key is None):
            raise ConfigError("--tls-cert and --tls-key go together (a client certificate and its private key)",
                              hint=_FIX_CERT)
        object.__setattr__(self, "tls", bool(self.tls or self.ca or self.cert or self.server_name))
        object.__setattr__(self, "headers", tuple(_checked(n, v, "a header") for n, v in self.headers))

    @property
    def header_map(self) -> dict[str, str] | None:
        """The headers as tritonclient takes them (``None``: none)."""
        return dict(self.headers) or None

    def options(self) -> str:
        """This dial as the command-line options that give it again (`` --tls-ca …``), each header's
        value left for the user to give (``<value>``)."""
        given = [("--tls-ca", self.ca), ("--tls-cert", self.cert), ("--tls-key", self.key),
                 ("--tls-server-name", self.server_name)]
        words = (["--tls"] if self.tls and not any(v for _, v in given) else []) + _pairs(given)
        words += [f"--header {name}=<value>" for name, _ in self.headers]
        return "".join(f" {shlex.quote(w) if not w.startswith('--header') else w}" for w in words)

    def grpc_kwargs(self) -> dict[str, Any]:
        """tritonclient's ``InferenceServerClient`` keywords for TLS (``creds``); none without TLS."""
        if not self.tls:
            return {}
        import grpc  # only with TLS

        def read(path: Path | None, option: str) -> bytes | None:
            return None if path is None else read_user_file(path, what=f"{option} file", hint=f"give {option} a PEM file")

        return {"creds": grpc.ssl_channel_credentials(read(self.ca, "--tls-ca"), read(self.key, "--tls-key"),
                                                     read(self.cert, "--tls-cert"))}

    def tritonclient(self, url: str) -> Any:
        """A plain ``tritonclient.grpc.InferenceServerClient`` for ``url`` over this dial's TLS (its
        calls take ``headers=dial.header_map``)."""
        import tritonclient.grpc as grpcclient  # lazy: HTTP needs no grpc

        return grpcclient.InferenceServerClient(url, channel_args=self.channel_args() or None, **self.grpc_kwargs())

    def channel_args(self) -> list[tuple[str, Any]]:
        """gRPC channel options: the name the server's certificate is checked against."""
        return [("grpc.ssl_target_name_override", self.server_name)] if self.tls and self.server_name else []

    def ssl_context(self, *, verify: bool = True) -> ssl.SSLContext:
        """An ``ssl`` context for this dial (HTTPS, and :func:`diagnose`)."""
        try:
            context = ssl.create_default_context(cafile=self.ca) if verify else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--tls-ca {self.ca}: not a PEM certificate ({type(exc).__name__})", hint=_FIX_CA) from None
        if not verify:
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        if self.cert is not None:
            try:
                context.load_cert_chain(self.cert, self.key)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(f"--tls-cert {self.cert} / --tls-key {self.key}: not a PEM certificate and its "
                                  f"key ({type(exc).__name__})", hint=_FIX_CERT) from None
        return context

    def perf_analyzer_args(self, protocol: str) -> list[str]:
        """perf_analyzer's TLS options for ``protocol`` (2.60: ``--ssl-grpc-*``, ``--ssl-https-*``);
        headers go through :mod:`tritonkit.perf.llm._keyed`, never here."""
        if not self.tls:
            return []
        if protocol == "grpc":
            flags = ("--ssl-grpc-root-certifications-file", "--ssl-grpc-private-key-file",
                     "--ssl-grpc-certificate-chain-file")
            return ["--ssl-grpc-use-ssl", *_pairs(zip(flags, (self.ca, self.key, self.cert), strict=True))]
        flags = ("--ssl-https-ca-certificates-file", "--ssl-https-private-key-file", "--ssl-https-client-certificate-file")
        return _pairs(zip(flags, (self.ca, self.key, self.cert), strict=True))


#: No TLS, no headers: what an address nobody registered is dialed with.
PLAIN = Dial()
_REGISTERED: dict[str, Dial] = {}


def _address(url: str) -> str:
    return url.strip().rstrip("/").split("://", 1)[-1]


@contextlib.contextmanager
def registered(url: str, dial: Dial) -> Iterator[Dial]:
    """Within the block, dial ``url`` (``host:port``; ``"*"``: every address not registered itself)
    with ``dial`` wherever no dial is given; as before afterwards."""
    before = dict(_REGISTERED)
    _REGISTERED[_address(url)] = dial
    try:
        yield dial
    finally:
        _REGISTERED.clear()
        _REGISTERED.update(before)


def dial_for(url: str) -> Dial:
    """The dial registered for ``url``, else the one for ``"*"``, else :data:`PLAIN`."""
    return _REGISTERED.get(_address(url)) or _REGISTERED.get("*", PLAIN) if _REGISTERED else PLAIN


def _pairs(items: Any) -> list[str]:
    return [part for flag, value in items if value is not None for part in (flag, str(value))]


def _checked(name: str, value: str, where: str) -> tuple[str, str]:
    name = name.strip().lower()
    if not _NAME_RE.fullmatch(name):
        raise ConfigError(f"{where}: {name[:40]!r} is not a header name (letters, digits, -, _)",
                          hint="give NAME=VALUE, e.g. --header triton-grpc-protocol-admin-key=VALUE")
    if not value.strip() or any(c in value for c in "\r\n\0"):
        raise ConfigError(f"{where}: header '{name}' has an empty value or a line break in it",
                          hint="give its value on one line")
    return name, value.strip()


def parse_headers(items: Any, where: str = "--header") -> tuple[tuple[str, str], ...]:
    """``NAME=VALUE`` (or ``NAME: VALUE``) items, and ``@FILE`` items naming a file of such lines, as
    (name, value) pairs; a malformed item is refused naming ``where`` and the name, never the value."""
    headers: list[tuple[str, str]] = []
    for item in items:
        if item.startswith("@"):
            text = read_user_text(item[1:], what=f"{where} file", hint="one NAME: VALUE header a line")
            headers += parse_headers([line for line in text.splitlines() if line.strip() and not line.startswith("#")],
                                     f"{where} @{item[1:]}")
            continue
        cut = min((i for i in (item.find("="), item.find(":")) if i > 0), default=-1)
        if cut < 0:
            raise ConfigError(f"{where}: an item is not NAME=VALUE (its value is not shown)",
                              hint="e.g. --header triton-grpc-protocol-admin-key=VALUE, or --header @FILE")
        headers.append(_checked(item[:cut], item[cut + 1:], where))
    return tuple(headers)


def _handshake(dial: Dial, address: str, timeout_s: float) -> tuple[str, Any]:
    """What a TLS handshake with ``address`` (the dial's, or an unverified one for a plain dial) ends
    in: ``("tcp", None)`` nothing accepted TCP, ``("verify", exc)``, ``("no-tls", exc)``,
    ``("closed", None)`` the server hung up after it, ``("ok", None)``."""
    host, _, port = address.rpartition(":")
    try:
        raw = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s)
    except (OSError, ValueError):
        return "tcp", None
    context = dial.ssl_context(verify=dial.tls)
    context.set_alpn_protocols(["h2"])
    try:
        with raw, context.wrap_socket(raw, server_hostname=dial.server_name or host.strip("[]")) as tls:
            try:
                return ("ok" if tls.recv(1) else "closed"), None  # a gRPC server speaks first (SETTINGS)
            except TimeoutError:
                return "ok", None
    except ssl.SSLCertVerificationError as exc:
        return "verify", exc
    except TimeoutError:
        return "tcp", None  # accepted, then silent: frozen or slow, not a TLS answer
    except (ssl.SSLError, OSError) as exc:
        return ("closed" if dial.tls and "alert" in str(exc) else "no-tls"), exc


def diagnose(dial: Dial, address: str, url: str, *, timeout_s: float = 2.0) -> TLSError | None:
    """The :class:`~tritonkit.errors.TLSError` of a failed connection to ``address`` (``host:port``
    of ``url``) with ``dial``, or ``None`` when TLS is not what failed."""
    outcome, exc = _handshake(dial, address, timeout_s)
    if not dial.tls:
        outcome = "plain" if outcome in ("ok", "closed") else "tcp"
    elif outcome == "verify":
        outcome = "name" if exc.verify_code == _HOSTNAME_MISMATCH else "ca"
    elif outcome == "closed":
        outcome = "no-cert" if dial.cert is None else "cert"
    said = {
        "plain": (" speaks TLS, and this connection was plain text", f"{_FIX_CA}, or --tls for a certificate this "
                  "machine trusts; add --tls-cert and --tls-key if it asks for a client certificate (mutual TLS)"),
        "name": (f": its certificate does not carry the name dialed ({getattr(exc, 'verify_message', '')})",
                 "pass the name its certificate carries: --tls-server-name NAME"),
        "ca": (f": its certificate is not signed by {f'the CA in {dial.ca}' if dial.ca else 'a CA this machine trusts'}"
               f" ({getattr(exc, 'verify_message', '')})", _FIX_CA),
        "no-tls": (f" does not speak TLS (the handshake failed: {type(exc).__name__})",
                   "drop the --tls options for this server, or give its TLS port"),
        "no-cert": (" asks for a client certificate (mutual TLS) and none was given", _FIX_CERT),
        "cert": (f" refused the client certificate {dial.cert} (not signed by a CA it trusts)",
                 "pass a certificate signed by the CA the server trusts (its --grpc-root-cert)"),
    }.get(outcome)
    return None if said is None else TLSError(f"tritonserver at {url}{said[0]}; nothing was sent", hint=said[1])


def header_refusal(text: str, url: str, sent: Iterable[str], *, model: str | None = None) -> NotAuthorisedError | None:
    """The error for a server's answer ``text`` when it is a restricted protocol's refusal (see
    ``_RESTRICTED_RE``), saying whether the header it expects was missing or had another value
    (``sent``: the names of the headers the call carried)."""
    match = _RESTRICTED_RE.search(text)
    if match is None:
        return None
    name = match[1]
    wrong = name.lower() in {have.lower() for have in sent}
    said = "the value sent is not the one it expects" if wrong else "it was not sent"
    return NotAuthorisedError(f"tritonserver at {url} refused the call: its protocol is restricted to calls with header "
                              f"'{name}', and {said}", model=model, header=name,
                              hint=("pass the right value: " if wrong else "pass it: ") + _FIX_HEADER.format(name=name))
