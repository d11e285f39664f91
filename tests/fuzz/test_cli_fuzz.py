"""Fuzzing generated from the click tree: every option and argument of every command gets hostile values.

The pairs (command, parameter) are read from ``tritonkit.cli:main`` when the module loads, so a new
command or option is fuzzed without a new test. Each drawn value goes through the whole command
where that starts nothing (the command's other required parameters given sane values; ``perf run``
with ``--dry-run``, which checks what a real run checks), and through the command line's parsing
alone for the commands that would start a server, perf_analyzer or an installer
(:data:`PARSE_ONLY`, stopped by one extra argument click refuses after it has converted the
drawn one).

Invariants, for every invocation:

- no traceback: the command ends with an exit status, never an exception;
- exit 0, 1 or 3 (a status the command documents), else 2 with an ``error:`` and a ``fix:`` line;
- never exit 0 for a value no one could mean (:data:`MEANINGLESS`: NaN, a port in a Unicode digit,
  an address without its port, a path holding NUL, a newline or bytes that are not UTF-8…);
- no hang: each invocation has :data:`TIMEOUT_S`;
- nothing run: a child process naming tritonserver, perf_analyzer, pip, Ray or an installer fails
  the test, and the backends folder every command sees (``$TRITONKIT_BACKEND_DIR``, also drawn as
  a value for every path) holds a library whose constructor writes a marker if anything loads it.

Values that are fine alone can clash, so a fifth as many invocations again draw two to four
options of one command together, each value sane or hostile. Bounded: :data:`EXAMPLES` drawn
invocations (1000, and 200 combinations: about 30 s on a busy 2-core machine). ``TRITONKIT_FUZZ_EXAMPLES=5000
TRITONKIT_FUZZ_SEED=7 python -m pytest tests/fuzz`` runs longer or elsewhere (docs/contributing.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.support.cli_tree import leaves as _leaves
from tests.support.cli_tree import written_name as _name
from tests.support.onnx_models import make_cnn, save
from tests.support.planted import planted_library
from tritonkit.cli import main
from tritonkit.cli._common import HostPort, Number, UserPath, Words
from tritonkit.provision.server import BACKEND_DIR_ENV

#: Drawn invocations per run, and the seed they are drawn from (both from the environment).
EXAMPLES = int(os.environ.get("TRITONKIT_FUZZ_EXAMPLES", "1000"))
SEED = int(os.environ.get("TRITONKIT_FUZZ_SEED", "45"))
#: The longest one invocation may take: a command refusing a value answers in well under a second;
#: the slowest that runs through (build onnx, verifying with ONNX Runtime) takes a few.
TIMEOUT_S = 30.0
#: Executables no fuzzed command may start (matched anywhere in the child's argv).
FORBIDDEN = ("tritonserver", "perf_analyzer", "ld-linux", "pip", "ray", "checkov", "prometheus", "kubectl",
             "trtllm-build")
#: Commands that, given a sane value, start a server, perf_analyzer, a download or a scanner: their
#: values are fuzzed through parsing only.
PARSE_ONLY = {("serve",), ("demo",), ("doctor",), ("perf", "sweep"), ("perf", "install"),
              ("deploy", "install-checkov"), ("deploy", "install-prometheus"), ("deploy", "check")}
#: An extra argument click refuses only after converting every parameter it was given.
STOP = "fuzz-stop-here"

LLAMA = ('{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, '
         '"num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000, "max_position_embeddings": 2048, '
         '"intermediate_size": 512, "torch_dtype": "float16"}')

# Values no one could mean, whatever the option: each must be refused (never exit 0).
_NOT_UTF8 = "caf\udce9"
MEANINGLESS_TEXT = ["", "   ", "a\nb", "a\0b", _NOT_UTF8, "x\x1b[2Jy"]
MEANINGLESS_URLS = ["127.0.0.1:8002", "http://", "http://h:²/metrics", "http://::1:8002/metrics", "ftp://h/x",
                    "http://h:0/", "http://a b/"]
MEANINGLESS_NUMBERS = ["nan", "inf", "-inf", "1e999", "²", "١٢", "0x10", "1,,2", "1_0"]
MEANINGLESS_ADDRESSES = ["127.0.0.1:²", "::1:6379", ":", "a b:1", "h:0", "h:65536", "http://h:1", "[zz]:1",
                         "h:١٢", "127.0.0.1"]
# Values that may mean something to some option: any answer but a traceback, a hang or a child.
ODD_TEXT = ["~0", "~nosuchuser/x", "-x", "'", '"', "$(touch pwned)", "../../etc/passwd", "p99<5ms", "x" * 5000, "²", "gpu:99999",
            "1000000000", "-1", "0", "1.5", "auto", "none", "8Gi", "1:1e9", "KEY=&a x"]
ODD_NUMBERS = ["0", "-1", "1.5", "1e3", "1000000000", "2147483648", "65536", "99999999999999999999", "-1e400"]


class _Spawned(BaseException):
    """A fuzzed command tried to start a forbidden child (a BaseException: no handler swallows it)."""


class _Hung(BaseException):
    """A fuzzed command ran past TIMEOUT_S."""


COMMANDS = dict(_leaves(main))
#: Every (command, parameter) there is, but flags and --help: the pool the fuzz draws from.
PAIRS = [(path, param) for path, command in COMMANDS.items() for param in command.params
         if not (isinstance(param, click.Option) and (param.is_flag or param.count)) and param.name != "help"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the fuzzed commands are given and watched with: a repository, an ONNX file, a Hugging Face
    config, a FIFO, and the planted backends folder with the marker its library would write."""
    tmp = tmp_path_factory.mktemp("fuzz")
    backends, marker = planted_library(tmp, version_script="VERS_1.19.2 { global: OrtGetApiBase; local: *; };")
    repo = tmp / "repo"
    added = CliRunner().invoke(main, ["repo", "add", str(repo), "--name", "m", "--backend", "python",
                                      "--input", "x:FP32:4", "--output", "y:FP32:4"])
    assert added.exit_code == 0, added.output
    hf = tmp / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(LLAMA)
    shutil.copytree(repo, tmp / "repo.orig")
    (tmp / "cwd").mkdir()
    return {"tmp": tmp, "backends": backends.parent, "marker": marker, "repo": str(repo), "hf": str(hf),
            "onnx": str(save(make_cnn(), tmp / "m.onnx")), "counter": [0]}


