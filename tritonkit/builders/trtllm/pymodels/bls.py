# mypy: ignore-errors
"""``tensorrt_llm_bls``: preprocessing → tensorrt_llm → postprocessing as one decoupled model.

The same request interface as the ``ensemble`` (``text_input``, ``max_tokens``, ``stream``, …
in; ``text_output`` out), written as business-logic scripting: each request runs on a worker
thread so ``execute`` returns at once and requests overlap, and with ``stream`` every response of
the ``tensorrt_llm`` model is detokenised and sent as it arrives. ``accumulate_tokens: true``
decodes the whole output so far on each response instead of only the new tokens.
"""

import json
import threading
import uuid

import numpy as np
import triton_python_backend_utils as pb_utils

_FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL

# BLS input name → tensorrt_llm input name, for the inputs passed straight through. The same map as
# tritonkit.builders.trtllm.interface.KNOB_TO_ENGINE: this file runs inside the server, where tritonkit
# may not be installed, so it carries its own copy (a test keeps the two equal).
_PASS_THROUGH = {
    "top_k": "runtime_top_k",
    "top_p": "runtime_top_p",
    "temperature": "temperature",
    "length_penalty": "len_penalty",
    "repetition_penalty": "repetition_penalty",
    "min_tokens": "min_tokens",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "seed": "seed",
    "return_log_probs": "return_log_probs",
    "beam_width": "beam_width",
    "exclude_input_in_output": "exclude_input_in_output",
    "stream": "streaming",
}


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

        pre_inputs = [pb_utils.Tensor("QUERY", given("text_input").as_numpy().reshape(1, 1)),
                      pb_utils.Tensor("REQUEST_OUTPUT_LEN", given("max_tokens").as_numpy().reshape(1, 1))]
        for src, dst in (("end_id", "END_ID"), ("pad_id", "PAD_ID")):
            if given(src) is not None:
                pre_inputs.append(pb_utils.Tensor(dst, given(src).as_numpy().reshape(1, 1)))
        for src, dst in (("bad_words", "BAD_WORDS_DICT"), ("stop_words", "STOP_WORDS_DICT")):
            if given(src) is not None:
                pre_inputs.append(pb_utils.Tensor(dst, given(src).as_numpy().reshape(1, -1)))
        pre = pb_utils.InferenceRequest(
            model_name="preprocessing", inputs=pre_inputs,
            requested_output_names=["INPUT_ID", "REQUEST_INPUT_LEN", "REQUEST_OUTPUT_LEN", "OUT_END_ID",
                                    "OUT_PAD_ID", "STOP_WORDS_IDS", "BAD_WORDS_IDS"]).exec()
        _raise_on_error(pre, "preprocessing")

        def out(name):
            return pb_utils.get_output_tensor_by_name(pre, name).as_numpy()

        engine_inputs = [
            pb_utils.Tensor("input_ids", out("INPUT_ID")),
            pb_utils.Tensor("input_lengths", out("REQUEST_INPUT_LEN").reshape(1, 1)),
            pb_utils.Tensor("request_output_len", out("REQUEST_OUTPUT_LEN").reshape(1, 1)),
            pb_utils.Tensor("end_id", out("OUT_END_ID").reshape(1, 1)),
            pb_utils.Tensor("pad_id", out("OUT_PAD_ID").reshape(1, 1)),
            pb_utils.Tensor("stop_words_list", out("STOP_WORDS_IDS")),
            pb_utils.Tensor("bad_words_list", out("BAD_WORDS_IDS")),
        ]
        for src, dst in _PASS_THROUGH.items():
            if given(src) is not None:
                engine_inputs.append(pb_utils.Tensor(dst, given(src).as_numpy().reshape(1, 1)))
        stream = given("stream") is not None and bool(given("stream").as_numpy().reshape(-1)[0])
        inner_id = f"bls-{uuid.uuid4().hex}"
        responses = pb_utils.InferenceRequest(
            model_name=self.engine_model, inputs=engine_inputs, request_id=inner_id,
            requested_output_names=["output_ids", "sequence_length", "cum_log_probs", "output_log_probs"],
        ).exec(decoupled=True)
        so_far = []
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
            if stream and self.accumulate:
                so_far.extend(int(t) for t in tokens.reshape(-1)[: int(lengths.reshape(-1)[0])])
                tokens = np.asarray(so_far, dtype=np.int32).reshape(1, 1, -1)
                lengths = np.asarray([[len(so_far)]], dtype=np.int32)
            post = pb_utils.InferenceRequest(
                model_name="postprocessing",
                inputs=[pb_utils.Tensor("TOKENS_BATCH", tokens), pb_utils.Tensor("SEQUENCE_LENGTH", lengths)],
                requested_output_names=["OUTPUT"]).exec()
            _raise_on_error(post, "postprocessing")
            sender.send(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("text_output", pb_utils.get_output_tensor_by_name(post, "OUTPUT").as_numpy()),
                pb_utils.get_output_tensor_by_name(response, "cum_log_probs"),
                pb_utils.get_output_tensor_by_name(response, "output_log_probs"),
            ]))

    def _stop(self, inner_id, engine_inputs):
        # The client went away: stop the engine's generation too, so its batch slot frees at the next
        # step. WAR: this python backend cannot cancel a BLS request it started, so send TensorRT-LLM's
        # own stop request (input stop=true with the same request id) instead.
        required = [t for t in engine_inputs if t.name() in ("input_ids", "input_lengths", "request_output_len")]
        stop = pb_utils.Tensor("stop", np.asarray([[True]], dtype=np.bool_))
        for _ in pb_utils.InferenceRequest(model_name=self.engine_model, inputs=[*required, stop],
                                           request_id=inner_id, requested_output_names=[]).exec(decoupled=True):
            pass
