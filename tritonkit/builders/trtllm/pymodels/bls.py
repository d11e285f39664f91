# mypy: ignore-errors
"""``tensorrt_llm_bls``: preprocessing → tensorrt_llm → postprocessing as one decoupled model.

The same request interface as the ``ensemble`` (``text_input``, ``max_tokens``, ``stream``, …
in; ``text_output`` out), written as business-logic scripting: each request runs on a worker
thread so ``execute`` returns at once and requests overlap, and with ``stream`` every response of
the ``tensorrt_llm`` model is detokenised and sent as it arrives. ``accumulate_tokens: true``
decodes the whole output so far on each response instead of only the new tokens.

As tensorrtllm_backend v0.19.0's ``tensorrt_llm_bls/1/lib/triton_decoder.py`` does, an optional
output the engine did not send (``cum_log_probs`` without ``return_log_probs``, logits, …) is
left out of the response (the python backend refuses an empty output tensor), and a request may
carry a batch of prompts (``text_input`` ``[batch, 1]``; the engine answers per row with
``batch_index``). The renamed knobs (``min_length``/``min_tokens``, ``random_seed``/``seed``) go
through preprocessing and on to the engine under the names in the ``engine_min_tokens_input`` /
``engine_seed_input`` parameters (the engine's TensorRT-LLM line).
"""

import json
import threading
import uuid

import numpy as np
import triton_python_backend_utils as pb_utils

_FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL

# BLS input → preprocessing input, for the renamed knobs (the same as interface.ALIASED_KNOBS).
_ALIASES = {"min_length": "MIN_LENGTH", "min_tokens": "MIN_TOKENS", "random_seed": "RANDOM_SEED", "seed": "SEED"}
# Engine outputs passed on when present.
_OPTIONAL_OUTPUTS = ("cum_log_probs", "output_log_probs", "context_logits", "generation_logits", "batch_index")


def _param(config, key, default=""):
    value = config.get("parameters", {}).get(key, {}).get("string_value", "")
    return value if value != "" else default


