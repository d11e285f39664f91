"""Valid load-test data derived from the model file, so ``perf run`` works on the models people serve.

perf_analyzer's own data (``zero`` / ``random``) is wrong for most real models: random int64
token ids fall outside the vocabulary and every request errors; random float bits hold NaN and
inf, which break its profile export; a variable sequence length is refused outright. When the
repository holds the model's ONNX file, :func:`derive_samples` reads it and makes data that the
model accepts:

- **token ids**: an integer input followed (through Cast / Unsqueeze / Reshape / … ) to the
  ``Gather`` whose table is an initializer is drawn from ``[0, rows)`` of that table (its first
  dim: the vocabulary, the token-type or the position count);
- **masks**: integer or bool inputs named like a mask (``attention_mask``) are all ones;
- other integer inputs are zeros; floats are standard normal (always finite); bools alternate;
  strings are short ASCII texts;
- **variable dims** other than the batch axis take the sequence length: a fixed value or a range
  (``--seq-len 16:128``: the samples spread over it), default :data:`DEFAULT_SEQ_LEN`. Dims with
  the same symbolic name share one value within a sample, so ``input_ids`` and
  ``attention_mask`` always agree. A model served without batching gets 1 for an axis named like
  a batch. Where the build recorded the sizes it verified an axis at (``tritonkit build onnx``
  writes them into ``config.pbtxt``, see :data:`~tritonkit.builders.verify.VERIFIED_SIZES_PARAMETER`),
  the default length is one of those: :data:`DEFAULT_SEQ_LEN` when verified, else the largest
  verified; an axis verified at one size only (pinned in the config) always takes that size.

:func:`prepare_spec` writes those samples as perf_analyzer ``--input-data`` JSON into the run
folder and runs one sample through ONNX Runtime to learn the largest output, which sizes the
system shared memory that keeps response outputs out of perf_analyzer's memory and its profile
export (see :func:`output_region_bytes`). For a model without a file here,
:func:`missing_data_error` names the option that supplies the data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import onnx

from tritonkit._values import TOKENS, Bounds, excerpt
from tritonkit.errors import ConfigError
from tritonkit.perf.measure.spec import PerfSpec, write_input_data

__all__ = [
    "DEFAULT_SAMPLES",
    "DEFAULT_SEQ_LEN",
    "UNBOUNDED_OUTPUT_BYTES",
    "PreparedInputs",
    "SeqLen",
    "derive_samples",
    "find_model_file",
    "missing_data_error",
    "output_region_bytes",
    "prepare_run_inputs",
    "prepare_spec",
    "region_for_server",
    "sweep_spec",
]

#: Sequence length used for variable dims when ``--seq-len`` is not given.
DEFAULT_SEQ_LEN = 128
#: Distinct requests written to the data file; perf_analyzer cycles through them.
DEFAULT_SAMPLES = 8
#: Name of the data file written into the run folder.
INPUT_DATA_FILE = "input_data.json"
#: Outputs per request (each output's region) from which measuring without the output region is
#: refused: perf_analyzer would then keep that much per request in memory and in the profile
#: export, growing with every request of the run (an LM's logits are megabytes a request).
UNBOUNDED_OUTPUT_BYTES = 1 << 20

# Ops an index tensor passes through unchanged in value on its way to the Gather it feeds.
_PASS_THROUGH = {"Cast", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity", "Expand", "Transpose"}
_MASK_RE = re.compile(r"mask", re.IGNORECASE)
_BATCH_RE = re.compile(r"batch", re.IGNORECASE)
#: The symbolic name tritonkit gives a batch axis it made dynamic (one request: one item).
BATCH_SYMBOL = "batch"
# Shared memory regions are rounded up to this (one page) and given this much headroom.
_PAGE_BYTES = 4096


#: A variable dim's length: a whole number, at most a sequence's longest (every request holds one).
_SEQ_LEN = Bounds(integer=True, low=1, high=int(TOKENS.high or 1), noun="length", example="128")


@dataclass(frozen=True)
class SeqLen:
    """The length given to variable dims: ``low`` to ``high`` inclusive (equal for a fixed length)."""

    low: int = DEFAULT_SEQ_LEN
    high: int = DEFAULT_SEQ_LEN

    @staticmethod
    def parse(text: str | None) -> SeqLen:
        """``"128"`` or ``"16:128"`` (``--seq-len``); ``None`` gives the default."""
        if text is None:
            return SeqLen()
        low_text, _, high_text = text.partition(":")
        try:
            low = int(low_text)
            high = int(high_text) if high_text else low
        except ValueError:
            low = high = 0
        if low < 1 or high < low:
            raise ConfigError(f"--seq-len {excerpt(text)} is not a length N or a range LOW:HIGH of positive integers",
                              hint="e.g. --seq-len 128 or --seq-len 16:128")
        _SEQ_LEN.check(high, "--seq-len")
        return SeqLen(low, high)

    def lengths(self, count: int) -> list[int]:
        """``count`` lengths spread evenly over the range (the last one is ``high``)."""
        if count <= 1 or self.low == self.high:
            return [self.high] * max(count, 1)
        return [int(round(self.low + (self.high - self.low) * i / (count - 1))) for i in range(count)]


@dataclass(frozen=True)
class PreparedInputs:
    """What :func:`prepare_spec` did: the spec to run, and one line per input saying how its data was made."""

    spec: PerfSpec
    notes: list[str] = field(default_factory=list)
    data_file: Path | None = None
    output_bytes: int | None = None
    #: The model file the data came from, and the derived requests (empty when none were derived).
    model_file: Path | None = None
    samples: list[dict[str, np.ndarray]] = field(default_factory=list)


def find_model_file(repo: Path | str | None, model: str, version: str | None = None) -> Path | None:
    """``<repo>/<model>/<version>/model.onnx`` (the newest version when none is named), or ``None``."""
    if repo is None:
        return None
    folder = Path(repo) / model
    if not folder.is_dir():
        return None
    if version:
        candidate = folder / version / "model.onnx"
        return candidate if candidate.is_file() else None
    versions = sorted((int(p.name) for p in folder.iterdir() if p.name.isascii() and p.name.isdigit() and p.is_dir()), reverse=True)
    for number in versions:
        candidate = folder / str(number) / "model.onnx"
        if candidate.is_file():
            return candidate
    return None


def _gather_bound(graph: onnx.GraphProto, name: str) -> tuple[int, str] | None:
    """Rows of the initializer table that values of ``name`` index, following pass-through ops."""
    tables = {init.name: init for init in graph.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for used in node.input:
            consumers.setdefault(used, []).append(node)
    seen: set[str] = set()
    frontier = [name]
    while frontier:
        current = frontier.pop()
        if current in seen:
            continue
        seen.add(current)
        for node in consumers.get(current, []):
            if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == current:
                table = tables.get(node.input[0])
                if table is not None and len(table.dims) >= 1:
                    return int(table.dims[0]), node.input[0]
            elif node.op_type in _PASS_THROUGH and node.input and node.input[0] == current:
                frontier.extend(node.output)
    return None


def verified_sizes(model_file: Path | str) -> dict[str, tuple[int, ...]]:
    """The sizes the build verified each dynamic axis at, from the model's ``config.pbtxt`` beside its
    version folder (empty when it records none)."""
    from tritonkit.builders.verify import VERIFIED_SIZES_PARAMETER, parse_verified_sizes
    from tritonkit.errors import TritonKitError
    from tritonkit.repository import read_config

    config_path = Path(model_file).parent.parent / "config.pbtxt"
    try:
        config = read_config(config_path) if config_path.is_file() else None
    except (TritonKitError, OSError):
        return {}
    if config is None or VERIFIED_SIZES_PARAMETER not in config.parameters:
        return {}
    return parse_verified_sizes(config.parameters[VERIFIED_SIZES_PARAMETER].string_value)


def _verified_length(sizes: tuple[int, ...], seq_len: SeqLen | None, length: int) -> int:
    """The length an axis verified at ``sizes`` takes: its one size when pinned; the asked ``length``
    when ``--seq-len`` was given; else :data:`DEFAULT_SEQ_LEN` when verified, else the largest verified."""
    if len(sizes) == 1:
        return sizes[0]
    if seq_len is not None:
        return length
    return DEFAULT_SEQ_LEN if DEFAULT_SEQ_LEN in sizes else max(sizes)


def _symbolic_sizes(inputs: Sequence[onnx.ValueInfoProto], length: int, *, skip_batch: bool,
                    fixed: Mapping[str, int] | None = None) -> dict[str, int]:
    names: dict[str, int] = dict(fixed or {})
    for value in inputs:
        dims = value.type.tensor_type.shape.dim
        for position, dim in enumerate(dims):
            if skip_batch and position == 0:
                continue
            if not dim.HasField("dim_value") and dim.dim_param:
                # A model served without batching still names its batch axis: one request is one item.
                names.setdefault(dim.dim_param, 1 if _BATCH_RE.search(dim.dim_param) else length)
    return names


def _shape(value: onnx.ValueInfoProto, sizes: Mapping[str, int], length: int, *, skip_batch: bool) -> list[int]:
    shape = []
    for position, dim in enumerate(value.type.tensor_type.shape.dim):
        if skip_batch and position == 0:
            continue
        if dim.HasField("dim_value") and dim.dim_value > 0:
            shape.append(int(dim.dim_value))
        else:
            shape.append(sizes.get(dim.dim_param, length))
    return shape


def derive_samples(model_file: Path | str, *, batched: bool, seq_len: SeqLen | None = None,
                   count: int = DEFAULT_SAMPLES, seed: int = 0) -> tuple[list[dict[str, np.ndarray]], list[str]]:
    """``count`` requests' inputs the model accepts (without the batch axis when ``batched``),
    and one note per input saying how its values were chosen. See the module docstring;
    ``seq_len`` ``None`` is the default length, within the sizes the build verified."""
    asked = seq_len
    seq_len = seq_len or SeqLen()
    model = onnx.load(str(model_file), load_external_data=False)
    verified = verified_sizes(model_file)
    graph = model.graph
    initializers = {init.name for init in graph.initializer}
    inputs = [v for v in graph.input if v.name not in initializers]
    rng = np.random.default_rng(seed)
    notes: dict[str, str] = {}
    samples: list[dict[str, np.ndarray]] = []
    bounds = {v.name: _gather_bound(graph, v.name) for v in inputs}
    for length in seq_len.lengths(count):
        fixed = {name: _verified_length(sizes, asked, length) for name, sizes in verified.items()}
        sizes = _symbolic_sizes(inputs, length, skip_batch=batched, fixed=fixed)
        sample: dict[str, np.ndarray] = {}
        for value in inputs:
            elem = value.type.tensor_type.elem_type
            shape = _shape(value, sizes, length, skip_batch=batched)
            sample[value.name], notes[value.name] = _values(value.name, elem, shape, bounds[value.name], rng)
        samples.append(sample)
    variable = sorted({n for v in inputs for n in _symbolic_sizes([v], 0, skip_batch=batched)})
    lines = [f"{name}: {note}" for name, note in notes.items()]
    free = [name for name in variable if name not in verified]
    if free:
        span = f"{seq_len.low}" if seq_len.low == seq_len.high else f"{seq_len.low} to {seq_len.high}"
        lines.append(f"variable dims {', '.join(free)}: length {span} (--seq-len)")
    for name in variable:
        if name in verified:
            chosen = sorted({_verified_length(verified[name], asked, length) for length in seq_len.lengths(count)})
            pinned = " (pinned in config.pbtxt)" if len(verified[name]) == 1 else ""
            lines.append(f"variable dim {name}: length {', '.join(str(c) for c in chosen)}, verified by the build at "
                         f"{', '.join(str(v) for v in verified[name])}{pinned}")
    return samples, lines


def _values(name: str, elem: int, shape: list[int], bound: tuple[int, str] | None,
            rng: np.random.Generator) -> tuple[np.ndarray, str]:
    if elem == onnx.TensorProto.STRING:
        texts = [f"tritonkit sample text {i}" for i in range(int(np.prod(shape)) if shape else 1)]
        return np.array(texts, dtype=object).reshape(shape), "short ASCII texts"
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    if dtype.kind == "b":
        if _MASK_RE.search(name):
            return np.ones(shape, dtype=dtype), "all true (a mask)"
        return (np.arange(int(np.prod(shape))) % 2 == 0).reshape(shape), "alternating true/false"
    if dtype.kind in "iu":
        if bound is not None:
            rows, table = bound
            return rng.integers(0, rows, size=shape).astype(dtype), f"ids in [0, {rows}) (rows of {table!r})"
        if _MASK_RE.search(name):
            return np.ones(shape, dtype=dtype), "all ones (a mask)"
        return np.zeros(shape, dtype=dtype), "zeros (indexes no table in the graph)"
    return rng.standard_normal(shape).astype(dtype), "standard normal floats (finite)"


def _declared_output_bytes(model: onnx.ModelProto, sample: Mapping[str, np.ndarray], *, batched: bool) -> int | None:
    """The largest output's bytes for one request of ``sample``, from the declared output shapes
    whose symbolic dims also name input dims (``logits [batch, sequence, 50257]``); ``None`` when
    some dim or type is not known that way."""
    sizes: dict[str, int] = {BATCH_SYMBOL: 1}
    for value in model.graph.input:
        if value.name not in sample:
            continue
        dims = list(value.type.tensor_type.shape.dim)[1 if batched else 0:]
        for dim, size in zip(dims, np.asarray(sample[value.name]).shape, strict=False):
            if dim.dim_param:
                sizes[dim.dim_param] = int(size)
    largest = 0
    for value in model.graph.output:
        elem = value.type.tensor_type.elem_type
        if elem == onnx.TensorProto.STRING or not value.type.tensor_type.HasField("shape"):
            return None
        count = 1
        for position, dim in enumerate(value.type.tensor_type.shape.dim):
            if batched and position == 0:
                continue
            if dim.HasField("dim_value") and dim.dim_value > 0:
                count *= int(dim.dim_value)
            elif dim.dim_param in sizes:
                count *= sizes[dim.dim_param]
            else:
                return None
        largest = max(largest, count * np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)).itemsize)
    return largest


def output_region_bytes(model_file: Path | str, sample: Mapping[str, np.ndarray], *, batched: bool) -> int:
    """Bytes of the largest output for one request of ``sample`` (its longest sequence), rounded
    up to a page: the per-output shared memory region. From the declared shapes when they say it,
    else from running ``sample`` through ONNX Runtime on the model file."""
    largest = _declared_output_bytes(onnx.load(str(model_file), load_external_data=False), sample, batched=batched)
    if largest is None:
        from tritonkit.builders.verify import ort_runner

        feeds = {k: (v[np.newaxis] if batched else v) for k, v in sample.items()}
        outputs = ort_runner(model_file, threads=1)(feeds)
        largest = max((int(np.asarray(v).nbytes) for v in outputs.values()), default=0)
    return max(_PAGE_BYTES, -(-largest // _PAGE_BYTES) * _PAGE_BYTES)


def _loopback(url: str) -> bool:
    host = url.rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def prepare_spec(spec: PerfSpec, model_file: Path, folder: Path, *, batched: bool, seq_len: SeqLen | None = None,
                 keep_outputs: bool = False, write: bool = True) -> PreparedInputs:
    """``spec`` with derived ``--input-data`` (unless it has data of its own) and, on a loopback
    server, response outputs in system shared memory (unless ``keep_outputs``).

    Outputs in shared memory never reach perf_analyzer's request records, so its memory and the
    profile export stay bounded by the inputs (perf_analyzer 2.60 keeps every response's outputs
    otherwise: ``InferContext::GetOutputs``). Inputs travel through shared memory too then.
    ``write=False`` (``--dry-run``) plans the file without writing it.
    """
    notes: list[str] = []
    data_file: Path | None = None
    samples, derived_notes = derive_samples(model_file, batched=batched, seq_len=seq_len)
    if spec.input_data is None:
        notes = derived_notes
        data_file = folder / INPUT_DATA_FILE
        if write:
            write_input_data(data_file, samples)
        spec = replace(spec, input_data=str(data_file), shapes={})
        notes.insert(0, f"input data derived from {model_file} into {data_file.name}")
    output_bytes: int | None = None
    if data_file is None and not keep_outputs and spec.shared_memory in (None, "none"):
        # The user's own data may be longer than anything derived here: a region sized from the
        # derived samples could be too small, so their outputs come back as perf_analyzer receives them.
        notes.append("outputs are kept by perf_analyzer with your --input-data (their size is not known "
                     "here); its memory and profile export grow with outputs x requests")
    elif not keep_outputs and spec.shared_memory in (None, "none") and _loopback(spec.url):
        longest = max(samples, key=lambda s: sum(int(np.asarray(v).size) for v in s.values()))
        output_bytes = output_region_bytes(model_file, longest, batched=batched)
        spec = replace(spec, shared_memory="system", output_shared_memory_size_bytes=output_bytes)
        notes.append(f"outputs go to system shared memory ({output_bytes} B per output and request), so "
                     "perf_analyzer neither holds nor exports them (--keep-outputs to keep them)")
    return PreparedInputs(spec=spec, notes=notes, data_file=data_file, output_bytes=output_bytes,
                          model_file=model_file, samples=samples)


def region_for_server(spec: PerfSpec) -> tuple[PerfSpec, str | None]:
    """``spec`` as the server at ``spec.url`` takes it, and the line to say when that changed it.

    The output region :func:`prepare_spec` adds (``output_shared_memory_size_bytes``) stays when
    the server takes client shared memory. A server that refuses it by policy (Triton 2.68+
    started without ``--allow-client-shm=true``) is measured without it: perf_analyzer then keeps
    each response's outputs, and the line says what that costs; with outputs of
    :data:`UNBOUNDED_OUTPUT_BYTES` or more a request that is refused (:class:`ConfigError`), since
    the profile export would grow without bound.
    """
    size = spec.output_shared_memory_size_bytes
    if size is None or spec.shared_memory in (None, "none"):
        return spec, None
    from tritonkit.client import shared_memory_refusal
    from tritonkit.triton_releases import CLIENT_SHM_FLAG

    refusal = shared_memory_refusal(spec.url)
    if refusal is None:
        return spec, None
    said = refusal.message.split("): ", 1)[0] + ")"
    if size >= UNBOUNDED_OUTPUT_BYTES:
        raise ConfigError(
            f"model '{spec.model}': {said}; without the output region perf_analyzer keeps every response's outputs "
            f"({size} B per output and request) in its memory and profile export, which grow without bound",
            hint=f"start the server with {CLIENT_SHM_FLAG}, or pass --keep-outputs to measure with the outputs kept")
    plain = replace(spec, shared_memory=None, output_shared_memory_size_bytes=None)
    return plain, (f"{said}: measured without the output region, so perf_analyzer keeps each response's outputs "
                   f"(up to {size} B per output and request) in its memory and profile export")


def missing_data_error(model: str, inputs: Sequence[tuple[str, Sequence[int]]],
                       shapes: Mapping[str, Sequence[int]]) -> ConfigError | None:
    """The refusal for a model whose inputs have variable dims that no ``--shape`` covers, naming
    the options that supply them; ``None`` when perf_analyzer has what it needs.

    ``inputs`` are ``(name, dims)`` as the server declares them, without the batch axis, -1 for
    a variable dim.
    """
    missing = [(name, [int(d) for d in dims]) for name, dims in inputs
               if any(int(d) < 0 for d in dims) and name not in shapes]
    if not missing:
        return None
    example = " ".join(f"--shape {name}:{','.join(str(d if d > 0 else DEFAULT_SEQ_LEN) for d in dims)}"
                       for name, dims in missing)
    described = ", ".join(f"{name!r} {dims}" for name, dims in missing)
    return ConfigError(
        f"model '{model}': input(s) {described} have variable dims (-1), which perf_analyzer cannot invent",
        hint=f"pass --repo DIR (the model repository holding {model}/<version>/model.onnx) so tritonkit derives "
             f"valid data, or {example}, or --input-data FILE.json (perf_analyzer JSON with valid values; "
             "random token ids fall outside the vocabulary)")


def prepare_run_inputs(spec: PerfSpec, folder: Path, *, repo: Path | str | None, seq_len: SeqLen | None = None,
                       keep_outputs: bool = False, write: bool = True) -> PreparedInputs:
    """The data step of ``perf run``: derive data from the model file in ``repo`` when it is
    there (:func:`prepare_spec`), else refuse variable dims nobody supplies
    (:func:`missing_data_error`). Asks the server (gRPC) for the model's metadata; other
    protocols and unreachable servers are left to the target check that follows."""
    from tritonkit.client import Client
    from tritonkit.errors import TritonKitError

    if spec.protocol != "grpc":
        return PreparedInputs(spec=spec)
    try:
        with Client(spec.url, timeouts=5.0) as client:
            metadata = client.model_metadata(spec.model, version=spec.model_version or "")
    except TritonKitError:
        return PreparedInputs(spec=spec)  # the target check names what is wrong
    batched = metadata.max_batch_size > 0
    model_file = find_model_file(repo, spec.model, spec.model_version)
    if model_file is not None:
        prepared = prepare_spec(spec, model_file, folder, batched=batched, seq_len=seq_len,
                                keep_outputs=keep_outputs, write=write)
        checked, said = region_for_server(prepared.spec)
        if said is None:
            return prepared
        notes = [n for n in prepared.notes if not n.startswith("outputs go to system shared memory")]
        return replace(prepared, spec=checked, notes=[*notes, said], output_bytes=None)
    if spec.input_data is None:
        error = missing_data_error(spec.model, [(t.name, t.dims) for t in metadata.inputs], spec.shapes)
        if error is not None:
            raise error
    return PreparedInputs(spec=spec)


def sweep_spec(spec: PerfSpec, repo: Path, model: str, folder: Path, *,
               max_batch_sizes: Sequence[int] | None = None) -> PreparedInputs:
    """The data step of a sweep over ``repo``'s ``model``: :func:`prepare_spec` on its model file
    when there is one and the user gave no data. Every variant gets the same data file, so the
    variants must all batch or all not (the data's first axis differs); a grid mixing
    ``max_batch_size`` 0 with others is left to ``--input-data`` / ``--shape``."""
    from tritonkit.repository import read_config

    model_file = find_model_file(repo, model)
    config_path = Path(repo) / model / "config.pbtxt"
    if model_file is None or spec.input_data is not None or not config_path.is_file():
        return PreparedInputs(spec=spec)
    sizes = list(max_batch_sizes) if max_batch_sizes else [int(read_config(config_path).max_batch_size)]
    if len({size > 0 for size in sizes}) > 1:
        return PreparedInputs(spec=spec, notes=["max batch sizes mix 0 and others: no derived data "
                                                "(pass --input-data or --shape)"])
    return prepare_spec(spec, model_file, folder, batched=sizes[0] > 0)
