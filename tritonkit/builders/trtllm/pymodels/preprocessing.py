# mypy: ignore-errors
"""``preprocessing``: text → token ids with the model's own tokenizer (``tokenizer.json``).

Inputs and outputs follow TensorRT-LLM's in-flight-batching templates, so the ensemble and
the BLS model wire it exactly as they wire TensorRT-LLM's own. ``tokenizer_dir`` holds
``tokenizer.json`` and ``tokenizer_config.json`` (a Hugging Face model folder does).

Behaviour kept from tensorrtllm_backend v0.19.0 ``preprocessing/1/model.py``:

* ``add_special_tokens`` defaults to true (unset or unreadable: true), so a model's BOS token is
  added the way its tokenizer adds it: the ``tokenizer.json`` post-processor, or, when
  ``tokenizer_config.json`` says ``add_bos_token``, exactly as that says (Hugging Face's fast
  Llama tokenizers rebuild their post-processor from it);
* a request may carry a batch of queries (``QUERY`` ``[batch, 1]``): ``INPUT_ID`` is
  ``[batch, longest]`` padded with the pad id, ``REQUEST_INPUT_LEN`` ``[batch, 1]``;
* a stop or bad word that tokenises to nothing is skipped; no words give ``[batch, 2, 0]``.

This package adds: ``MIN_LENGTH``/``MIN_TOKENS`` and ``RANDOM_SEED``/``SEED`` (the spellings of two
inputs renamed between TensorRT-LLM lines) come out as ``OUT_MIN_TOKENS`` / ``OUT_SEED`` when one
of them was given, and giving both spellings is refused.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer

_ALIASES = (("OUT_MIN_TOKENS", ("MIN_LENGTH", "min_length"), ("MIN_TOKENS", "min_tokens"), np.int32),
            ("OUT_SEED", ("RANDOM_SEED", "random_seed"), ("SEED", "seed"), np.uint64))


def _param(config, key, default=""):
    value = config.get("parameters", {}).get(key, {}).get("string_value", "")
    return value if value != "" else default


def _special(tokenizer, settings, key):
    token = settings.get(key)
    if isinstance(token, dict):  # {"content": "</s>", ...} in some tokenizer_config.json files
        token = token.get("content")
    return tokenizer.token_to_id(token) if isinstance(token, str) else None


def _texts(tensor):
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in tensor.as_numpy().reshape(-1)]


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
        # Upstream: anything but an explicit false is true.
        self.add_special_tokens = _param(config, "add_special_tokens", "true").lower() not in ("false", "0")
        add_bos = settings.get("add_bos_token")
        self.add_bos = add_bos if isinstance(add_bos, bool) else None
        self.bos_id = _special(self.tokenizer, settings, "bos_token")
        self.end_id = _special(self.tokenizer, settings, "eos_token")
        pad = _special(self.tokenizer, settings, "pad_token")
        self.pad_id = pad if pad is not None else self.end_id
        if self.end_id is None:
            self.end_id = -1
        if self.pad_id is None:
            self.pad_id = self.end_id

    def _encode(self, text):
        ids = self.tokenizer.encode(text, add_special_tokens=self.add_special_tokens).ids
        if self.add_special_tokens and self.add_bos is not None and self.bos_id is not None:
            has_bos = bool(ids) and ids[0] == self.bos_id
            if self.add_bos and not has_bos:
                ids = [self.bos_id, *ids]
            elif not self.add_bos and has_bos:
                ids = ids[1:]
        return ids

    def _words(self, request, name, batch):
        # [batch, 2, N]: flat token ids, then offsets (exclusive ends) padded with -1, as TensorRT-LLM expects.
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        if tensor is None:
            return np.empty([batch, 2, 0], dtype=np.int32)
        rows = tensor.as_numpy().reshape(batch, -1)
        flat, offsets = [], []
        for row in rows:
            ids, ends = [], []
            for word in row:
                word_ids = self.tokenizer.encode(word.decode() if isinstance(word, bytes) else str(word),
                                                 add_special_tokens=False).ids
                if not word_ids:  # upstream skips a word that tokenises to nothing ("" among the stop words)
                    continue
                ids.extend(word_ids)
                ends.append(len(ids))
            flat.append(ids)
            offsets.append(ends)
        width = max(1, max(len(ids) for ids in flat))
        out = np.zeros((batch, 2, width), dtype=np.int32)
        out[:, 1, :] = -1
        for i, (ids, ends) in enumerate(zip(flat, offsets, strict=True)):
            out[i, 0, : len(ids)] = ids
            out[i, 1, : len(ends)] = ends
        return out

    def _per_row(self, request, name, batch, default):
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        if tensor is None:
            return np.full((batch, 1), default, dtype=np.int32)
        return tensor.as_numpy().reshape(batch, 1).astype(np.int32)

    def _aliases(self, request, batch):
        tensors = []
        for out_name, (first, first_client), (second, second_client), dtype in _ALIASES:
            a = pb_utils.get_input_tensor_by_name(request, first)
            b = pb_utils.get_input_tensor_by_name(request, second)
            if a is not None and b is not None:
                raise ValueError(f"both {first_client} and {second_client} were given; they are two names of one "
                                 f"setting (renamed in TensorRT-LLM 1.0): send one of them")
            given = a if a is not None else b
            if given is not None:
                tensors.append(pb_utils.Tensor(out_name, given.as_numpy().reshape(batch, 1).astype(dtype)))
        return tensors

    def _one(self, request):
        queries = _texts(pb_utils.get_input_tensor_by_name(request, "QUERY"))
        batch = len(queries)
        encoded = [self._encode(q) for q in queries]
        width = max(1, max(len(ids) for ids in encoded))
        input_ids = np.full((batch, width), self.pad_id, dtype=np.int32)
        for i, ids in enumerate(encoded):
            input_ids[i, : len(ids)] = ids
        out_len = pb_utils.get_input_tensor_by_name(request, "REQUEST_OUTPUT_LEN").as_numpy()
        return pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("INPUT_ID", input_ids),
            pb_utils.Tensor("REQUEST_INPUT_LEN", np.asarray([[len(ids)] for ids in encoded], dtype=np.int32)),
            pb_utils.Tensor("REQUEST_OUTPUT_LEN", out_len.reshape(batch, 1).astype(np.int32)),
            pb_utils.Tensor("BAD_WORDS_IDS", self._words(request, "BAD_WORDS_DICT", batch)),
            pb_utils.Tensor("STOP_WORDS_IDS", self._words(request, "STOP_WORDS_DICT", batch)),
            pb_utils.Tensor("OUT_END_ID", self._per_row(request, "END_ID", batch, self.end_id)),
            pb_utils.Tensor("OUT_PAD_ID", self._per_row(request, "PAD_ID", batch, self.pad_id)),
            *self._aliases(request, batch),
        ])

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                responses.append(self._one(request))
            except ValueError as exc:
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(exc))))
        return responses