def _raise_on_error(response, model):
    if response.has_error():
        raise RuntimeError(f"{model}: {response.error().message()}")


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.engine_model = _param(config, "tensorrt_llm_model_name", "tensorrt_llm")
        self.accumulate = _param(config, "accumulate_tokens", "false").lower() == "true"
        # BLS input → tensorrt_llm input, for the knobs passed straight through: the builder writes
        # tritonkit.builders.trtllm.interface.KNOB_TO_ENGINE here (this file runs without tritonkit).
        self.pass_through = json.loads(_param(config, "pass_through_inputs", "null"))
        if not isinstance(self.pass_through, dict):
            raise ValueError("tensorrt_llm_bls: its config has no pass_through_inputs parameter (a JSON map of "
                             "BLS input to engine input); rebuild the repository with `tritonkit build trtllm`")
        self.engine_names = {"OUT_MIN_TOKENS": _param(config, "engine_min_tokens_input", "min_tokens"),
                             "OUT_SEED": _param(config, "engine_seed_input", "seed")}

    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self._serve, args=(request,), daemon=True).start()
        return None

    def _serve(self, request):
        sender = request.get_response_sender()
        try:
            self._generate(request, sender)
            sender.send(flags=_FINAL)
        except Exception as exc:
            sender.send(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(exc))),
                        flags=_FINAL)

    def _generate(self, request, sender):
        def given(name):
            return pb_utils.get_input_tensor_by_name(request, name)

        query = given("text_input").as_numpy()
        batch = query.shape[0]  # upstream: request.text_input.shape[0]
        pre_inputs = [pb_utils.Tensor("QUERY", query.reshape(batch, 1)),
                      pb_utils.Tensor("REQUEST_OUTPUT_LEN", given("max_tokens").as_numpy().reshape(batch, 1))]
        for src, dst in (("end_id", "END_ID"), ("pad_id", "PAD_ID"), *_ALIASES.items()):
            if given(src) is not None:
                pre_inputs.append(pb_utils.Tensor(dst, given(src).as_numpy().reshape(batch, 1)))
        for src, dst in (("bad_words", "BAD_WORDS_DICT"), ("stop_words", "STOP_WORDS_DICT")):
            if given(src) is not None:
                pre_inputs.append(pb_utils.Tensor(dst, given(src).as_numpy().reshape(batch, -1)))
        pre = pb_utils.InferenceRequest(
            model_name="preprocessing", inputs=pre_inputs,
            requested_output_names=["INPUT_ID", "REQUEST_INPUT_LEN", "REQUEST_OUTPUT_LEN", "OUT_END_ID",
                                    "OUT_PAD_ID", "STOP_WORDS_IDS", "BAD_WORDS_IDS", *self.engine_names]).exec()
        _raise_on_error(pre, "preprocessing")

        def out(name):
            tensor = pb_utils.get_output_tensor_by_name(pre, name)
            return None if tensor is None else tensor.as_numpy()

        engine_inputs = [
            pb_utils.Tensor("input_ids", out("INPUT_ID")),
            pb_utils.Tensor("input_lengths", out("REQUEST_INPUT_LEN").reshape(batch, 1)),
            pb_utils.Tensor("request_output_len", out("REQUEST_OUTPUT_LEN").reshape(batch, 1)),
            pb_utils.Tensor("end_id", out("OUT_END_ID").reshape(batch, 1)),
            pb_utils.Tensor("pad_id", out("OUT_PAD_ID").reshape(batch, 1)),
            pb_utils.Tensor("stop_words_list", out("STOP_WORDS_IDS")),
            pb_utils.Tensor("bad_words_list", out("BAD_WORDS_IDS")),
        ]
        for pre_name, engine_name in self.engine_names.items():
            if out(pre_name) is not None:
                engine_inputs.append(pb_utils.Tensor(engine_name, out(pre_name).reshape(batch, 1)))
        for src, dst in self.pass_through.items():
            if given(src) is not None:
                engine_inputs.append(pb_utils.Tensor(dst, given(src).as_numpy().reshape(batch, 1)))
        stream = given("stream") is not None and bool(given("stream").as_numpy().reshape(-1)[0])
        inner_id = f"bls-{uuid.uuid4().hex}"
        responses = pb_utils.InferenceRequest(
            model_name=self.engine_model, inputs=engine_inputs, request_id=inner_id,
            requested_output_names=["output_ids", "sequence_length", *_OPTIONAL_OUTPUTS],
        ).exec(decoupled=True)
        so_far = {}
        for response in responses:
            if request.is_cancelled():
                self._stop(inner_id, engine_inputs)
                return
            _raise_on_error(response, self.engine_model)
            ids = pb_utils.get_output_tensor_by_name(response, "output_ids")
            if ids is None:  # the empty final response
                continue
            tokens = ids.as_numpy()
            lengths = pb_utils.get_output_tensor_by_name(response, "sequence_length").as_numpy()
            optional = [t for t in (pb_utils.get_output_tensor_by_name(response, n) for n in _OPTIONAL_OUTPUTS)
                        if t is not None]
            if stream and self.accumulate:
                index = next((int(t.as_numpy().reshape(-1)[0]) for t in optional if t.name() == "batch_index"), 0)
                seen = so_far.setdefault(index, [])
                seen.extend(int(t) for t in tokens.reshape(-1)[: int(lengths.reshape(-1)[0])])
                tokens = np.asarray(seen, dtype=np.int32).reshape(1, 1, -1)
                lengths = np.asarray([[len(seen)]], dtype=np.int32)
            post = pb_utils.InferenceRequest(
                model_name="postprocessing",
                inputs=[pb_utils.Tensor("TOKENS_BATCH", tokens), pb_utils.Tensor("SEQUENCE_LENGTH", lengths)],
                requested_output_names=["OUTPUT"]).exec()
            _raise_on_error(post, "postprocessing")
            text = pb_utils.Tensor("text_output", pb_utils.get_output_tensor_by_name(post, "OUTPUT").as_numpy())
            sender.send(pb_utils.InferenceResponse(output_tensors=[text, *optional]))

    def _stop(self, inner_id, engine_inputs):
        # The client went away: stop the engine's generation too, so its batch slot frees at the next
        # step. WAR: this python backend cannot cancel a BLS request it started, so send TensorRT-LLM's
        # own stop request (input stop=true with the same request id) instead.
        required = [t for t in engine_inputs if t.name() in ("input_ids", "input_lengths", "request_output_len")]
        stop = pb_utils.Tensor("stop", np.asarray([[True]], dtype=np.bool_))
        for _ in pb_utils.InferenceRequest(model_name=self.engine_model, inputs=[*required, stop],
                                           request_id=inner_id, requested_output_names=[]).exec(decoupled=True):
            pass