def _restore(w: dict[str, Any]) -> None:
    """The shared files as they were: a drawn --out or --repo may have replaced or filled one, and the
    next invocation must see what its drawn value names (a FIFO is a FIFO)."""
    tmp = w["tmp"]
    for name in ("fifo", "file.txt", "dir", "repo"):
        target = tmp / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
    os.mkfifo(tmp / "fifo")
    (tmp / "file.txt").write_text("p99<=50ms\n")
    (tmp / "dir").mkdir()
    shutil.copytree(tmp / "repo.orig", tmp / "repo")


def _base(path: tuple[str, ...], w: dict[str, Any], out: Path) -> list[str]:
    """Sane values for the command's other parameters, so that a drawn value reaches the library."""
    repo, onnx, hf = w["repo"], w["onnx"], w["hf"]
    return {
        ("perf", "run"): ["m", "--dry-run"],
        ("plan",): ["--hf-config", hf, "--gpu", "H100-SXM"],
        ("repo", "show"): [repo], ("repo", "lint"): [repo, "--target", "cpu"], ("repo", "diff"): [repo, repo],
        ("repo", "add"): [str(out / "repo"), "--name", "x", "--backend", "python"], ("repo", "init"): [str(out)],
        ("deploy", "k8s"): [repo, "--image", "img:1", "--out", str(out)],
        ("deploy", "ray-cluster"): ["--image", "img:1", "--out", str(out)],
        ("deploy", "alerts"): [repo], ("deploy", "dashboard"): [repo],
        ("perf", "compare"): [str(w["tmp"] / "dir"), str(w["tmp"] / "dir")], ("perf", "report"): [str(w["tmp"] / "dir")],
        ("build", "onnx"): [onnx, "--name", "m", "--repo", str(out), "--no-warmup"],
        ("build", "tensorrt"): [onnx, "--name", "m", "--repo", str(out)],
        ("build", "trtllm"): ["--engine", "llmapi", "--hf-model", hf, "--repo", str(out)],
        ("build", "vllm"): ["--hf-model", hf, "--repo", str(out)],
        ("infer",): ["m", "--url", "127.0.0.1:1", "--timeout-s", "2"],
    }.get(path, [])


