"""TK703, TK704 — what the python backend itself refuses when it loads a model.

* TK703: the ``FORCE_CPU_ONLY_INPUT_TENSORS`` parameter must be ``yes`` or ``no`` (python_backend
  ``src/python_be.cc`` ``ModelState::ModelState`` at r24.10 and r26.07: "Incorrect value for
  FORCE_CPU_ONLY_INPUT_TENSORS").
* TK705: ``EXECUTION_ENV_PATH`` under ``$$TRITON_MODEL_DIRECTORY`` must exist in the model folder,
  and a folder there must hold ``bin/activate`` (python_backend ``src/pb_env.cc``
  ``ExtractIfNotExtracted``: "Failed to get the canonical path for ..."; ``src/stub_launcher.cc``
  ``GetPythonEnvironment``: "Path .../bin/activate does not exist"; core ``model_config_utils.cc``
  ``LocalizePythonBackendExecutionEnvironmentPath`` puts the model folder in place of the variable).
  A path elsewhere is on the server's file system: an info finding says it was not checked.
* TK704: ``TritonPythonModel.auto_complete_config`` runs at load (unless the server runs with
  ``--disable-auto-complete-config``); it must return the config object (python_backend
  ``src/pb_stub.cc``), and its calls on that object raise when they contradict
  ``config.pbtxt`` (python_backend ``src/resources/triton_python_backend_utils.py``
  ``ModelConfig``, the same file at r24.10 and r26.07): ``set_max_batch_size(N)`` below the
  config's ``max_batch_size``, ``set_dynamic_batching()`` on a sequence-batching model,
  ``add_input`` / ``add_output`` with a property other than name, data_type, dims (and optional,
  for inputs), one missing, or a data type, dims or optional flag other than the config's for a
  tensor the config declares, ``set_model_transaction_policy`` with another key or another
  ``decoupled`` than the config's.

``model.py`` is read as text and parsed (``ast``), never imported or run: only calls made in the
function's own body (or in a ``for`` over a literal list there) with literal arguments are judged;
anything computed is left alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from google.protobuf.json_format import MessageToDict
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import is_folder, is_regular_file, path_exists, read_user_text
from tritonkit.errors import ConfigError
from tritonkit.repository.lint.core import ERROR, INFO, LintContext, ModelInfo, rule

FORCE_CPU = "FORCE_CPU_ONLY_INPUT_TENSORS"
_UTILS = "python_backend src/resources/triton_python_backend_utils.py @ r24.10"
_VALID = {"add_input": ("name", "data_type", "dims", "optional"), "add_output": ("name", "data_type", "dims")}
_MAX_MODEL_PY_BYTES = 4 * 1024 * 1024


def _python_model(cfg: mc.ModelConfig) -> bool:
    """Whether the python backend's model state loads this model (python, or a python-based backend)."""
    return cfg.backend == "python" or cfg.runtime == "model.py"


@rule("TK703", ERROR, "python backend parameter the backend refuses", family="modelfile")
def force_cpu_parameter(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    parameter = cfg.parameters.get(FORCE_CPU)
    if parameter is None or not _python_model(cfg) or parameter.string_value in ("yes", "no"):
        return
    ctx.report(m, f"{FORCE_CPU} is {parameter.string_value!r}: the python backend refuses the model ('Incorrect "
               f"value for {FORCE_CPU}'; python_backend src/python_be.cc ModelState @ r24.10)",
               field=f'parameters["{FORCE_CPU}"]', hint='use string_value: "yes" or "no"')


def _auto_complete(tree: ast.Module) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "TritonPythonModel":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "auto_complete_config" and item.args.args:
                    return item
    return None


def _literal(node: ast.expr, names: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args
            and all(k.arg is not None for k in node.keywords)):
        values = {str(k.arg): _literal(k.value, names) for k in node.keywords}  # dict(decoupled=True)
        return values if all(v is not None for v in values.values()) else None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _calls(fn: ast.FunctionDef) -> Iterator[tuple[str, Any, int]]:
    """``(method, literal argument, line)`` of each call on the function's config argument in its own body."""
    param = fn.args.args[0].arg
    names: dict[str, Any] = {}

    def call_of(stmt: ast.stmt, loop: dict[str, Any]) -> tuple[str, Any, int] | None:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return None
        call = stmt.value
        if not (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                and call.func.value.id == param):
            return None
        arg = _literal(call.args[0], {**names, **loop}) if call.args else ()
        return call.func.attr, arg, stmt.lineno

    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            names[stmt.targets[0].id] = _literal(stmt.value, names)
        elif isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name):
            items = _literal(stmt.iter, names)
            for item in items if isinstance(items, (list, tuple)) else ():
                for inner in stmt.body:
                    found = call_of(inner, {stmt.target.id: item})
                    if found is not None:
                        yield found
        elif (found := call_of(stmt, {})) is not None:
            yield found


