"""Triton Inference Server releases 2.51 … 2.73: the one place what each one parses, serves and checks is written down.

Like ``trtllm_versions.py`` for TensorRT-LLM. Every fact names the upstream repository, file
and release branch it was read at (``triton-inference-server/<repo>``, branch ``rYY.MM``), and
the first release that has it. The linter, the writers, ``serve``, perf, the client and
``deploy`` ask this module; none of them keeps a release number of its own.

A *line* is ``major.minor`` (``2.59`` covers 2.59.0 and 2.59.1); each has the NGC container
tags that ship it (``24.10`` … ``26.09``). 2.73's own release branches could not be read yet: its
facts are 2.72's (:data:`CARRIED_OVER` says why; ``TritonRelease.read_at`` where they were read). The bundled server (nvidia-pytriton 0.7.0) is 2.51,
and the test suite proves every 2.51 fact against it; newer lines are held to upstream's own
sources and test expectations at their tags.

What changed between 2.51 and 2.72, as far as tritonkit is concerned (read release by
release: ``git log``/``git diff`` between the branches on core ``src/``, common
``protobuf/model_config.proto`` and ``src/model_config.cc``, the server's
``src/command_line_parser.cc`` and ``qa/L0_model_config``):

* the config schema (:data:`CONFIG_FIELDS`): ``ModelConfig.model_metrics`` (2.52) and
  ``ModelEnsembling.max_inflight_requests`` (2.63); a server that predates a field cannot read
  a config that writes it at all ("failed to read text proto");
* platforms (:data:`PLATFORMS`): ``torch_aoti`` with ``model.pt2`` (2.67); the ``libtorch``
  alias (:data:`PLATFORM_ALIASES`, 2.68);
* what loading checks (:data:`VALIDATIONS`): ``model_metrics`` (2.52), label files inside the
  model folder (2.66), int64 overflow of element counts (2.67), a batching strategy library
  inside the model folder (2.70), load-request model names (2.67, relaxed in 2.68);
* command-line flags (:data:`SERVER_FLAGS`) and client shared memory (:data:`CLIENT_SHM`: from
  2.68 a server refuses client registrations unless started with ``--allow-client-shm=true``);
* the onnxruntime each release's container ships (:data:`ONNXRUNTIME_VERSIONS`).

Which line a version, tag or image names, and the :class:`ReleaseFact` record these tables are
written in, are :mod:`tritonkit.triton_release_lines` (every name re-exported here).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit.errors import ConfigError, UnsupportedByReleaseError
from tritonkit.triton_metrics import FIRST_RESPONSE_HISTOGRAM_MS
from tritonkit.triton_release_lines import (
    BUNDLED_LINE,
    CARRIED_OVER,
    KNOWN_LINES,
    NEWEST_LINE,
    PYTRITON_SERVER_LINES,
    FactKind,
    ReleaseChoice,
    ReleaseFact,
    Source,
    TritonRelease,
    install_release,
    known_lines_text,
    newest_release,
    non_ascii_problem,
    release,
    release_of_image,
    release_of_version,
    resolve_release,
)
from tritonkit.triton_release_lines import release_fact as _fact

__all__ = [
    "AOTI_DEFAULT_FILE",
    "BEHAVIOURS",
    "BUNDLED_LINE",
    "CARRIED_OVER",
    "CLIENT_SHM",
    "CLIENT_SHM_FLAG",
    "CONFIG_FIELDS",
    "CUSTOMIZABLE_METRIC_FAMILIES",
    "KNOWN_LINES",
    "NEWEST_LINE",
    "ONNXRUNTIME_VERSIONS",
    "PLATFORMS",
    "PLATFORM_ALIASES",
    "PYTHON_BACKEND_CONFIG",
    "PYTHON_BACKEND_CONFIG_MINIMUMS",
    "PYTRITON_SERVER_LINES",
    "SERVER_FLAGS",
    "TENSORRT_ALLOCATION_STRATEGIES",
    "VALIDATIONS",
    "PlatformFact",
    "ReleaseChoice",
    "ReleaseFact",
    "Source",
    "TritonRelease",
    "check_backend_config",
    "check_config_for_release",
    "check_server_flags",
    "client_shm_args",
    "client_shm_note",
    "client_shm_refused_by",
    "config_fields_newer_than",
    "default_model_file",
    "flag_name",
    "guessable_model_files",
    "install_release",
    "is_client_shm_refusal",
    "known_lines_text",
    "newest_release",
    "non_ascii_problem",
    "platform_backends",
    "release",
    "release_of_image",
    "release_of_version",
    "resolve_release",
    "written_proto_fields",
]


def _table(kind: FactKind, rows: Iterable[tuple[str, ...]], *shared: str) -> dict[str, ReleaseFact]:
    """Subject → fact, for rows ``(since, subject, what, repo, path)`` of one kind; rows all read in one
    file are ``(since, subject, what)``, that file given once as ``shared`` (``repo, path``)."""
    return {row[1]: _fact(row[0], kind, row[1], row[2], *(row[3:] or shared)) for row in rows}


_PROTO = "protobuf/model_config.proto"
_UTILS = "src/model_config_utils.cc"

#: Config fields newer than 2.51, by proto path (``Message.field``): a release older than
#: ``since`` cannot read a config that writes them. Every other field of tritonclient's schema
#: (``model_config_pb2``, tritonclient 2.73) is in common's model_config.proto at r24.10: the
#: proto changed only at r24.11, r25.11 and (comments only) r26.04 between r24.10 and r26.07.
CONFIG_FIELDS: dict[str, ReleaseFact] = _table("config-field", (
    ("2.52", "ModelConfig.model_metrics",
     "model_metrics: per-model histogram buckets for Triton's own histogram metrics"),
    ("2.52", "ModelMetrics.metric_control", "model_metrics.metric_control"),
    ("2.52", "ModelMetrics.MetricControl.metric_identifier", "model_metrics.metric_control.metric_identifier"),
    ("2.52", "ModelMetrics.MetricControl.histogram_options", "model_metrics.metric_control.histogram_options"),
    ("2.52", "ModelMetrics.MetricControl.MetricIdentifier.family",
     "model_metrics.metric_control.metric_identifier.family"),
    ("2.52", "ModelMetrics.MetricControl.HistogramOptions.buckets",
     "model_metrics.metric_control.histogram_options.buckets"),
    ("2.63", "ModelEnsembling.max_inflight_requests",
     "ensemble_scheduling.max_inflight_requests: at most this many requests in flight at each ensemble step"),
), "common", _PROTO)


@dataclass(frozen=True)
class PlatformFact:
    """A ``platform`` value: the backend that serves it, its default model file, the first release."""

    name: str
    backend: str
    default_file: str
    since: TritonRelease
    source: Source


def _platform(name: str, backend: str, default_file: str, since: str) -> PlatformFact:
    at = release(since)
    return PlatformFact(name, backend, default_file, at, Source("core", "src/constants.h", at.branch))


#: Platforms by name. Those of 2.51 are core's src/constants.h at r24.10 (``ensemble`` has no
#: backend and no file); ``torch_aoti`` arrives in 2.67 (core commit dabbddc, src/constants.h and
#: model_config_utils.cc at r26.03: the pytorch backend, file ``model.pt2``).
PLATFORMS: dict[str, PlatformFact] = {p.name: p for p in (
    _platform("tensorrt_plan", "tensorrt", "model.plan", "2.51"),
    _platform("onnxruntime_onnx", "onnxruntime", "model.onnx", "2.51"),
    _platform("pytorch_libtorch", "pytorch", "model.pt", "2.51"),
    _platform("tensorflow_graphdef", "tensorflow", "model.graphdef", "2.51"),
    _platform("tensorflow_savedmodel", "tensorflow", "model.savedmodel", "2.51"),
    _platform("ensemble", "", "", "2.51"),
    _platform("torch_aoti", "pytorch", "model.pt2", "2.67"),
)}

#: ``platform`` aliases: name → (what it stands for, the fact). Read at core r26.04–r26.06
#: (and main, 2026-06-09): auto-complete fills ``backend: "pytorch"`` for ``platform:
#: "libtorch"`` (constants.h kPyTorchLibTorchPlatformAlt, model_config_utils.cc
#: AutoCompleteBackendFields), but ValidateModelConfig pairs backend and platform through
#: GetBackendTypeFromPlatform, which does not know the alias, so the pair is refused
#: ("unexpected 'platform' and 'backend' pair, got:libtorch, pytorch"). Up to 2.67 the name is
#: an unknown platform ("unexpected platform type 'libtorch'", seen on the bundled 2.51).
PLATFORM_ALIASES: dict[str, tuple[str, ReleaseFact]] = {
    "libtorch": ("pytorch_libtorch", _fact(
        "2.68", "platform", "libtorch",
        "auto-complete reads platform 'libtorch' as the pytorch backend, but validation then refuses the "
        "pair ('unexpected platform and backend pair'): write platform: \"pytorch_libtorch\"",
        "core", _UTILS, "r26.04")),
}

#: Model files from which a server guesses the backend of a config naming none, and whether
#: each must be a folder (None: either). 2.51: core model_config_utils.cc AutoCompleteBackendFields
#: at r24.10. ``model.pt2`` (a file): 2.67 guesses the pytorch backend from it but then fills in
#: platform pytorch_libtorch and model.pt (same function at r26.03), so it loads from model.pt2
#: alone only from 2.68 (commit ee0bc47 at r26.04 fills in torch_aoti and model.pt2).
_GUESSABLE_FILES: tuple[tuple[str, bool | None, str], ...] = (
    ("model.savedmodel", True, "2.51"), ("model.graphdef", False, "2.51"), ("model.plan", False, "2.51"),
    ("model.onnx", None, "2.51"), ("model.xml", None, "2.51"), ("model.pt", False, "2.51"),
    ("model.py", None, "2.51"), ("model.pt2", False, "2.68"),
)
#: From 2.68 a torch_aoti config without default_model_filename looks for model.pt2; 2.67 fills in
#: model.pt for every pytorch-backend config (core model_config_utils.cc at r26.03 and r26.04).
AOTI_DEFAULT_FILE = _fact("2.68", "behaviour", "torch_aoti_default_file",
                          "a torch_aoti config without default_model_filename loads model.pt2 (2.67: model.pt)",
                          "core", _UTILS)


def platform_backends(at: TritonRelease) -> dict[str, str]:
    """Platform → the backend it implies, for the platforms release ``at`` knows."""
    return {p.name: p.backend for p in PLATFORMS.values() if p.since <= at}


def default_model_file(platform: str, backend: str, at: TritonRelease) -> str | None:
    """The file a release-dependent platform looks for when the config names none (``None``: not one of those)."""
    aoti = PLATFORMS["torch_aoti"]
    if platform != aoti.name or backend not in ("", aoti.backend) or at < aoti.since:
        return None
    return aoti.default_file if at >= AOTI_DEFAULT_FILE.since else "model.pt"


def guessable_model_files(at: TritonRelease) -> dict[str, bool | None]:
    """Model file name → must it be a folder, for the files release ``at`` guesses a backend from."""
    return {name: is_dir for name, is_dir, since in _GUESSABLE_FILES if release(since) <= at}


#: The one family whose buckets ``model_metrics`` can change, from 2.52 to 2.72 (core
#: src/metric_model_reporter.h ``metric_map_`` at r24.11 … r26.06, unchanged on main); any
#: other family is accepted with a warning ("is not a customizable metric in Triton core").
CUSTOMIZABLE_METRIC_FAMILIES: tuple[str, ...] = (FIRST_RESPONSE_HISTOGRAM_MS.name,)

#: Values of the TensorRT backend's ``execution_context_allocation_strategy`` (2.58+).
TENSORRT_ALLOCATION_STRATEGIES: tuple[str, ...] = ("STATIC", "ON_PROFILE_CHANGE")

#: What loading checks, by the release that added the check (subjects are the lint rules' keys).
VALIDATIONS: dict[str, ReleaseFact] = _table("validation", (
    ("2.52", "model_metrics",
     "model_metrics: each metric_control needs metric_identifier with a non-empty family and "
     "histogram_options with non-empty buckets (ValidateModelMetrics; the server's qa/L0_model_config/"
     "model_metrics cases at r26.08)", "core", _UTILS),
    ("2.52", "model_metrics_family",
     f"model_metrics: a family other than {FIRST_RESPONSE_HISTOGRAM_MS.name} loads with a warning", "core",
     "src/metric_model_reporter.cc"),
    ("2.66", "label_file_inside_model",
     "output label_filename must resolve inside the model folder (Model::Init, commit f2226c0); "
     "a path prefix test up to 2.69, a path-boundary test from 2.70 (filesystem/api.cc at r26.06)",
     "core", "src/model.cc"),
    ("2.67", "element_count_overflow",
     "an element count of dims or reshape that overflows int64 refuses the model (GetElementCount, "
     "commit eaf856c; before, the count wrapped silently)", "core", "src/model_config_utils.h"),
    ("2.67", "load_request_model_name",
     "a load request for a name containing '..' or '/' or only white space is refused "
     "(ValidateModelName, commit 66f09f8); 2.68 refuses only '..' itself, '/' and blank names (commit 50830ba)",
     "core", "src/model_repository_manager/model_repository_manager.cc"),
    ("2.58", "tensorrt_allocation_strategy",
     "the TensorRT backend reads parameter execution_context_allocation_strategy: STATIC (default) or "
     "ON_PROFILE_CHANGE, any other value refuses the model (the server's qa/L0_model_config/custom_parameters "
     "at r25.05 and r26.08)", "tensorrt_backend", "src/model_state.cc"),
    ("2.51", "runtime_library_found",
     "a model's runtime library is looked for in its version folder, its model folder and <backend-directory>/"
     "<backend>/ (runtime model.py: libtriton_python.so there or in <backend-directory>/python/, and <backend>/model.py "
     "must exist); the name is joined onto each folder, a leading '/' included ('unable to find backend library'; "
     "TritonModel::GetBackendLibraryProperties, FindBackendLibraryPath, JoinPath)", "core", "src/backend_model.cc"),
    ("2.51", "runtime_library_inside_folder",
     "the runtime library found must resolve (symlinks too) inside the folder it was found in: 'backend library name "
     "... escapes backend directory' (GetBackendLibraryProperties; every release since r24.01, commit f502bfc); a "
     "path-prefix test up to 2.69, a path-boundary test from 2.70 (commit dcb315d)", "core", "src/backend_model.cc"),
    ("2.70", "batch_strategy_inside_model",
     "the TRITON_BATCH_STRATEGY_PATH library must lie inside the model folder ('Batching library path "
     "escapes model repository', commit dcb315d)", "core", "src/backend_model.cc"),
))

#: Behaviour changes that are not refusals.
BEHAVIOURS: dict[str, ReleaseFact] = _table("behaviour", (
    ("2.52", "first_response_histogram",
     f"{FIRST_RESPONSE_HISTOGRAM_MS.name} (time to first response) for decoupled models; the family itself "
     "is described in tritonkit.triton_metrics", "core", "src/metric_model_reporter.cc"),
    ("2.65", "first_response_histogram_all_models",
     "the first-response histogram for non-decoupled models too (commit d261b8d)", "core",
     "src/metric_model_reporter.cc"),
    ("2.70", "path_boundary_test",
     "a path is inside a folder only up to a path separator ('/models/m' does not hold '/models/m2/x'); up to 2.69 "
     "a plain string-prefix test (IsChildPathEscapingParentPath, commit dcb315d): label files, the runtime library, "
     "the batching strategy library", "core", "src/filesystem/api.cc", "r26.06"),
    ("2.68", "max_inflight_requests_shared",
     "ensemble max_inflight_requests becomes one limit per step shared by all requests of the model "
     "(2.63–2.67: per request; commit a02b0c0)", "core", "src/ensemble_scheduler/ensemble_scheduler.cc"),
))

# Every flag of the 2.51 command line: server src/command_line_parser.cc at r24.10 (87 names;
# the bundled 2.51's --help lists exactly these, checked in the tests).
_FLAGS_2_51: tuple[str, ...] = (
    "allow-cpu-metrics", "allow-gpu-metrics", "allow-grpc", "allow-http", "allow-metrics", "allow-sagemaker",
    "allow-vertex-ai", "backend-config", "backend-directory", "buffer-manager-thread-count", "cache-config",
    "cache-directory", "cuda-memory-pool-byte-size", "cuda-virtual-address-size", "disable-auto-complete-config",
    "enable-peer-access", "exit-on-error", "exit-timeout-secs", "grpc-address", "grpc-header-forward-pattern",
    "grpc-http2-max-ping-strikes", "grpc-http2-max-pings-without-data",
    "grpc-http2-min-recv-ping-interval-without-data", "grpc-infer-allocation-pool-size",
    "grpc-infer-response-compression-level", "grpc-keepalive-permit-without-calls", "grpc-keepalive-time",
    "grpc-keepalive-timeout", "grpc-max-connection-age", "grpc-max-connection-age-grace", "grpc-port",
    "grpc-restricted-protocol", "grpc-root-cert", "grpc-server-cert", "grpc-server-key", "grpc-use-ssl",
    "grpc-use-ssl-mutual", "help", "host-policy", "http-address", "http-header-forward-pattern", "http-port",
    "http-restricted-api", "http-thread-count", "id", "load-model", "log-error", "log-file", "log-format",
    "log-info", "log-verbose", "log-warning", "metrics-address", "metrics-config", "metrics-interval-ms",
    "metrics-port", "min-supported-compute-capability", "model-config-name", "model-control-mode",
    "model-load-gpu-limit", "model-load-retry-count", "model-load-thread-count", "model-namespacing",
    "model-repository", "model-store", "pinned-memory-pool-byte-size", "rate-limit", "rate-limit-resource",
    "repoagent-directory", "repository-poll-secs", "response-cache-byte-size", "reuse-grpc-port", "reuse-http-port",
    "sagemaker-port", "sagemaker-safe-port-range", "sagemaker-thread-count", "strict-model-config",
    "strict-readiness", "trace-config", "trace-count", "trace-file", "trace-level", "trace-log-frequency",
    "trace-rate", "vertex-ai-default-model", "vertex-ai-port", "vertex-ai-thread-count",
)
_PARSER = "src/command_line_parser.cc"

#: Every tritonserver flag (without ``--``) and the first release that has it. Read release by
#: release (the server's src/command_line_parser.cc on each branch r24.10 … r26.08): four flags
#: were added and none removed.
SERVER_FLAGS: dict[str, ReleaseFact] = _table("server-flag", (
    *(("2.51", name, "") for name in _FLAGS_2_51),
    ("2.56", "grpc-max-response-pool-size", "the most response objects kept in a gRPC response queue"),
    ("2.57", "grpc-infer-thread-count", "gRPC inference handler threads (2 to 128, default 2)"),
    ("2.59", "http-max-input-size", "largest HTTP request input in bytes (default 64 MB)"),
    ("2.68", "allow-client-shm", "allow client shared-memory registration (default false)"),
), "server", _PARSER)

#: The flag that lets clients register shared memory on 2.68 and later.
CLIENT_SHM_FLAG = "--allow-client-shm=true"
#: From 2.68 a server started without ``--allow-client-shm=true`` refuses every client
#: shared-memory register/unregister call: TRITONSERVER_ERROR_UNSUPPORTED, which gRPC carries
#: as UNIMPLEMENTED (src/grpc/grpc_utils.cc), with the message below (src/common.h
#: kClientShmDisabledErrorStr); status queries still answer (empty). Commit d78c99c17 on the
#: r26.04 branch (TRITON_VERSION 2.68.0), also in src/grpc/grpc_server.cc and src/http_server.cc.
CLIENT_SHM = _fact("2.68", "behaviour", "client_shared_memory",
                   "client shared-memory registration is refused unless the server runs with --allow-client-shm=true",
                   "server", "src/common.h")
_CLIENT_SHM_REFUSAL = "Client shared memory is disabled"
_CLIENT_SHM_STATUS = "UNIMPLEMENTED"

#: The onnxruntime each release's container builds its onnxruntime backend with (the server's
#: build.py version map at each branch). 2.73: carried over from r26.08 — the server's main at
#: e1db8a603 (2.73.0dev) still says 1.27.0, older than r26.08's 1.28.0 (the release branches set it).
ONNXRUNTIME_VERSIONS: dict[str, str] = {
    "2.51": "1.19.2", "2.52": "1.19.2", "2.53": "1.20.1", "2.54": "1.20.1", "2.55": "1.20.1", "2.56": "1.21.0",
    "2.57": "1.21.0", "2.58": "1.22.0", "2.59": "1.22.0", "2.60": "1.23.0", "2.61": "1.23.0", "2.62": "1.23.1",
    "2.63": "1.23.2", "2.64": "1.23.2", "2.65": "1.23.2", "2.66": "1.24.1", "2.67": "1.24.2", "2.68": "1.24.4",
    "2.69": "1.24.4", "2.70": "1.24.4", "2.71": "1.27.0", "2.72": "1.28.0",
    "2.73": "1.28.0",
}


# ---------------------------------------------------------------------------- config fields

def written_proto_fields(message: object, *, prefix: str = "") -> dict[str, str]:
    """Proto path (``ModelEnsembling.max_inflight_requests``) → config path
    (``ensemble_scheduling.max_inflight_requests``) of every field set in a protobuf ``message``.

    What a writer renders: proto3 scalars at zero are not set, so they are not written either.
    """
    from google.protobuf.message import Message

    assert isinstance(message, Message)
    found: dict[str, str] = {}
    owner = message.DESCRIPTOR.full_name.split(".", 1)[-1]  # "inference.ModelEnsembling" -> "ModelEnsembling"
    for fd, value in message.ListFields():
        path = f"{prefix}.{fd.name}" if prefix else fd.name
        found.setdefault(f"{owner}.{fd.name}", path)
        if fd.message_type is None or fd.message_type.GetOptions().map_entry:
            continue
        field: Any = fd
        flag = getattr(field, "is_repeated", None)  # protobuf 6 deprecates ``label``
        repeated = flag if isinstance(flag, bool) else field.label == field.LABEL_REPEATED
        for item in (value if repeated else [value]):
            for proto_path, config_path in written_proto_fields(item, prefix=path).items():
                found.setdefault(proto_path, config_path)
    return found


def config_fields_newer_than(proto_paths: Iterable[str], at: TritonRelease) -> list[ReleaseFact]:
    """The facts of the fields among ``proto_paths`` that release ``at`` cannot parse, outermost first."""
    newer = {CONFIG_FIELDS[p] for p in proto_paths if p in CONFIG_FIELDS and CONFIG_FIELDS[p].since > at}
    return sorted(newer, key=lambda f: (f.subject.count("."), f.subject))


def check_config_for_release(config: object, at: TritonRelease, *, model: str) -> None:
    """Refuse (:class:`UnsupportedByReleaseError`) a config whose fields release ``at`` cannot parse,
    or whose platform it does not serve, naming the first release that has it."""
    platform = str(getattr(config, "platform", ""))
    if platform in PLATFORM_ALIASES:
        meant, alias = PLATFORM_ALIASES[platform]
        raise UnsupportedByReleaseError(f"model {model!r}: platform {platform!r} is not served by any release "
                                        f"tritonkit knows ({alias.what})", release=str(at),
                                        hint=f'write platform: "{meant}"')
    known = PLATFORMS.get(platform)
    if known is not None and known.since > at:
        raise UnsupportedByReleaseError(
            f"model {model!r}: platform {platform!r} is new in {known.since.describe()}; Triton {at} refuses it",
            release=str(at), first_release=str(known.since),
            hint=f"target Triton {known.since} or later (--server-version), or another platform")
    written = written_proto_fields(config)
    newer = config_fields_newer_than(written, at)
    if not newer:
        return
    first = newer[0]
    raise UnsupportedByReleaseError(
        f"model {model!r}: {written[first.subject]} ({first.subject}) is new in {first.since.describe()}; "
        f"Triton {at} cannot read a config that has it ('failed to read text proto')",
        release=str(at), first_release=str(first.since),
        hint=f"drop {written[first.subject]} from the config, or target Triton {first.since} or later "
             "(--server-version)")


# ---------------------------------------------------------------------------- server flags

def flag_name(arg: str) -> str | None:
    """``allow-client-shm`` from ``--allow-client-shm=true``; ``None`` for a value (no leading ``--``)."""
    if not arg.startswith("--") or len(arg) <= 2:
        return None
    return arg[2:].split("=", 1)[0]


#: The python backend's ``--backend-config=python,<key>=<value>`` settings and the least value it takes
#: (python_backend src/python_be.cc ``TRITONBACKEND_Initialize`` at r24.10 and r26.07, values read with
#: ``std::stol``; a smaller one fails every python model's load). Its message for the shared-memory
#: default says "can't be smaller than 4 MiBs" while the test is 1 MiB: the test is what counts.
PYTHON_BACKEND_CONFIG_MINIMUMS: dict[str, int] = {
    "shm-growth-byte-size": 1, "shm-default-byte-size": 1024 * 1024, "thread-pool-size": 1,
    "stub-timeout-seconds": 1, "shm_message_queue_size": -(2**63),
}
PYTHON_BACKEND_CONFIG = _fact("2.51", "validation", "python_backend_config",
                              "the python backend refuses to initialise (and so every python model's load) with "
                              "shm-growth-byte-size <= 0, shm-default-byte-size < 1 MiB, thread-pool-size < 1, "
                              "stub-timeout-seconds <= 0, an empty shm-region-prefix-name or a value that is not a "
                              "number", "python_backend", "src/python_be.cc")
_STOL = re.compile(r"^[ \t\n\v\f\r]*([+-]?[0-9]+)")


def _backend_configs(argv: Sequence[str]) -> Iterator[str]:
    """The values of every ``--backend-config`` in ``argv`` (``--backend-config=V`` or ``--backend-config V``)."""
    for index, arg in enumerate(argv):
        if arg.startswith("--backend-config="):
            yield arg.split("=", 1)[1]
        elif arg == "--backend-config" and index + 1 < len(argv):
            yield argv[index + 1]


def check_backend_config(argv: Sequence[str], *, where: str = "tritonserver") -> None:
    """Refuse a python backend ``--backend-config`` value the backend itself refuses (:data:`PYTHON_BACKEND_CONFIG`)."""
    for config in _backend_configs(argv):
        backend, _, setting = config.partition(",")
        key, _, value = setting.partition("=")
        if backend != "python" or key not in (*PYTHON_BACKEND_CONFIG_MINIMUMS, "shm-region-prefix-name"):
            continue
        if key == "shm-region-prefix-name":
            problem = "is empty" if not value else None
        else:
            number = _STOL.match(value)
            least = PYTHON_BACKEND_CONFIG_MINIMUMS[key]
            problem = ("is not a number" if number is None else
                       f"is below {least}" if int(number.group(1)) < least else None)
        if problem is not None:
            raise ConfigError(f"{where}: --backend-config=python,{key}={value} {problem}: the python backend refuses "
                              f"to start and no python model loads ({PYTHON_BACKEND_CONFIG.source})",
                              hint=f"give {key} a value the python backend takes, or leave it out")


def check_server_flags(argv: Sequence[str], at: TritonRelease, *, where: str = "tritonserver") -> None:
    """Refuse a flag in ``argv`` that release ``at`` does not have, naming the first release that has it, and a
    python backend setting the backend refuses (:func:`check_backend_config`)."""
    check_backend_config(argv, where=where)
    for arg in argv:
        name = flag_name(arg)
        if name is None:
            continue
        fact = SERVER_FLAGS.get(name)
        if fact is not None and fact.since <= at:
            continue
        if fact is None:
            raise UnsupportedByReleaseError(
                f"{where}: --{name} is not a tritonserver flag in any release tritonkit knows ({KNOWN_LINES[0]} … "
                f"{NEWEST_LINE})", release=str(at), hint="check the spelling against `tritonserver --help`")
        raise UnsupportedByReleaseError(
            f"{where}: --{name} is new in {fact.since.describe()}; tritonserver {at} refuses to start with it",
            release=str(at), first_release=str(fact.since),
            hint=f"drop --{name}, or run Triton {fact.since} or later ({fact.source})")


# ---------------------------------------------------------------------------- client shared memory

def _allows_client_shm(argv: Sequence[str]) -> bool:
    """Whether ``argv`` turns client shared memory on (the last ``--allow-client-shm`` wins)."""
    allowed = False
    for index, arg in enumerate(argv):
        if flag_name(arg) != "allow-client-shm":
            continue
        value = arg.split("=", 1)[1] if "=" in arg else (argv[index + 1] if index + 1 < len(argv) else "")
        allowed = value.strip().lower() in ("true", "1", "on", "yes")
    return allowed


def client_shm_refused_by(at: TritonRelease, argv: Sequence[str] = ()) -> bool:
    """Whether a server of release ``at`` started with ``argv`` refuses client shared-memory registration."""
    return at >= CLIENT_SHM.since and not _allows_client_shm(argv)


def client_shm_note(at: TritonRelease, argv: Sequence[str] = ()) -> str | None:
    """The one line to say when a server of release ``at`` started with ``argv`` refuses client
    shared memory (``None`` when it allows it)."""
    if not client_shm_refused_by(at, argv):
        return None
    return (f"tritonserver {at} refuses client shared-memory registration (from {CLIENT_SHM.since}, unless started "
            f"with {CLIENT_SHM_FLAG}): clients send tensors in-band")


def client_shm_args(version: str | None) -> list[str]:
    """``[--allow-client-shm=true]`` for a server install of ``version`` that needs it to take client
    shared memory (2.68+); ``[]`` for older ones (the flag would stop them starting) or an unknown version."""
    known = install_release(version)
    return [CLIENT_SHM_FLAG] if known is not None and known >= CLIENT_SHM.since else []


def is_client_shm_refusal(status: str | None, message: str) -> bool:
    """Whether a failed register call (gRPC ``status`` name, server ``message``) is the 2.68+ refusal."""
    return (status or "").rsplit(".", 1)[-1] == _CLIENT_SHM_STATUS and _CLIENT_SHM_REFUSAL in message
