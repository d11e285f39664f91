# mypy: ignore-errors
"""``postprocessing``: token ids → text with the model's own tokenizer (``tokenizer.json``).

``TOKENS_BATCH`` is ``[batch, beams, tokens]`` and ``SEQUENCE_LENGTH`` ``[batch, beams]``, as the
``tensorrt_llm`` model returns them; ``OUTPUT`` is ``[batch, beams]`` strings.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer


def _param(config, key, default=""):
    value = config.get("parameters", {}).get(key, {}).get("string_value", "")
    return value if value != "" else default


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        folder = _param(config, "tokenizer_dir")
        self.tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        self.skip_special_tokens = _param(config, "skip_special_tokens", "true").lower() == "true"

    def execute(self, requests):
        responses = []
        for request in requests:
            tokens = pb_utils.get_input_tensor_by_name(request, "TOKENS_BATCH").as_numpy()
            lengths = pb_utils.get_input_tensor_by_name(request, "SEQUENCE_LENGTH").as_numpy()
            tokens = tokens.reshape(tokens.shape[0], -1, tokens.shape[-1])
            lengths = lengths.reshape(tokens.shape[0], -1)
            texts = [[self.tokenizer.decode([int(t) for t in beam[: int(n)]],
                                            skip_special_tokens=self.skip_special_tokens).encode("utf-8")
                      for beam, n in zip(batch, lens, strict=False)]
                     for batch, lens in zip(tokens, lengths, strict=False)]
            out = np.asarray(texts, dtype=np.object_)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", out)]))
        return responses
