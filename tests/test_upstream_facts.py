"""``scripts/upstream-facts``: the maintainer's script that regenerates the release facts from local
upstream clones, run here on small git repositories made in the test (the layout and file formats
of triton-inference-server/server and core at their release branches: ``TRITON_VERSION``, both
shapes of ``build.py``'s version map, ``src/command_line_parser.cc``'s option table,
``src/backend_model.cc`` and ``src/filesystem/api.cc``), so the script cannot rot unnoticed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT
from tritonkit.triton_releases import CONFIG_FIELDS, ONNXRUNTIME_VERSIONS, PLATFORMS, SERVER_FLAGS, release

SCRIPT = ROOT / "scripts" / "upstream-facts"
_GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=_GIT_ENV)


def _branch(repo: Path, name: str, files: dict[str, str]) -> None:
    """Commit ``files`` as the whole tree of a new branch ``name`` (an orphan, like a release branch's tip)."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True)
        _git(repo, "init", "-q")
    _git(repo, "checkout", "-q", "--orphan", f"next-{name}")
    _git(repo, "rm", "-rfq", "--ignore-unmatch", ".")
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", name)
    _git(repo, "branch", "-M", name)  # replaces a branch of that name: a release branch moved on


def _parser(flags: list[str]) -> str:
    """An option table in command_line_parser.cc's shape; every other entry has its name on a line of its own,
    as upstream writes some."""
    rows = [f'      {{OPTION_{n.upper().replace("-", "_")},{" " if i % 2 else chr(10) + "       "}"{n}", '
            'Option::ArgStr, "help"},' for i, n in enumerate(flags)]
    return "std::vector<Option> options_{\n" + "\n".join(rows) + "\n};\n"


def _flags_of(line: str) -> list[str]:
    return sorted(n for n, f in SERVER_FLAGS.items() if f.since <= release(line))


def _server_branch(repo: Path, tag: str, version: str, ort: str, *, old_map: bool = False,
                   flags: list[str] | None = None) -> None:
    if old_map:  # r24.10's TRITON_VERSION_MAP: version -> (container, upstream, ORT, ...)
        build = f'TRITON_VERSION_MAP = {{\n    "{version}": (\n        "{tag}",  # triton container\n' \
                f'        "{tag}",  # upstream container\n        "{ort}",  # ORT\n        "2024.4.0",\n    )\n}}\n'
    else:  # DEFAULT_TRITON_VERSION_MAP from r24.11 on
        build = f'DEFAULT_TRITON_VERSION_MAP = {{\n    "release_version": "{version}",\n    "ort_version": "{ort}",\n}}\n'
    line = ".".join(version.split(".")[:2])
    _branch(repo, f"r{tag}", {"TRITON_VERSION": version + "\n", "build.py": build,
                              "src/command_line_parser.cc": _parser(flags if flags is not None else _flags_of(line))})


def _proto(paths: list[str]) -> str:
    """A model_config.proto holding the fields ``Message.Nested.field``, its braces on their own lines
    as upstream writes them, a oneof and an enum among them."""
    tree: dict[str, dict] = {}  # type: ignore[type-arg]
    for path in paths:
        node = tree
        for part in path.split(".")[:-1]:
            node = node.setdefault(part, {})
        node.setdefault("", []).append(path.split(".")[-1])

    def render(name: str, node: dict, depth: int) -> list[str]:  # type: ignore[type-arg]
        pad = "  " * depth
        rows = [f"{pad}//@@  .. cpp:var:: message {name}", f"{pad}message {name}", f"{pad}{{",
                f"{pad}  enum Kind {{ KIND_A = 0; KIND_B = 1; }}"]
        fields = node.get("", [])
        for number, field_name in enumerate(fields[:1], start=1):
            rows += [f"{pad}  oneof choice", f"{pad}  {{", f"{pad}    int64 {field_name} = {number};", f"{pad}  }}"]
        rows += [f"{pad}  repeated string {field_name} = {n};" for n, field_name in enumerate(fields[1:], start=2)]
        for child, sub in node.items():
            if child:
                rows += render(child, sub, depth + 1)
        return [*rows, f"{pad}}}"]

    return "\n".join(row for name, node in tree.items() for row in render(name, node, 0)) + "\n"


_BASE_FIELDS = ["ModelConfig.name", "ModelConfig.max_batch_size", "ModelInput.dims"]
_FIELDS_2_52 = sorted(k for k, f in CONFIG_FIELDS.items() if str(f.since) == "2.52")


def _constants(line: str) -> str:
    return "".join(f'constexpr char k{i}Platform[] = "{p.name}";\n' for i, p in enumerate(PLATFORMS.values())
                   if p.since <= release(line))


def _run(clones: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(clones), *args], capture_output=True, text=True,
                          timeout=120, check=False)