def _tensor_problem(method: str, given: Any, declared: dict[str, dict[str, Any]]) -> str | None:
    """What ``add_input``/``add_output`` refuses about ``given`` (a literal dict), or ``None``."""
    if not isinstance(given, dict):
        return None
    kind = method.removeprefix("add_")
    extra = sorted(str(k) for k in given if k not in _VALID[method])
    if extra:
        return f"{kind} {given.get('name', '?')!r} has {', '.join(extra)}: only {', '.join(_VALID[method])} are taken"
    for key in ("name", "data_type", "dims"):
        if key not in given:
            return f"{kind} {given.get('name', '?')!r} is missing {key!r}"
    current = declared.get(str(given["name"]))
    if current is None:
        return None
    if current.get("dataType", "TYPE_INVALID") not in ("TYPE_INVALID", given["data_type"]):
        return f"{kind} {given['name']!r} is {given['data_type']}, the config declares {current['dataType']}"
    dims = [int(d) for d in current.get("dims", [])]
    if dims and dims != list(given["dims"]):
        return f"{kind} {given['name']!r} has dims {list(given['dims'])}, the config declares {dims}"
    if method == "add_input" and "optional" in given and bool(current.get("optional", False)) != given["optional"]:
        return f"input {given['name']!r} is optional={given['optional']}, the config says otherwise"
    return None


def _call_problem(method: str, arg: Any, cfg: mc.ModelConfig) -> str | None:
    if method == "set_max_batch_size" and isinstance(arg, int) and cfg.max_batch_size > arg:
        return f"set_max_batch_size({arg}) is below the config's max_batch_size {cfg.max_batch_size}"
    if method == "set_dynamic_batching" and cfg.HasField("sequence_batching"):
        return "set_dynamic_batching() on a model whose config uses sequence_batching"
    if method in _VALID:
        tensors = cfg.input if method == "add_input" else cfg.output
        declared = {t.name: MessageToDict(t) for t in tensors}
        return _tensor_problem(method, arg, declared)
    if method == "set_model_transaction_policy" and isinstance(arg, dict):
        extra = sorted(str(k) for k in arg if k != "decoupled")
        if extra:
            return f"set_model_transaction_policy with {', '.join(extra)}: only 'decoupled' is taken"
        if ("decoupled" in arg and cfg.HasField("model_transaction_policy")
                and bool(arg["decoupled"]) != cfg.model_transaction_policy.decoupled):
            return (f"set_model_transaction_policy decoupled={arg['decoupled']} against the config's "
                    f"decoupled: {str(cfg.model_transaction_policy.decoupled).lower()}")
    return None


def _problems(fn: ast.FunctionDef, cfg: mc.ModelConfig) -> Iterator[tuple[int, str, str]]:
    """``(line, problem, source)`` of what the python backend refuses in one ``auto_complete_config``."""
    if not any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn)):
        yield (fn.lineno, "it returns nothing, and the stub needs the config object back ('must return a valid "
               "pb.ModelConfig object')", "python_backend src/pb_stub.cc @ r24.10")
    for method, arg, line in _calls(fn):
        problem = _call_problem(method, arg, cfg)
        if problem is not None:
            yield line, problem, _UTILS


@rule("TK704", ERROR, "python model's auto_complete_config contradicts the config", family="modelfile")
def auto_complete_agrees(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if not _python_model(cfg):
        return
    file = cfg.default_model_filename or "model.py"
    reported: set[str] = set()
    for version in m.versions:
        path = m.folder / str(version) / file
        if not is_regular_file(path):
            continue
        try:
            tree = ast.parse(read_user_text(path, what="python model", max_bytes=_MAX_MODEL_PY_BYTES))
        except (ConfigError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # unreadable or not Python: the server's own load error says so
        fn = _auto_complete(tree)
        for line, problem, source in _problems(fn, cfg) if fn is not None else ():
            if problem in reported:
                continue
            reported.add(problem)
            ctx.report(m, f"auto_complete_config: {problem}; the python backend raises and the model does not "
                       f"load ({source}; skipped only under --disable-auto-complete-config)",
                       file=f"{m.name}/{version}/{file}", line=line, hint="make model.py and config.pbtxt agree "
                       "(or leave the field out of config.pbtxt and let auto_complete_config fill it in), and "
                       "return the config object")


EXECUTION_ENV = "EXECUTION_ENV_PATH"
MODEL_DIRECTORY_VARIABLE = "$$TRITON_MODEL_DIRECTORY"


@rule("TK705", ERROR, "python EXECUTION_ENV_PATH missing from the model folder", family="modelfile")
def execution_environment(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    parameter = cfg.parameters.get(EXECUTION_ENV)
    if parameter is None or cfg.backend != "python":
        return
    value = str(parameter.string_value)
    field = f'parameters["{EXECUTION_ENV}"]'
    if not value.startswith(MODEL_DIRECTORY_VARIABLE):
        ctx.report(m, f"{EXECUTION_ENV} {value!r} lies on the server's file system, not checked here", field=field,
                   severity=INFO, hint=f"ship the environment in the model folder and name it "
                   f"{MODEL_DIRECTORY_VARIABLE}/<file>.tar.gz, so lint and every server see the same file")
        return
    inside = value[len(MODEL_DIRECTORY_VARIABLE):].lstrip("/")
    path = m.folder / inside
    shown = f"{m.name}/{inside}"
    if not path_exists(path):
        problem = f"{shown} does not exist: the python backend refuses the model ('Failed to get the canonical path')"
    elif is_folder(path) and not path_exists(path / "bin" / "activate"):
        problem = (f"{shown} is a folder without bin/activate: the python backend refuses the model ('The Python "
                   "environment should contain an 'activate' script')")
    else:
        return
    ctx.report(m, f"{EXECUTION_ENV}: {problem} (python_backend src/pb_env.cc, src/stub_launcher.cc @ r24.10)",
               field=field, hint="put the conda-pack archive (or the unpacked environment) there, e.g. "
               f"conda pack -o {shown}")
