"""What a piece of cluster work needs of a node, and folders sent between nodes (pure)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ClusterError, ConfigError
from tritonkit.perf.cluster.nodes import NodeInfo, NodeResources, parse_node_resources
from tritonkit.perf.cluster.sweep import resources_for
from tritonkit.perf.cluster.transfer import pack_contents, pack_folders, unpack


def test_node_resources_parse_with_a_cpu_by_default_and_refuse_what_is_not_name_equals_amount() -> None:
    assert parse_node_resources("GPU=1").amounts == {"GPU": 1.0, "CPU": 1.0}
    assert parse_node_resources("CPU=2, GPU=0.5,accelerator_type:H100=1").ray_options() == {
        "num_cpus": 2.0, "num_gpus": 0.5, "resources": {"accelerator_type:H100": 1.0}}
    for bad in ("GPU", "GPU=x", "=1", "GPU=-1", "GPU=nan"):
        with pytest.raises(ConfigError, match="--node-resources"):
            parse_node_resources(bad)


def test_a_node_fits_when_it_has_at_least_every_resource_asked() -> None:
    need = NodeResources({"CPU": 1.0, "GPU": 1.0})
    assert need.fits({"CPU": 8.0, "GPU": 1.0, "memory": 1e9})
    assert not need.fits({"CPU": 8.0})
    assert need.union(NodeResources({"CPU": 2.0})).amounts == {"CPU": 2.0, "GPU": 1.0}
    assert hash(need) == hash(NodeResources({"GPU": 1.0, "CPU": 1.0})) and need == NodeResources({"CPU": 1.0, "GPU": 1.0})


def _config(*groups: tuple[int, list[int]]) -> mc.ModelConfig:
    config = mc.ModelConfig(name="m")
    for kind, gpus in groups:
        config.instance_group.add(kind=kind, count=1, gpus=gpus)
    return config


def test_a_models_needs_follow_its_instance_kinds() -> None:
    cpu, gpu, auto = mc.ModelInstanceGroup.KIND_CPU, mc.ModelInstanceGroup.KIND_GPU, mc.ModelInstanceGroup.KIND_AUTO
    assert resources_for(_config((cpu, []))).amounts == {"CPU": 1.0}
    assert resources_for(_config((auto, []))).amounts == {"CPU": 1.0}  # runs anywhere
    assert resources_for(_config((gpu, []))).amounts == {"CPU": 1.0, "GPU": 1.0}
    assert resources_for(_config((gpu, [0]), (gpu, [1]))).amounts == {"CPU": 1.0, "GPU": 2.0}


def test_a_node_is_named_by_its_id_address_and_host_and_its_hardware_in_words() -> None:
    node = NodeInfo.from_dict({"node_id": "3f2a1b4c" + "0" * 48, "address": "10.0.0.7", "host": "gpu-7",
                               "cpu_cores": 64, "cpu_model": "Xeon", "gpus": ["NVIDIA H100", "NVIDIA H100"]})
    assert node.name() == "3f2a1b4c (10.0.0.7, gpu-7)"
    assert node.hardware() == "64 CPU cores (Xeon), 2 GPU (NVIDIA H100)"
    assert NodeInfo.from_dict(node.to_dict()) == node


def test_folders_travel_whole_and_without_their_locks(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "a" / "1").mkdir(parents=True)
    (repo / "a" / "config.pbtxt").write_text('name: "a"')
    (repo / "a" / "1" / "model.py").write_text("pass")
    (repo / "a" / ".tritonkit.lock").write_text("{}")
    (repo / "b").mkdir()
    target = unpack(pack_folders(repo, ["a", "missing"]), tmp_path / "copy")
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*")) == ["a", "a/1", "a/1/model.py",
                                                                            "a/config.pbtxt"]
    again = unpack(pack_contents(target / "a"), tmp_path / "again")
    assert (again / "config.pbtxt").read_text() == 'name: "a"'


def test_a_member_that_would_land_outside_the_folder_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = b"x"
        info = tarfile.TarInfo("../escape.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(ClusterError, match=r"refusing to unpack \.\./escape\.txt, link"):
        unpack(buffer.getvalue(), tmp_path / "target")
    assert not (tmp_path / "escape.txt").exists()