def _with_value(path: tuple[str, ...], param: click.Parameter, value: str, w: dict[str, Any]) -> list[str]:
    """The command line: the sane values with the drawn one in its parameter's place."""
    w["counter"][0] += 1
    out = w["tmp"] / f"out{w['counter'][0]}"
    command = COMMANDS[path]
    if path in PARSE_ONLY:
        if isinstance(param, click.Argument):
            before = [p for p in command.params if isinstance(p, click.Argument)].index(param)
            return [*path, *[str(w["tmp"] / "dir")] * before, value, STOP]
        return [*path, _name(param), value, STOP]
    base = _base(path, w, out)
    if isinstance(param, click.Argument):
        positions = [i for i, word in enumerate(base) if not word.startswith("-")
                     and (i == 0 or not base[i - 1].startswith("-"))]
        index = [p for p in command.params if isinstance(p, click.Argument)].index(param)
        if index < len(positions):
            base = base[:positions[index]] + [value] + base[positions[index] + 1:]
            return [*path, *base]
        return [*path, *base, value]
    names = set(param.opts)
    kept: list[str] = []
    skip = False
    for word in base:
        if skip:
            skip = False
            continue
        if word in names:
            skip = True
            continue
        kept.append(word)
    # Options first: the drawn value is converted before any other parameter is checked.
    return [*path, _name(param), value, *kept]


def _is_number(param: click.Parameter) -> bool:
    return isinstance(param.type, (Number, click.types._NumberParamTypeBase))


def _is_address(param: click.Parameter) -> bool:
    return isinstance(param.type, HostPort) or _name(param) in ("--url", "--server", "--cluster")


def _is_url(param: click.Parameter) -> bool:
    return _name(param).endswith("-url") and not _is_address(param)


def meaningless(param: click.Parameter, value: str) -> bool:
    """Whether no one could mean ``value`` for ``param`` (``²`` is a fine model name, not a number)."""
    kind_values = (MEANINGLESS_NUMBERS if _is_number(param) else MEANINGLESS_ADDRESSES if _is_address(param)
                   else MEANINGLESS_URLS if _is_url(param) else [])
    return value in MEANINGLESS_TEXT or value in kind_values


def _values(param: click.Parameter, w: dict[str, Any]) -> st.SearchStrategy[str]:
    """Hostile values for ``param``'s type: the meaningless ones, odd ones, and generated text."""
    kind = param.type
    text = st.text(st.characters(codec="utf-8"), max_size=12)
    if _is_number(param):
        return st.sampled_from(MEANINGLESS_NUMBERS + ODD_NUMBERS) | st.from_regex(r"-?[0-9²١]{1,12}(\.[0-9]{0,3})?",
                                                                                  fullmatch=True)
    if _is_address(param):
        return st.sampled_from(MEANINGLESS_ADDRESSES + ["127.0.0.1:1", "[::1]:1", "localhost:1"])
    if _is_url(param):
        return st.sampled_from(MEANINGLESS_URLS + ["http://127.0.0.1:1/metrics", "https://[::1]:1/x"])
    if isinstance(kind, (UserPath, click.Path)):
        tmp = w["tmp"]
        paths = [str(tmp / "fifo"), str(w["backends"]), str(tmp / "file.txt"), str(tmp / "dir"),
                 str(tmp / "missing"), "/proc/x", str(tmp / "new\nline"), str(tmp / _NOT_UTF8), "~0",
                 "~nosuchuser/x"]
        return st.sampled_from(MEANINGLESS_TEXT + paths)
    if isinstance(kind, click.Choice):
        choices = [str(c) for c in kind.choices]
        return st.sampled_from(["", "NOPE", *(c + "\n" for c in choices), *(c.upper() + "X" for c in choices)])
    files = [str(w["tmp"] / name) for name in ("fifo", "file.txt", "dir", "missing.yaml")]
    if isinstance(kind, Words) or kind is click.STRING:  # many take a file too (--sla, --input-data)
        return st.sampled_from(MEANINGLESS_TEXT + ODD_TEXT + files) | text
    return st.sampled_from(MEANINGLESS_TEXT) | text


