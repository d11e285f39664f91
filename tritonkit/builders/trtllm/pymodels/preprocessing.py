# mypy: ignore-errors
"""``preprocessing``: text → token ids with the model's own tokenizer (``tokenizer.json``).

Inputs and outputs follow TensorRT-LLM's in-flight-batching templates, so the ensemble and
the BLS model wire it exactly as they wire TensorRT-LLM's own. ``tokenizer_dir`` holds
``tokenizer.json`` and ``tokenizer_config.json`` (a Hugging Face model folder does).
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer


def _param(config, key, default=""):
    value = config.get("parameters", {}).get(key, {}).get("string_value", "")
    return value if value != "" else default


def _special(tokenizer, settings, key):
    token = settings.get(key)
    if isinstance(token, dict):  # {"content": "</s>", ...} in some tokenizer_config.json files
        token = token.get("content")
    return tokenizer.token_to_id(token) if isinstance(token, str) else None


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        folder = _param(config, "tokenizer_dir")
        self.tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        settings_path = os.path.join(folder, "tokenizer_config.json")
        settings = {}
        if os.path.exists(settings_path):
            with open(settings_path, encoding="utf-8") as f:
                settings = json.load(f)
        self.add_special_tokens = _param(config, "add_special_tokens", "false").lower() == "true"
        self.end_id = _special(self.tokenizer, settings, "eos_token")
        pad = _special(self.tokenizer, settings, "pad_token")
        self.pad_id = pad if pad is not None else self.end_id
        if self.end_id is None:
            self.end_id = -1

    def _words(self, request, name):
        # [1, 2, N]: flat token ids, then offsets (exclusive ends) padded with -1, as TensorRT-LLM expects.
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        words = [] if tensor is None else [w.decode() if isinstance(w, bytes) else str(w)
                                           for w in tensor.as_numpy().reshape(-1)]
        ids, offsets = [], []
        for word in words:
            ids.extend(self.tokenizer.encode(word, add_special_tokens=False).ids)
            offsets.append(len(ids))
        width = max(1, len(ids))
        flat = np.zeros((1, 2, width), dtype=np.int32)
        flat[0, 1, :] = -1
        flat[0, 0, : len(ids)] = ids
        flat[0, 1, : len(offsets)] = offsets
        return flat

    def execute(self, requests):
        responses = []
        for request in requests:
            query = pb_utils.get_input_tensor_by_name(request, "QUERY").as_numpy().reshape(-1)[0]
            text = query.decode("utf-8") if isinstance(query, bytes) else str(query)
            ids = self.tokenizer.encode(text, add_special_tokens=self.add_special_tokens).ids
            out_len = pb_utils.get_input_tensor_by_name(request, "REQUEST_OUTPUT_LEN").as_numpy().reshape(1, 1)
            end_t = pb_utils.get_input_tensor_by_name(request, "END_ID")
            pad_t = pb_utils.get_input_tensor_by_name(request, "PAD_ID")
            end_id = int(end_t.as_numpy().reshape(-1)[0]) if end_t is not None else self.end_id
            pad_id = int(pad_t.as_numpy().reshape(-1)[0]) if pad_t is not None else self.pad_id
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("INPUT_ID", np.asarray([ids], dtype=np.int32)),
                pb_utils.Tensor("REQUEST_INPUT_LEN", np.asarray([[len(ids)]], dtype=np.int32)),
                pb_utils.Tensor("REQUEST_OUTPUT_LEN", out_len.astype(np.int32)),
                pb_utils.Tensor("BAD_WORDS_IDS", self._words(request, "BAD_WORDS_DICT")),
                pb_utils.Tensor("STOP_WORDS_IDS", self._words(request, "STOP_WORDS_DICT")),
                pb_utils.Tensor("OUT_END_ID", np.asarray([[end_id]], dtype=np.int32)),
                pb_utils.Tensor("OUT_PAD_ID", np.asarray([[pad_id]], dtype=np.int32)),
            ]))
        return responses
