"""Look inside an ONNX model: is it valid, which opsets, what are its inputs and outputs, where is the batch axis.

Everything here works on the model *skeleton* (``onnx.load(..., load_external_data=False)``):
graph, types and shapes, but not the weights of tensors kept in external data files. That
keeps analysis cheap for models past protobuf's 2 GB limit; the full checker is run on
the file path, which is the form ``onnx.checker`` accepts for such models.
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto

from tritonkit._fs import regular_file
from tritonkit.builders.batch_axis import BatchAxis, find_batch_axis
from tritonkit.builders.onnx_tensor import (
    ONNX_TO_TRITON,
    SUPPORTED_TYPE_NAMES,
    Dim,
    TensorInfo,
    onnx_type_name,
)
from tritonkit.errors import BuildError, ConfigError
from tritonkit.repository.pbtxt import is_repeated

__all__ = [
    "BATCH_DIM_PARAM",
    "BatchAxis",
    "OnnxAnalysis",
    "TensorInfo",
    "analyze_onnx",
    "check_onnx",
    "copy_weights",
    "declare_batch_outputs",
    "external_data_locations",
    "light_copy",
    "load_onnx",
    "make_batch_dynamic",
    "save_onnx",
]

#: The symbolic name given to a batch axis that tritonkit made dynamic.
BATCH_DIM_PARAM = "batch"

@dataclass
class OnnxAnalysis:
    """What :func:`analyze_onnx` found.

    ``skeleton`` is the model as stored (weights in external files not loaded);
    ``model`` is a :func:`light_copy` of it with inferred shapes and types (no big weights).
    """

    path: Path
    skeleton: onnx.ModelProto
    model: onnx.ModelProto
    ir_version: int
    opsets: dict[str, int]
    producer: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    external_data: tuple[str, ...]
    size_bytes: int
    batch: BatchAxis
    notes: list[str] = field(default_factory=list)
    #: The skeleton differs from the file (outputs given a batch axis): serve the skeleton, verify against the file.
    rewritten: bool = False

    def opset_report(self) -> str:
        """One line: ``IR 8, opsets ai.onnx 17, com.microsoft 1; produced by pytorch 2.13``."""
        opsets = ", ".join(f"{domain or 'ai.onnx'} {version}" for domain, version in sorted(self.opsets.items()))
        producer = f"; produced by {self.producer}" if self.producer else ""
        return f"IR {self.ir_version}, opsets {opsets}{producer}"


# ---------------------------------------------------------------------------- load & check


def _looks_like_onnx(path: Path) -> bool:
    """ONNX files start with field 1 (ir_version) as a varint: byte 0x08. Cheap, and tells
    'this was never ONNX' (a .pt zip, a text file) from 'this is a damaged ONNX file'."""
    try:
        with path.open("rb") as fh:
            head = fh.read(1)
    except OSError:
        return False
    return head == b"\x08"


def load_onnx(path: Path | str, *, load_external_data: bool = False) -> onnx.ModelProto:
    """Read ``path`` as an ONNX model, turning every way that fails into one clear error.

    By default the weights in external data files are not read (see the module docstring).
    """
    path = Path(path)
    # A FIFO would block onnx.load forever and a device would read without end: regular files only.
    regular_file(path, what="ONNX model", hint="check the path to the .onnx file")
    if path.stat().st_size == 0:
        raise BuildError(f"{path}: file is empty, not an ONNX model", hint="re-export or re-download the model")
    try:
        model = onnx.load(str(path), load_external_data=load_external_data)
    except Exception as exc:  # protobuf DecodeError, external-data OSError, ...
        if isinstance(exc, (FileNotFoundError, OSError)) and _looks_like_onnx(path):
            raise BuildError(f"{path}: cannot read its external data: {exc}",
                             hint="keep the external data files next to the .onnx file, as exported") from exc
        if _looks_like_onnx(path):
            raise BuildError(f"{path}: ONNX file is corrupt (truncated or damaged): {exc}",
                             hint="re-export or re-download the model") from exc
        raise BuildError(f"{path}: not an ONNX model (cannot parse it as onnx.ModelProto)",
                         hint="pass a .onnx file; export PyTorch with torch.onnx.export or "
                              "tritonkit.builders.export_torch") from exc
    if model.ir_version == 0 or not model.HasField("graph"):
        raise BuildError(f"{path}: not an ONNX model (no IR version or graph)",
                         hint="pass a .onnx file exported by a framework's ONNX exporter")
    damaged = _first_non_text(model)
    if damaged is not None:
        raise BuildError(f"{path}: ONNX file is corrupt: {damaged} is not UTF-8 text",
                         hint="re-export or re-download the model")
    return model


def _first_non_text(message: Any, prefix: str = "") -> str | None:
    """The path of the first string field holding bytes that are not UTF-8 (protobuf hands those
    over as ``bytes``, which every name and message built from them would trip on), or ``None``."""
    for fd, value in message.ListFields():
        path = f"{prefix}.{fd.name}" if prefix else fd.name
        repeated = is_repeated(fd)
        items = list(value) if repeated else [value]
        if fd.type == fd.TYPE_STRING:
            if any(isinstance(item, bytes) for item in items):
                return path
        elif fd.type == fd.TYPE_MESSAGE:
            for index, item in enumerate(items):
                found = _first_non_text(item, f"{path}[{index}]" if repeated else path)
                if found is not None:
                    return found
    return None


def check_onnx(path: Path | str) -> None:
    """Run the full ``onnx.checker`` (including shape inference) on the file.

    The path form is used because it is the one that works for models over 2 GB.
    """
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "hard link" in first:
            # Builds before tritonkit copied external data hard-linked it into the repository.
            raise BuildError(f"{path}: the ONNX checker refuses the model's external data because the file has "
                             f"more than one hard link: {first}",
                             hint="give the file its own copy (cp F F.copy && mv F.copy F, for the data file "
                                  "named above); an older tritonkit build may have linked it into a "
                                  "repository, and rebuilding after that copies instead") from exc
        raise BuildError(f"{path}: fails the ONNX checker: {first}",
                         hint="fix the exporter output (re-export with a supported opset); "
                              "`python -c \"import onnx; onnx.checker.check_model('MODEL', full_check=True)\"` "
                              "shows the full message") from exc
    except Exception as exc:  # noqa: BLE001 - the checker raises plain Exceptions for I/O problems
        raise BuildError(f"{path}: the ONNX checker could not read the model: {exc}",
                         hint="check that the file and its external data are complete") from exc


def infer_shapes(model: onnx.ModelProto, *, where: str) -> onnx.ModelProto:
    """Shape inference with data propagation (so shapes computed from ``Shape`` ops resolve), on a
    :func:`light_copy`: the result describes the graph but does not carry the big weights."""
    try:
        return onnx.shape_inference.infer_shapes(light_copy(model), check_type=True, strict_mode=False,
                                                 data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise BuildError(f"{where}: shape inference failed: {str(exc).strip().splitlines()[0]}",
                         hint="the graph's declared shapes contradict its operators; re-export the model") from exc


# ---------------------------------------------------------------------------- tensors & external data


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph and every subgraph (If/Loop/Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _graphs(sub)


def _all_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    for graph in _graphs(model.graph):
        yield from graph.initializer
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    yield attr.t
                elif attr.type == onnx.AttributeProto.TENSORS:
                    yield from attr.tensors


def external_data_locations(model: onnx.ModelProto) -> tuple[str, ...]:
    """Relative paths of the external data files the model refers to, sorted and unique."""
    found: set[str] = set()
    for tensor in _all_tensors(model):
        if tensor.data_location == TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location":
                    found.add(entry.value)
    return tuple(sorted(found))


def _checked_location(base: Path, location: str) -> Path:
    target = (base / location).resolve()
    if not target.is_relative_to(base.resolve()):
        raise BuildError(f"external data location {location!r} points outside the model's folder {base}",
                         hint="re-save the model with its external data next to it")
    return target


def save_onnx(model: onnx.ModelProto, dest: Path, *, source_dir: Path | None = None,
              external_data_file: str | None = None) -> list[Path]:
    """Write ``model`` to ``dest`` and return every file written.

    A skeleton whose tensors still point at external data (``source_dir`` holds those files)
    is saved as is and its data files are copied (:func:`copy_weights`) beside ``dest`` under the
    same relative names — the weights never pass through memory. A model whose weights are all in memory
    is written in one file, or with them in ``external_data_file`` when given (needed past 2 GB).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    written = [dest]
    locations = external_data_locations(model)
    if locations:
        if source_dir is None:
            raise BuildError("internal: a model with external data needs the folder its data lives in")
        onnx.save_model(model, str(dest))
        for location in locations:
            src = _checked_location(source_dir, location)
            target = _checked_location(dest.parent, location)
            target.parent.mkdir(parents=True, exist_ok=True)
            copy_weights(src, target)
            written.append(target)
        return written
    if external_data_file:
        onnx.save_model(model, str(dest), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=external_data_file, size_threshold=1024)
        if (dest.parent / external_data_file).exists():
            written.append(dest.parent / external_data_file)
        return written
    onnx.save_model(model, str(dest))
    return written


_FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)


def copy_weights(src: Path, dest: Path) -> None:
    """Give ``dest`` its own copy of ``src``: a reflink where the file system shares blocks
    copy-on-write (instant, no extra space), else a plain copy — never a hard link.

    A hard link would share the bytes with the user's file (overwriting the source in place
    would change what the server serves) and makes ``onnx.checker`` refuse the source for a
    "potential hardlink attack" from then on, so every later build of it fails.
    """
    if dest.exists():
        dest.unlink()
    with src.open("rb") as fin, dest.open("wb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), _FICLONE, fin.fileno())
            return
        except OSError:
            pass  # EOPNOTSUPP / EXDEV / EINVAL: no reflinks here; copy the bytes
    shutil.copyfile(src, dest)


# ---------------------------------------------------------------------------- analysis

#: Tensors bigger than this are hidden from shape inference, which only needs their type and shape.
LIGHT_TENSOR_BYTES = 64 * 1024


def light_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose big tensors are marked external (no bytes): enough for type and shape inference,
    and small enough to serialize even when the real model is past 2 GB."""
    light = onnx.ModelProto()
    light.CopyFrom(model)
    for graph in _graphs(light.graph):
        for tensor in graph.initializer:
            if tensor.data_location != TensorProto.EXTERNAL and tensor.ByteSize() > LIGHT_TENSOR_BYTES:
                tensor.ClearField("raw_data")
                for name in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
                    tensor.ClearField(name)
                tensor.data_location = TensorProto.EXTERNAL
                del tensor.external_data[:]
                tensor.external_data.add(key="location", value="__tritonkit_not_loaded__")
    return light


def _dims(value_info: onnx.ValueInfoProto) -> tuple[Dim, ...] | None:
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    dims: list[Dim] = []
    for dim in tensor_type.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param") and dim.dim_param:
            dims.append(str(dim.dim_param))
        else:
            dims.append(None)
    return tuple(dims)


def _not_tensor_hint(kind: str | None, producer: str) -> str:
    """The converter option that gives plain tensors; a sequence of maps is ZipMap's output."""
    if kind in ("sequence_type", "map_type"):
        zipmap = "this is ZipMap's output (class probabilities as a list of maps), the converters' default; "
        if producer.lower().startswith("skl2onnx"):
            return zipmap + "convert without it: skl2onnx.to_onnx(clf, X, options={id(clf): {'zipmap': False}})"
        if producer.lower().startswith("onnxmltools"):
            return zipmap + "convert without it: onnxmltools.convert_lightgbm(model, initial_types=..., zipmap=False)"
        return zipmap + ("convert without it (skl2onnx: options={id(clf): {'zipmap': False}}; onnxmltools: "
                         "zipmap=False)")
    return "wrap the model so its inputs and outputs are plain tensors"


def _tensor_info(value_info: onnx.ValueInfoProto, *, role: str, where: str, producer: str = "") -> TensorInfo:
    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise BuildError(f"{where}: {role} {value_info.name!r} is a {kind or 'untyped value'}, not a tensor; "
                         "Triton carries only tensors",
                         hint=_not_tensor_hint(kind, producer))
    elem_type = value_info.type.tensor_type.elem_type
    if elem_type not in ONNX_TO_TRITON:
        raise BuildError(f"{where}: {role} {value_info.name!r} has type {onnx_type_name(elem_type)}, "
                         "which Triton cannot carry",
                         hint=f"cast it inside the model (a Cast node) to one of {SUPPORTED_TYPE_NAMES}")
    return TensorInfo(name=value_info.name, elem_type=elem_type, shape=_dims(value_info))


def analyze_onnx(path: Path | str, *, check: bool = True) -> OnnxAnalysis:
    """Load the skeleton of ``path``, run the full checker and shape inference, and describe it.

    Raises :class:`ConfigError` for a missing file and :class:`BuildError` for a file that is
    not ONNX, is corrupt, fails the checker, or has an input/output Triton cannot carry.
    """
    path = Path(path)
    skeleton = load_onnx(path)
    if check:
        check_onnx(path)
    inferred = infer_shapes(skeleton, where=str(path))
    graph = inferred.graph
    initializer_names = {init.name for init in graph.initializer}
    notes: list[str] = []
    # Inputs that also have an initializer are constants with an override (IR < 4 style);
    # they are not part of what clients send.
    overridable = [v.name for v in graph.input if v.name in initializer_names]
    if overridable:
        notes.append(f"{len(overridable)} graph input(s) backed by initializers are treated as constants: "
                     + ", ".join(overridable[:5]) + ("…" if len(overridable) > 5 else ""))
    producer = " ".join(p for p in (skeleton.producer_name, skeleton.producer_version) if p)
    inputs = tuple(_tensor_info(v, role="input", where=str(path), producer=producer)
                   for v in graph.input if v.name not in initializer_names)
    outputs = tuple(_tensor_info(v, role="output", where=str(path), producer=producer) for v in graph.output)
    if not outputs:
        raise BuildError(f"{path}: the graph has no outputs", hint="re-export the model with its outputs")
    locations = external_data_locations(skeleton)
    size = path.stat().st_size
    for location in locations:
        target = _checked_location(path.parent, location)
        if not target.is_file():
            raise BuildError(f"{path}: external data file {location!r} is missing (looked in {path.parent})",
                             hint="copy the model's external data files next to the .onnx file")
        size += target.stat().st_size
    opsets = {op.domain if op.domain != "ai.onnx" else "": int(op.version) for op in skeleton.opset_import}
    return OnnxAnalysis(
        path=path,
        skeleton=skeleton,
        model=inferred,
        ir_version=int(skeleton.ir_version),
        opsets=opsets,
        producer=producer,
        inputs=inputs,
        outputs=outputs,
        external_data=locations,
        size_bytes=size,
        batch=find_batch_axis(inputs, outputs),
        notes=notes,
    )


def declare_batch_outputs(analysis: OnnxAnalysis, names: Sequence[str]) -> OnnxAnalysis:
    """``analysis`` with the named outputs' first axis declared as the batch axis.

    For exporters that mis-declare it (onnxmltools declares a LightGBM ``label`` as ``[1]``
    though it has one row per input row). The batch-consistency check of the build still
    proves the graph really batches.
    """
    known = {t.name for t in analysis.outputs}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"{analysis.path}: --batch-output {', '.join(unknown)}: no such output "
                          f"(the model's outputs: {', '.join(sorted(known))})",
                          hint="name one of the model's outputs")
    skeleton = onnx.ModelProto()
    skeleton.CopyFrom(analysis.skeleton)
    outputs = []
    for value_info, info in zip(skeleton.graph.output, analysis.outputs, strict=True):
        if info.name in names:
            dims = value_info.type.tensor_type.shape.dim
            if not dims:
                raise ConfigError(f"{analysis.path}: --batch-output {info.name}: the output is a scalar, so it "
                                  "has no axis to batch", hint="leave it out")
            dims[0].Clear()
            dims[0].dim_param = BATCH_DIM_PARAM
            info = TensorInfo(info.name, info.elem_type, (BATCH_DIM_PARAM, *(info.shape or ())[1:]))
        outputs.append(info)
    declared = ", ".join(repr(n) for n in names)
    return replace(analysis, skeleton=skeleton, outputs=tuple(outputs),
                   batch=find_batch_axis(analysis.inputs, tuple(outputs)), rewritten=True,
                   notes=[*analysis.notes, f"output(s) {declared} declared batched along their first axis "
                                           "(--batch-output)"])


def make_batch_dynamic(model: onnx.ModelProto, input_names: set[str], *, dim_param: str = BATCH_DIM_PARAM
                       ) -> onnx.ModelProto:
    """Copy of ``model`` whose client-facing inputs and all outputs have a symbolic first axis.

    Intermediate ``value_info`` is dropped: it was inferred for the fixed size and would
    contradict the new one. Whether the graph really runs at other sizes is for the caller
    to prove by running it (a ``Reshape`` to a constant shape, for one, will not).
    """
    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    del graph.value_info[:]
    for value_info in [*[v for v in graph.input if v.name in input_names], *graph.output]:
        dims = value_info.type.tensor_type.shape.dim
        if dims:
            dims[0].Clear()
            dims[0].dim_param = dim_param
    return result