def _sane(param: click.Parameter, w: dict[str, Any]) -> st.SearchStrategy[str]:
    """Values ``param`` takes alone (its example, its bounds' ends, its choices): drawn beside
    others, so that combinations reach the checks between options, not only each one's own."""
    kind = param.type
    if isinstance(kind, Number):
        b = kind.bounds
        ends = [str(int(v) if b.integer else v) for v in (b.low, b.high) if v is not None
                and not (v == b.low and b.low_open) and not (v == b.high and b.high_open)]
        return st.sampled_from([b.example, *ends])
    if isinstance(kind, click.Choice):
        return st.sampled_from([str(c) for c in kind.choices])
    if _is_address(param):
        return st.sampled_from(["127.0.0.1:1", "[::1]:1"])
    if _is_url(param):
        return st.just("http://127.0.0.1:1/metrics")
    if isinstance(kind, (UserPath, click.Path)):
        return st.sampled_from([str(w["tmp"] / "dir"), str(w["tmp"] / "file.txt"), str(w["tmp"] / "new-out")])
    example = getattr(kind, "example", "") or "x"
    return st.sampled_from([example, "1", "x"])


@contextlib.contextmanager
def _watched(spawned: list[list[str]], folder: Path) -> Iterator[None]:
    """Forbidden children refused (and recorded), a time limit, and ``folder`` as the current one, for the block."""
    real_init = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *more: Any, **kwargs: Any) -> None:
        argv = [str(args)] if isinstance(args, (str, bytes, os.PathLike)) else [str(a) for a in args]
        if any(name in word for word in argv for name in FORBIDDEN):
            spawned.append(argv)
            raise _Spawned(argv)
        real_init(self, args, *more, **kwargs)

    def hung(_signum: int, _frame: FrameType | None) -> None:
        raise _Hung(f"past {TIMEOUT_S} s")

    previous = signal.signal(signal.SIGALRM, hung)
    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT_S)
    here = os.getcwd()
    os.chdir(folder)  # a results/ folder a command writes where it runs lands in the fuzz's own
    try:
        yield
    finally:
        os.chdir(here)
        signal.setitimer(signal.ITIMER_REAL, 0)
        subprocess.Popen.__init__ = real_init  # type: ignore[method-assign]
        signal.signal(signal.SIGALRM, previous)


def check_invocation(args: list[str], param: click.Parameter, value: str, w: dict[str, Any],
                     more: Sequence[tuple[click.Parameter, str]] = ()) -> None:
    """Run ``tritonkit ARGS`` under watch and hold it to the invariants (module docstring); ``more``:
    further (option, value) pairs drawn into the same command line."""
    _restore(w)
    spawned: list[list[str]] = []
    where = f"tritonkit {' '.join(ascii(a) if not a.isprintable() else a for a in args)}"
    try:
        with _watched(spawned, w["tmp"] / "cwd"):
            result = CliRunner().invoke(main, args, env={BACKEND_DIR_ENV: str(w["backends"])})
    except (_Spawned, _Hung, pytest.fail.Exception) as exc:  # a child, a hang, a server started (the suite's check)
        pytest.fail(f"{where}: {exc!r}")
    assert not spawned, f"{where}: started {spawned}"
    assert not w["marker"].exists(), f"{where}: ran the planted library"
    exception = result.exception
    assert exception is None or isinstance(exception, SystemExit), f"{where}: {exception!r}"
    assert "Traceback" not in result.output, where
    assert result.exit_code in (0, 1, 2, 3), f"{where}: exit {result.exit_code}\n{result.output}"
    lines = result.output.splitlines()
    if result.exit_code == 2:
        assert any(line.startswith("error: ") for line in lines), f"{where}: {result.output}"
        assert any(line.startswith("  fix: ") for line in lines), f"{where}: {result.output}"
    if any(meaningless(p, v) for p, v in [(param, value), *more]):
        assert result.exit_code != 0, f"{where}: accepted a meaningless value\n{result.output}"