def _matching_clones(clones: Path) -> None:
    server = clones / "server"
    _server_branch(server, "24.10", "2.51.0", ONNXRUNTIME_VERSIONS["2.51"], old_map=True)
    _server_branch(server, "24.11", "2.52.0", ONNXRUNTIME_VERSIONS["2.52"])
    # A branch older than every line tritonkit knows is left out, as upstream's r18.xx are.
    _branch(server, "r18.11", {"README": "no TRITON_VERSION here\n"})
    core = clones / "core"
    escape = 'return Status(INVALID_ARG, "backend library name escapes backend directory");\n'
    for tag, line in (("24.10", "2.51"), ("24.11", "2.52")):
        _branch(core, f"r{tag}", {"src/backend_model.cc": escape, "src/filesystem/api.cc": "rfind(parent, 0)\n",
                                  "src/constants.h": _constants(line)})
    common = clones / "common"
    _branch(common, "r24.10", {"protobuf/model_config.proto": _proto(_BASE_FIELDS)})
    _branch(common, "r24.11", {"protobuf/model_config.proto": _proto(_BASE_FIELDS + _FIELDS_2_52)})


def test_clones_that_agree_with_the_package_show_no_difference(tmp_path: Path) -> None:
    _matching_clones(tmp_path)
    done = _run(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "read: 2.51 (r24.10), 2.52 (r24.11)" in done.stdout
    assert "no difference from the package's facts" in done.stdout and "r18.11" not in done.stdout


def test_a_changed_fact_a_new_flag_and_a_new_line_are_shown_as_a_diff_and_things_to_do(tmp_path: Path) -> None:
    _matching_clones(tmp_path)
    server = tmp_path / "server"
    _server_branch(server, "24.11", "2.52.0", "9.9.9", flags=[*_flags_of("2.52"), "brand-new-flag"])
    _server_branch(server, "30.01", "3.1.0", "9.9.9")
    _branch(tmp_path / "common", "r24.11",
            {"protobuf/model_config.proto": _proto([*_BASE_FIELDS, *_FIELDS_2_52, "ModelConfig.brand_new"])})
    done = _run(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "--- tritonkit (package)" in done.stdout and "+++ upstream (clones)" in done.stdout
    assert f"-line 2.52: onnxruntime {ONNXRUNTIME_VERSIONS['2.52']}" in done.stdout
    assert "+line 2.52: onnxruntime 9.9.9" in done.stdout and "+flag brand-new-flag: since 2.52" in done.stdout
    assert "to do: new release line 3.1 (NGC 30.01): not in the package" in done.stdout
    assert "+field ModelConfig.brand_new: since 2.52" in done.stdout
    data = json.loads(_run(tmp_path, "--json").stdout)
    assert data["onnxruntime"]["2.52"] == "9.9.9" and data["flags"]["brand-new-flag"] == "2.52"
    assert data["core"] == {"runtime_library_inside_folder": "2.51"}
    assert data["fields"]["ModelMetrics.MetricControl.MetricIdentifier.family"] == "2.52"
    assert data["fields"]["ModelConfig.name"] == "2.51" and "Kind" not in str(data["fields"])
    assert data["platforms"]["onnxruntime_onnx"] == "2.51"


def test_a_carried_over_line_whose_branch_appears_is_named_with_its_own_facts(tmp_path: Path) -> None:
    server = tmp_path / "server"
    _server_branch(server, "26.08", "2.72.0", ONNXRUNTIME_VERSIONS["2.72"])
    _server_branch(server, "26.09", "2.73.0", "1.29.0")
    done = _run(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"-line 2.73: onnxruntime {ONNXRUNTIME_VERSIONS['2.73']} (carried over from 2.72)" in done.stdout
    assert "+line 2.73: onnxruntime 1.29.0" in done.stdout
    assert "to do: 2.73 is carried over from 2.72 in the package; the clones now hold r26.09" in done.stdout


def test_a_folder_without_a_server_clone_is_refused_with_how_to_make_one(tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "error:" in done.stderr and "no clone of triton-inference-server/server" in done.stderr
    assert "git clone --bare" in done.stderr



def test_the_tensorrt_llm_release_the_backend_container_builds_is_held_to_the_newest_released_line(tmp_path: Path) -> None:
    """tensorrtllm_backend's default branch names the TensorRT-LLM release its container builds (8addf2f on:
    1.2.1); the matrix's newest released line must be that release, or the script says so."""
    _matching_clones(tmp_path)
    backend = tmp_path / "tensorrtllm_backend"

    def dockerfile(version: str) -> dict[str, str]:
        return {"dockerfile/Dockerfile.triton.trt_llm_backend":
                f"ARG TENSORRTLLM_REPO_TAG=release/{version}\nARG TENSORRTLLM_VER={version}\n"}

    _branch(backend, "main", dockerfile("1.2.1"))
    _git(backend, "symbolic-ref", "HEAD", "refs/heads/main")
    agrees = _run(tmp_path)
    assert agrees.returncode == 0, agrees.stdout + agrees.stderr
    _branch(backend, "main", dockerfile("1.3.0"))
    moved = _run(tmp_path)
    assert moved.returncode == 1
    assert "-trtllm container build: 1.2.1 (line 1.2)" in moved.stdout
    assert "+trtllm container build: 1.3.0 (line main)" in moved.stdout
