"""A mutation fuzz of the spec-file reader (``--config FILE``) through the CLI: never a traceback.

Valid spec files (TOML and YAML, one per command, and a file of several) are mutated the ways a
hand-edited file breaks: bytes flipped, the file cut short, a line written twice, a key misspelt, a
value swapped for one of another type (a list, a table, a boolean, a huge or non-finite number, a
date, a control character, an empty text), brackets nested thousands deep. Each mutant is read by
``COMMAND --config FILE --print-config`` (which reads and checks every value, then prints the spec
and runs nothing), and whatever comes out is exit 0 with a spec that reads back the same, or exit 2
with one ``error:`` line naming the spec file (the line where there is one; click's "Missing
argument" where the file lacks a required one) and a ``fix:`` line;
never another status, a traceback, or a file written.

Seeded and bounded: ``TRITONKIT_FUZZ_EXAMPLES`` mutants (default 300, about 20 s) from
``TRITONKIT_FUZZ_SEED`` (default 57).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tritonkit.cli import main

EXAMPLES = int(os.environ.get("TRITONKIT_FUZZ_EXAMPLES", "300"))
SEED = int(os.environ.get("TRITONKIT_FUZZ_SEED", "57"))

SPECS = {
    "perf run": ('[perf.run]\nmodel = "add_sub"\nurl = "127.0.0.1:8001"\nsla = "p99<=50ms"\nconcurrency = [1, 2]\n'
                 'duration_s = 1.5\nshape = ["INPUT0:4"]\nkeep_outputs = true\nrate_tolerance = 5\n'),
    "perf sweep": ('[perf.sweep]\nrepo = "repo"\nmodel = ["a", "b"]\nsla = "p99<=50ms"\ninstances = [1, 2]\n'
                   'max_batch_size = "4,8"\nbatch_window = ["0", "5ms"]\nexhaustive = false\nheadroom = "20%"\n'),
    "perf compare": '[perf.compare]\nbase = "base"\nnew = "new"\nmax_throughput_drop = "5%"\nrun_noise = "3%"\n',
    "plan": 'gpu = "H100-80GB"\nqps = 20\nsearch = false\nkv_dtype = "fp16,fp8"\nheadroom = 0.2\n',
}
YAML_SPEC = "perf:\n  run:\n    model: add_sub\n    sla: p99<=50ms\n    concurrency: [1, 2]\n    duration_s: 1.5\n"
VALUES = ["[1, [2]]", "{ a = 1 }", "true", "1e400", "nan", "-inf", "99999999999999999999", "1979-05-27T07:32:00Z",
          '"\\u0000"', '"\\u0007x"', '""', '"   "', "-1", "0", '"p99<=>5"', '"é"', "[]", '"' + "x" * 5000 + '"']


@st.composite
def mutants(draw: st.DrawFn) -> tuple[str, str, bytes]:
    """A command, the suffix of its spec file, and the file's mutated bytes."""
    command = draw(st.sampled_from([*SPECS, "perf run (yaml)", "perf run (several)"]))
    several = SPECS["perf run"] + SPECS["perf sweep"] + SPECS["perf compare"] + "[plan]\n" + SPECS["plan"]
    text = {"perf run (yaml)": YAML_SPEC, "perf run (several)": several}.get(command) or SPECS[command]
    suffix = ".yaml" if "yaml" in command else ".toml"
    data = text.encode()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "duplicate", "key", "value", "nest"]))
        lines = data.split(b"\n")
        at = draw(st.integers(0, max(0, len(lines) - 1)))
        if kind == "flip" and data:
            spot = draw(st.integers(0, len(data) - 1))
            data = data[:spot] + bytes([data[spot] ^ draw(st.integers(1, 255))]) + data[spot + 1:]
        elif kind == "truncate":
            data = data[: draw(st.integers(0, len(data)))]
        elif kind == "duplicate":
            data = b"\n".join([*lines[: at + 1], lines[at], *lines[at + 1:]])
        elif kind == "key":
            lines[at] = re.sub(rb"^(\s*)(\w+)", lambda m: m.group(1) + m.group(2)[::-1] + b"x", lines[at])
            data = b"\n".join(lines)
        elif kind == "value":
            separator = rb":\s*" if suffix == ".yaml" else rb"=\s*"
            lines[at] = re.sub(rb"(" + separator + rb").*$", lambda m: m.group(1) + draw(st.sampled_from(VALUES)).encode(),
                               lines[at])
            data = b"\n".join(lines)
        else:
            depth = draw(st.integers(1, 3000))
            data += (b"\nx: " if suffix == ".yaml" else b"\nx = ") + b"[" * depth + b"]" * depth + b"\n"
    return command.split(" (")[0], suffix, data


@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=mutants())
def test_a_mutated_spec_file_is_read_or_refused_naming_the_file_never_a_traceback(
        tmp_path_factory: object, case: tuple[str, str, bytes]) -> None:
    command, suffix, data = case
    folder = Path(tmp_path_factory.mktemp("spec"))  # type: ignore[attr-defined]
    for name in ("repo", "base", "new"):
        (folder / name).mkdir()
    spec = folder / f"ci{suffix}"
    spec.write_bytes(data)
    here = os.getcwd()
    os.chdir(folder)  # the spec's relative paths (repo, base, new) are the fuzz's own folders
    try:
        result = CliRunner().invoke(main, [*command.split(), "--config", str(spec), "--print-config"])
        where = f"{command} --config of:\n{data[:600]!r}\n{result.output}"
        assert result.exception is None or isinstance(result.exception, SystemExit), f"{where}\n{result.exception!r}"
        assert "Traceback" not in result.output, where
        assert result.exit_code in (0, 2), where
        assert sorted(p.name for p in folder.iterdir()) == sorted(["repo", "base", "new", spec.name]), where
        if result.exit_code == 2:
            error, fix = result.output.splitlines()[:2]
            named = error.startswith(f"error: spec file {spec}") or error.startswith("error: Missing argument")
            assert named and fix.startswith("  fix: "), where  # a key it lacks: click's own "Missing argument"
            return
        again = folder / "again.toml"
        again.write_text(result.output)  # what --print-config wrote is a spec that reads back the same
        reread = CliRunner().invoke(main, [*command.split(), "--config", str(again), "--print-config"])
        assert (reread.exit_code, reread.output) == (0, result.output), f"{where}\nread back:\n{reread.output}"
    finally:
        os.chdir(here)