def test_the_pool_covers_every_command_and_its_options() -> None:
    assert {path for path, _ in PAIRS} >= set(COMMANDS) - {("deploy", "install-checkov"), ("deploy", "install-prometheus")}
    assert len(PAIRS) > 300  # every option of every command, not a hand-picked list


@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_values_for_every_option_end_in_a_status_never_a_traceback_a_hang_or_a_child(
        world: dict[str, Any], data: st.DataObject) -> None:
    path, param = data.draw(st.sampled_from(PAIRS), label="parameter")
    value = data.draw(_values(param, world), label="value")
    check_invocation(_with_value(path, param, value, world), param, value, world)


def _with_more(args: list[str], path: tuple[str, ...], more: Sequence[tuple[click.Parameter, str]]) -> list[str]:
    """``args`` with further drawn options right after the command (each replacing a sane value it had)."""
    rest = args[len(path):]
    for param, _ in more:
        names, kept, skip = set(param.opts), list[str](), False
        for word in rest:
            if skip:
                skip = False
            elif word in names:
                skip = True
            else:
                kept.append(word)
        rest = kept
    drawn = [word for param, value in more for word in (_name(param), value)]
    return [*path, *drawn, *rest]


#: Commands whose options run through to the library (not PARSE_ONLY), by command: for combinations.
RUN_OPTIONS = {path: [p for q, p in PAIRS if q == path and isinstance(p, click.Option)]
               for path in COMMANDS if path not in PARSE_ONLY}


@seed(SEED)
@settings(max_examples=max(1, EXAMPLES // 5), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_several_hostile_options_at_once_end_in_a_status_never_a_traceback_a_hang_or_a_child(
        world: dict[str, Any], data: st.DataObject) -> None:
    """Values that are each fine alone can clash (--cluster with --clients, --object-store with
    --worker-memory): two to four options of one command drawn together."""
    path = data.draw(st.sampled_from(sorted(p for p, options in RUN_OPTIONS.items() if len(options) >= 2)),
                     label="command")
    params = data.draw(st.lists(st.sampled_from(RUN_OPTIONS[path]), min_size=2, max_size=4,
                                unique_by=lambda p: p.name), label="options")
    pairs = [(param, data.draw(_sane(param, world) | _values(param, world), label=_name(param))) for param in params]
    (first, value), more = pairs[0], pairs[1:]
    args = _with_more(_with_value(path, first, value, world), path, more)
    check_invocation(args, first, value, world, more)


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=lambda p: " ".join(p))
def test_every_command_refuses_a_meaningless_value_in_each_of_its_options(world: dict[str, Any],
                                                                          path: tuple[str, ...]) -> None:
    """The exhaustive slice: per command, each parameter once with the value its type fears most."""
    for _, param in [(p, q) for p, q in PAIRS if p == path]:
        value = ("nan" if _is_number(param) else "::1:6379" if _is_address(param)
                 else "http://::1:8002/metrics" if _is_url(param) else "a\nb")
        check_invocation(_with_value(path, param, value, world), param, value, world)


def test_the_watch_catches_a_forbidden_child_a_hang_and_restores_what_it_changed(tmp_path: Path) -> None:
    """The fuzz's own guards can fail: a child naming perf_analyzer is refused before it starts, and a
    block running past the limit is stopped."""
    spawned: list[list[str]] = []
    before = (subprocess.Popen.__init__, os.getcwd())
    with pytest.raises(_Spawned), _watched(spawned, tmp_path):
        subprocess.Popen(["perf_analyzer", "--version"])
    assert spawned == [["perf_analyzer", "--version"]]
    assert (subprocess.Popen.__init__, os.getcwd()) == before
    with _watched([], tmp_path):
        assert subprocess.run(["true"], check=True).returncode == 0  # other children run
    global TIMEOUT_S
    saved, TIMEOUT_S = TIMEOUT_S, 0.2
    try:
        with pytest.raises(_Hung), _watched([], tmp_path):
            signal.pause()
    finally:
        TIMEOUT_S = saved
