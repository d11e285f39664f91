"""The Triton release facts: complete, each traceable to an upstream file and branch, and true of
the bundled 2.51 where this machine can check it (its flags, its version, its refusals)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ConfigError, ModelLoadError, UnsupportedByReleaseError
from tritonkit.onnxruntime_versions import onnxruntime_for_release
from tritonkit.provision.server import locate_server
from tritonkit.repository import ModelRepository, ModelSpec, TensorSpec
from tritonkit.server import TritonServer
from tritonkit.triton_releases import (
    BEHAVIOURS,
    BUNDLED_LINE,
    CARRIED_OVER,
    CLIENT_SHM,
    CLIENT_SHM_FLAG,
    CONFIG_FIELDS,
    KNOWN_LINES,
    NEWEST_LINE,
    ONNXRUNTIME_VERSIONS,
    PLATFORM_ALIASES,
    PLATFORMS,
    PYTHON_BACKEND_CONFIG,
    SERVER_FLAGS,
    VALIDATIONS,
    ReleaseFact,
    check_backend_config,
    check_config_for_release,
    check_server_flags,
    client_shm_refused_by,
    is_client_shm_refusal,
    release,
    release_of_image,
    release_of_version,
    resolve_release,
)

ALL_FACTS: list[ReleaseFact] = [*CONFIG_FIELDS.values(), *VALIDATIONS.values(), *BEHAVIOURS.values(),
                                *SERVER_FLAGS.values(), CLIENT_SHM, PYTHON_BACKEND_CONFIG,
                                *(fact for _, fact in PLATFORM_ALIASES.values())]
BRANCHES = {f"r{tag}" for line in KNOWN_LINES for tag in release(line).ngc_tags}


def test_the_lines_run_from_2_51_to_2_73_without_a_gap() -> None:
    assert KNOWN_LINES[0] == BUNDLED_LINE == "2.51" and NEWEST_LINE == "2.73"
    assert [release(line).minor for line in KNOWN_LINES] == list(range(51, 74))
    assert release("2.59").ngc_tags == ("25.06", "25.07") and release("2.72").branch == "r26.08"
    assert release("2.73").ngc_tags == ("26.09",) and release("2.73").branch == "r26.09"
    assert set(ONNXRUNTIME_VERSIONS) == set(KNOWN_LINES)


def test_2_73_says_its_facts_are_carried_over_from_2_72_and_why() -> None:
    newest = release(NEWEST_LINE)
    assert set(CARRIED_OVER) == {"2.73"}
    assert str(newest.facts_line) == "2.72" and newest.read_at == "r26.08"
    assert newest.carried_over == "carried over from 2.72: r26.09 not read"
    assert CARRIED_OVER["2.73"][1].startswith("no r26.09 branch in the upstream snapshots")
    assert ONNXRUNTIME_VERSIONS["2.73"] == ONNXRUNTIME_VERSIONS["2.72"]
    assert onnxruntime_for_release("2.73").source.endswith("build.py @ r26.08 (carried over from 2.72: r26.09 not read)")
    # Lines read at their own branch say nothing of the kind.
    assert release("2.72").read_at == "r26.08" and not release("2.72").carried_over
    assert onnxruntime_for_release("26.08").source.endswith("build.py @ r26.08")


def test_every_fact_names_an_upstream_file_and_a_release_branch() -> None:
    for fact in [*ALL_FACTS]:
        assert fact.source.repo in ("core", "common", "server", "tensorrt_backend", "python_backend"), fact
        assert fact.source.tag in BRANCHES and fact.source.path, fact
        assert str(fact.since) in KNOWN_LINES, fact
        # A fact read at a branch is about that branch's release or an older one.
        assert release_of_version(fact.source.tag) >= fact.since, fact
    for platform in PLATFORMS.values():
        assert platform.source.tag in BRANCHES and str(platform.since) in KNOWN_LINES


def test_every_config_field_fact_names_a_field_of_the_schema_tritonkit_compiles_against() -> None:
    for subject in CONFIG_FIELDS:
        message, _, name = subject.rpartition(".")
        descriptor = mc.DESCRIPTOR.message_types_by_name[message.split(".")[0]]
        for nested in message.split(".")[1:]:
            descriptor = descriptor.nested_types_by_name[nested]
        assert name in descriptor.fields_by_name, subject


def test_a_release_is_read_from_a_version_a_tag_or_a_branch_and_nothing_else() -> None:
    assert str(release_of_version("2.68.0")) == "2.68" and str(release_of_version("26.04")) == "2.68"
    assert str(release_of_version("r24.10")) == "2.51"
    assert str(release_of_version("2.73.0")) == "2.73" and str(release_of_version(" v2.60.1 ")) == "2.60"
    for bad in ("2.50", "2.74", "3.0", "24.09"):
        with pytest.raises(ConfigError, match="not a Triton release tritonkit knows"):
            release_of_version(bad)


@pytest.mark.parametrize("text", ["2.60.0.1", "2.60.x", "2.60-rc1", "latest", "2.60.0dev", "r2.60", "2 .60", ""])
def test_a_stated_release_is_read_exactly_or_refused_saying_how_to_write_it(text: str) -> None:
    with pytest.raises(ConfigError, match=r"is not a Triton release: write MAJOR\.MINOR \(2\.60\)") as caught:
        release_of_version(text)
    assert "2.73 (NGC 26.09)" in (caught.value.hint or "")


@pytest.mark.parametrize("text", ["２.６０", "2.6０", "٢.٦٠", "2.60\u00a0", "2.\u200b60"])
def test_digits_of_other_scripts_are_refused_not_read_as_the_ascii_release(text: str) -> None:
    with pytest.raises(ConfigError, match="non-ASCII") as caught:
        release_of_version(text)
    assert f"U+{ord(next(c for c in text if not c.isascii())):04X}" in caught.value.message
    if any(c.isdigit() and not c.isascii() for c in text):
        assert "e.g. 2.60" in (caught.value.hint or "")


def test_a_reported_version_with_a_suffix_names_its_line() -> None:
    assert str(resolve_release(reported="2.73.0dev").release) == "2.73"
    assert str(resolve_release(reported="2.51.0").release) == "2.51"
    with pytest.raises(ConfigError):
        resolve_release(reported="２.５１.０")


def test_a_server_newer_than_the_newest_line_is_checked_as_it_with_a_note() -> None:
    choice = resolve_release(reported="2.75.0")
    assert str(choice.release) == NEWEST_LINE and "newer than 2.73" in choice.note
    assert str(resolve_release().release) == NEWEST_LINE and not resolve_release().note
    assert str(resolve_release("2.60", reported="2.51.0").release) == "2.60"  # a stated release wins
    with pytest.raises(ConfigError):
        resolve_release(reported="2.40.0")


def test_an_ngc_image_tag_names_its_release() -> None:
    assert str(release_of_image("nvcr.io/nvidia/tritonserver:24.10-py3")) == "2.51"
    assert str(release_of_image("nvcr.io/nvidia/tritonserver:26.05-trtllm-python-py3")) == "2.69"
    assert release_of_image("nvcr.io/nvidia/tritonserver@sha256:" + "0" * 64) is None
    assert release_of_image("registry.example.com/other:24.10") is None


def test_a_config_writing_a_newer_field_is_refused_for_an_older_release_naming_the_first() -> None:
    config = mc.ModelConfig(name="m")
    config.model_metrics.metric_control.add().metric_identifier.family = "nv_inference_first_response_histogram_ms"
    with pytest.raises(UnsupportedByReleaseError, match=r"model_metrics .*new in Triton 2\.52") as caught:
        check_config_for_release(config, release("2.51"), model="m")
    assert caught.value.first_release == "2.52" and caught.value.release == "2.51"
    check_config_for_release(config, release("2.52"), model="m")


def test_server_flags_are_checked_against_the_release() -> None:
    check_server_flags(["--grpc-port=8001", "--allow-client-shm=true"], release("2.68"))
    with pytest.raises(UnsupportedByReleaseError, match=r"--allow-client-shm is new in Triton 2\.68") as caught:
        check_server_flags(["--allow-client-shm=true"], release("2.67"))
    assert caught.value.first_release == "2.68"
    with pytest.raises(UnsupportedByReleaseError, match="--grpc-infer-thread-count is new in Triton 2.57"):
        check_server_flags(["--grpc-infer-thread-count", "4"], release("2.56"))
    with pytest.raises(UnsupportedByReleaseError, match="not a tritonserver flag in any release"):
        check_server_flags(["--allow-client-shared-memory=true"], release(NEWEST_LINE))


def test_client_shared_memory_is_refused_from_2_68_unless_the_flag_allows_it() -> None:
    assert not client_shm_refused_by(release("2.67"))
    assert client_shm_refused_by(release("2.68")) and client_shm_refused_by(release(NEWEST_LINE))
    assert not client_shm_refused_by(release("2.68"), [CLIENT_SHM_FLAG])
    assert not client_shm_refused_by(release("2.68"), ["--allow-client-shm", "true"])
    assert client_shm_refused_by(release("2.68"), ["--allow-client-shm=true", "--allow-client-shm=false"])
    # The server's status and words (grpc_utils.cc UNSUPPORTED -> UNIMPLEMENTED; common.h at r26.04).
    said = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."
    assert is_client_shm_refusal("StatusCode.UNIMPLEMENTED", said)
    assert not is_client_shm_refusal("StatusCode.INVALID_ARGUMENT", said)
    assert not is_client_shm_refusal("StatusCode.UNIMPLEMENTED", "unable to open shared memory region")


def test_the_writer_refuses_what_its_target_release_cannot_read(tmp_path: Path) -> None:
    root = tmp_path
    extra = mc.ModelConfig()
    extra.model_metrics.metric_control.add().histogram_options.buckets.append(10.0)
    spec = ModelSpec(name="m", backend="python", max_batch_size=0, inputs=[TensorSpec(name="x", dtype="FP32", dims=[4])],
                     outputs=[TensorSpec(name="y", dtype="FP32", dims=[4])], extra=extra)
    old = ModelRepository.init(root / "old")
    old = ModelRepository(old.root, server_version="2.51")
    with pytest.raises(UnsupportedByReleaseError, match="Triton 2.51 cannot read"):
        old.add_model(spec, files={"model.py": ""})
    assert not (old.root / "m").exists(), "nothing half-written"
    new = ModelRepository(ModelRepository.init(root / "new").root, server_version="2.52")
    assert new.add_model(spec, files={"model.py": ""}).config_path.is_file()
    aoti = ModelSpec(name="a", platform="torch_aoti", max_batch_size=0, inputs=[TensorSpec(name="x", dtype="FP32", dims=[4])],
                     outputs=[TensorSpec(name="y", dtype="FP32", dims=[4])])
    with pytest.raises(UnsupportedByReleaseError, match=r"platform 'torch_aoti' is new in Triton 2\.67"):
        ModelRepository(root / "new", server_version="2.66").add_model(aoti, files={"model.pt2": b"pt2"})
    with pytest.raises(ConfigError):
        ModelRepository(root, server_version="9.9")


# ---- the bundled 2.51, live ----------------------------------------------------------------


@pytest.mark.server
def test_the_bundled_server_takes_exactly_the_flags_the_facts_give_2_51() -> None:
    install = locate_server()
    env = {"LD_LIBRARY_PATH": ":".join(str(d) for d in install.lib_dirs)}
    shown = subprocess.run([str(install.binary), "--help"], capture_output=True, text=True, env=env, timeout=60)
    # Option lines are indented with spaces ("  --name <type>"); descriptions with a tab.
    flags = {match.group(1) for line in (shown.stdout + shown.stderr).splitlines()
             if (match := re.match(r"^ +--([a-z0-9-]+)", line))}
    assert flags == {name for name, fact in SERVER_FLAGS.items() if fact.since <= release("2.51")}
    refused = subprocess.run([str(install.binary), CLIENT_SHM_FLAG], capture_output=True, text=True, env=env,
                             timeout=60)
    assert refused.returncode != 0 and "allow-client-shm" in refused.stdout + refused.stderr


@pytest.mark.server
def test_the_bundled_install_version_is_the_version_the_running_server_reports(tmp_path_factory: pytest.TempPathFactory) -> None:
    repo = tmp_path_factory.mktemp("empty_repo")
    install = locate_server()
    with TritonServer(repo) as server:
        assert install.version == BUNDLED_LINE and server.version().startswith(f"{install.version}.")


@pytest.mark.parametrize(("setting", "says"), [
    ("shm-default-byte-size=1048575", "is below 1048576"), ("shm-growth-byte-size=0", "is below 1"),
    ("thread-pool-size=0", "is below 1"), ("stub-timeout-seconds=-5", "is below 1"),
    ("stub-timeout-seconds=soon", "is not a number"), ("shm-region-prefix-name=", "is empty")])
def test_a_python_backend_setting_the_backend_refuses_is_refused_before_the_server_starts(setting: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        check_server_flags([f"--backend-config=python,{setting}"], release("2.51"))
    assert "no python model loads" in caught.value.message and caught.value.hint
    with pytest.raises(ConfigError):
        check_backend_config(["--backend-config", f"python,{setting}"])
    # What std::stol reads is taken: a leading number, then anything.
    check_backend_config(["--backend-config=python,shm-default-byte-size=1048576bytes",
                          "--backend-config=onnxruntime,thread-pool-size=0"])


@pytest.mark.server
def test_the_bundled_python_backend_refuses_what_check_backend_config_refuses(tmp_path: Path) -> None:
    """TritonServer refuses the setting before starting; set after that check (the test's only seam), the
    bundled 2.51 starts and every python model then fails to load with the backend's own words."""
    repo = tmp_path / "repo"
    spec = ModelSpec(name="echo", backend="python", max_batch_size=0, inputs=[TensorSpec(name="x", dtype="FP32", dims=[4])],
                     outputs=[TensorSpec(name="y", dtype="FP32", dims=[4])])
    ModelRepository.init(repo).add_model(spec, files={
        "model.py": "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"})
    bad = "--backend-config=python,shm-default-byte-size=1000"
    with pytest.raises(ConfigError, match="shm-default-byte-size=1000 is below 1048576"):
        TritonServer(repo, model_control="explicit", extra_args=[bad])
    server = TritonServer(repo, model_control="explicit")
    server.extra_args = [bad]
    with server, pytest.raises(ModelLoadError, match="shm-default-byte-size can't be smaller than 4 MiBs"):
        server.load_model("echo", timeout_s=60.0)
