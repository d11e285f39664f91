"""Triton python-backend model that serves an ONNX model with ONNX Runtime.

Copied verbatim as ``model.py`` into a version folder by ``tritonkit build onnx --runtime python``
(see :mod:`tritonkit.builders.python_runtime`); it is never imported by tritonkit itself.
It is for servers without Triton's onnxruntime backend (such as the one bundled in
nvidia-pytriton). Everything it needs comes from ``config.pbtxt``:

- ``parameters { key: "onnx_model_file" }``: the ONNX file in the version folder (default ``model.onnx``);
- ``parameters { key: "intra_op_num_threads" }``: ONNX Runtime threads per instance (default: its own);
- ``max_batch_size``: when > 0, the requests of one dynamic batch are concatenated along the
  first axis, run as one ONNX Runtime call and split back, so batching saves real work.

A ``KIND_GPU`` instance runs on the CUDA execution provider when onnxruntime-gpu provides one,
on the instance's own device; otherwise, and for ``KIND_CPU``, on the CPU provider.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]


def _decode(value: Any) -> Any:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _encode(value: Any) -> Any:
    return value.encode("utf-8") if isinstance(value, str) else value


class TritonPythonModel:
    """One instance: one ONNX Runtime session."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params = {key: value.get("string_value", "") for key, value in config.get("parameters", {}).items()}
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        path = os.path.join(version_dir, params.get("onnx_model_file") or "model.onnx")
        self.max_batch_size = int(config.get("max_batch_size", 0))

        options = ort.SessionOptions()
        threads = int(params.get("intra_op_num_threads") or 0)
        if threads > 0:
            options.intra_op_num_threads = threads
        providers: list[Any] = ["CPUExecutionProvider"]
        if args.get("model_instance_kind") == "GPU" and "CUDAExecutionProvider" in ort.get_available_providers():
            device_id = int(args.get("model_instance_device_id") or 0)
            providers.insert(0, ("CUDAExecutionProvider", {"device_id": device_id}))
        self.session = ort.InferenceSession(path, sess_options=options, providers=providers)
        self.providers = self.session.get_providers()

        self.input_names = [tensor["name"] for tensor in config["input"]]
        self.output_names = [tensor["name"] for tensor in config["output"]]
        self.string_inputs = {t["name"] for t in config["input"] if t["data_type"] == "TYPE_STRING"}
        self.string_outputs = {t["name"] for t in config["output"] if t["data_type"] == "TYPE_STRING"}

    def _feeds(self, request: Any) -> dict[str, np.ndarray]:
        feeds: dict[str, np.ndarray] = {}
        for name in self.input_names:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is None:
                raise ValueError(f"input '{name}' is missing")
            array = tensor.as_numpy()
            if name in self.string_inputs:
                array = np.vectorize(_decode, otypes=[object])(array)
            feeds[name] = array
        return feeds

    def _run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(out) for out in self.session.run(self.output_names, feeds)]

    def _response(self, outputs: list[np.ndarray]) -> Any:
        tensors = []
        for name, array in zip(self.output_names, outputs, strict=True):
            if name in self.string_outputs:
                array = np.vectorize(_encode, otypes=[object])(array)
            tensors.append(pb_utils.Tensor(name, np.ascontiguousarray(array)))
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def execute(self, requests: list[Any]) -> list[Any]:
        responses: list[Any] = [None] * len(requests)
        parsed: list[tuple[int, dict[str, np.ndarray]]] = []
        for index, request in enumerate(requests):
            try:
                parsed.append((index, self._feeds(request)))
            except Exception as exc:  # noqa: BLE001 - answer this request with the error, keep the others
                responses[index] = pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc)))

        if self.max_batch_size > 0:
            # Requests whose inputs agree on everything but the first axis run as one call.
            groups: dict[tuple[Any, ...], list[tuple[int, dict[str, np.ndarray]]]] = {}
            for index, feeds in parsed:
                key = tuple((name, feeds[name].shape[1:], feeds[name].dtype.str) for name in self.input_names)
                groups.setdefault(key, []).append((index, feeds))
            work = list(groups.values())
        else:
            work = [[item] for item in parsed]

        for group in work:
            try:
                if len(group) == 1:
                    outputs_per_request = [self._run(group[0][1])]
                else:
                    sizes = [feeds[self.input_names[0]].shape[0] for _, feeds in group]
                    merged = {name: np.concatenate([feeds[name] for _, feeds in group], axis=0)
                              for name in self.input_names}
                    outputs = self._run(merged)
                    bounds = np.cumsum(sizes)[:-1]
                    split = [np.split(out, bounds, axis=0) for out in outputs]
                    outputs_per_request = [[parts[i] for parts in split] for i in range(len(group))]
                for (index, _), outputs in zip(group, outputs_per_request, strict=True):
                    responses[index] = self._response(outputs)
            except Exception as exc:  # noqa: BLE001 - ONNX Runtime errors go back to the callers
                for index, _ in group:
                    responses[index] = pb_utils.InferenceResponse(
                        error=pb_utils.TritonError(f"ONNX Runtime failed: {exc}"))
        return responses

    def finalize(self) -> None:
        self.session = None
