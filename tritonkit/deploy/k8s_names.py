"""Names and images as Kubernetes and container registries accept them, checked before anything is written.

Kubernetes names follow three grammars (Kubernetes' ``apimachinery`` validation, documented under
"Object Names and IDs"): a **DNS-1123 label** (namespaces; at most 63 lower-case alphanumerics or
``-``, alphanumeric at both ends), a **DNS-1035 label** (Services: the same, but starting with a
letter) and a **DNS-1123 subdomain** (Deployments, Secrets, claims, hosts: labels joined by ``.``,
at most 253). An image reference follows the distribution ``reference`` grammar: an optional
registry host (with a ``.`` or ``:`` or ``localhost``), lower-case path components, then a tag
and/or a digest. A deployment must be reproducible, so the image must be pinned: a tag that is
not ``latest``, or a digest.
"""

from __future__ import annotations

import re

from tritonkit.errors import ConfigError

__all__ = [
    "check_dns1035_label",
    "check_dns1123_label",
    "check_dns1123_subdomain",
    "check_image",
    "image_has_digest",
]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(_LABEL)
_DNS1035_RE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN_RE = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_LABEL_MAX, _SUBDOMAIN_MAX = 63, 253

# The distribution reference grammar (github.com/distribution/reference, regexp.go), in parts.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_RE = re.compile(rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?")
_PATH_RE = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG_RE = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
_NAME_MAX = 255
_IMAGE_EXAMPLE = "nvcr.io/nvidia/tritonserver:24.10-py3 (or …@sha256:<64 hex digits>)"


def _check(value: str, field: str, pattern: re.Pattern[str], max_len: int, grammar: str, example: str) -> str:
    if len(value) > max_len or not pattern.fullmatch(value):
        why = f"longer than {max_len} characters" if len(value) > max_len else f"not a {grammar}"
        raise ConfigError(
            f"{field} {value!r} is {why}",
            hint=f"Kubernetes needs lower-case letters, digits and '-', starting and ending with a letter "
                 f"or digit{' (a subdomain may join such labels with .)' if 'subdomain' in grammar else ''}; "
                 f"e.g. {example}",
        )
    return value


def check_dns1123_label(value: str, field: str, *, max_len: int = _LABEL_MAX) -> str:
    """``value`` if it is a DNS-1123 label of at most ``max_len`` characters, else a ConfigError naming ``field``."""
    return _check(value, field, _LABEL_RE, max_len, "DNS-1123 label", "serving")


def check_dns1035_label(value: str, field: str, *, max_len: int = _LABEL_MAX) -> str:
    """``value`` if it is a DNS-1035 label (a DNS-1123 label starting with a letter), e.g. a Service name."""
    return _check(value, field, _DNS1035_RE, max_len, "DNS-1035 label (starting with a letter)", "triton")


def check_dns1123_subdomain(value: str, field: str) -> str:
    """``value`` if it is a DNS-1123 subdomain (Deployment, Secret, claim names; hosts)."""
    return _check(value, field, _SUBDOMAIN_RE, _SUBDOMAIN_MAX, "DNS-1123 subdomain", "triton-models")


def _split_image(image: str) -> tuple[str | None, str, str | None, str | None]:
    """(registry, path, tag, digest) of a reference, or ConfigError when it does not parse."""
    bad = ConfigError(f"--image {image!r} is not a container image reference",
                      hint=f"write [REGISTRY/]REPOSITORY:TAG or …@DIGEST, e.g. {_IMAGE_EXAMPLE}")
    rest, at, digest_text = image.partition("@")
    digest = digest_text if at else None
    if digest is not None and not _DIGEST_RE.fullmatch(digest):
        raise bad
    tag = None
    last_slash = rest.rfind("/")
    if ":" in rest[last_slash + 1:]:
        rest, tag = rest.rsplit(":", 1)
        if not _TAG_RE.fullmatch(tag):
            raise bad
    registry = None
    first, sep, remainder = rest.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        if not _DOMAIN_RE.fullmatch(first):
            raise bad
        registry, rest = first, remainder
    if not _PATH_RE.fullmatch(rest) or len(rest) + len(registry or "") > _NAME_MAX:
        raise bad
    return registry, rest, tag, digest


def check_image(image: str) -> str:
    """``image`` if it is a well-formed reference pinned by a tag other than ``latest`` or by a digest."""
    _registry, path, tag, digest = _split_image(image)
    if digest is None and tag is None:
        raise ConfigError(f"--image {image!r} has no tag: it means :latest, which changes under a running fleet",
                          hint=f"pin a version tag or a digest, e.g. {_IMAGE_EXAMPLE}")
    if digest is None and tag == "latest":
        raise ConfigError(f"--image {image!r} is pinned to :latest, which changes under a running fleet",
                          hint=f"pin a version tag or a digest, e.g. {path}:24.10-py3")
    return image


def image_has_digest(image: str) -> bool:
    """True when the reference names a digest (``…@sha256:…``): the bytes are fixed, not only the tag."""
    return _split_image(image)[3] is not None
