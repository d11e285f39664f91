# mypy: ignore-errors
"""CPU stand-in for TensorRT-LLM's LLM-API model (``all_models/llmapi/tensorrt_llm``), on the python backend.

It serves the LLM-API interface so clients, ``tritonkit infer`` and load tests can run without a
GPU; the text it writes means nothing (a tiny numpy model, ``tiny_lm.py``). The contract it keeps,
read at tensorrtllm_backend v0.19.0 ``all_models/llmapi/tensorrt_llm/1/{model.py,helpers.py}`` and
NVIDIA/TensorRT-LLM b35ac1b6 (1.2.0rc2) ``triton_backend/all_models/llmapi/tensorrt_llm/1/model.py``:

* ``auto_complete_config`` takes ``decoupled`` and ``max_batch_size`` from ``model.yaml``'s
  ``triton_config`` (a missing ``model.yaml`` fails the load); every other top-level key is an
  ``LLM()`` argument, and one the line's ``LLM()`` does not take fails the load, as its pydantic
  arguments do;
* ``text_input`` is required and must be 1-D (one prompt per request: "only supports text_input
  being a 1D tensor"); every other input is a scalar ("Expected a scalar tensor for tensor …");
  streaming without decoupled is refused ("Streaming is only supported in decoupled mode.");
* ``sampling_param_max_tokens`` defaults to 32 (``SamplingParams``); ``sampling_param_stop`` strings
  end the output (finish reason ``stop``, the string is not in the text, ``stop_reason`` names it);
  otherwise it ends at ``max_tokens`` (``length``); ``sampling_param_exclude_input_from_output``
  defaults to false, so ``text_output`` starts with the prompt unless it is set;
* each response's ``text_output`` is the whole text so far (``CompletionOutput.text``), streamed
  or not; ``finish_reason`` / ``stop_reason`` / ``cumulative_logprob`` come only when their
  ``return_*`` flag is set, as strings (model.py sends ``str(value)`` as an object tensor, so a
  missing stop reason reads ``None``);
* with ``sampling_param_return_perf_metrics`` every response carries the per-request metrics,
  typed as its line's model.py sends them (``metrics_as_strings`` in the checkpoint's config: 1.1 and
  1.2 follow 1.2.0rc2's model.py, which sends ``str(value)`` in the text output's type although
  config.pbtxt declares INT64 / INT32 / FP32 — perf_analyzer then exports the bytes as integers,
  unreadable; main follows its config.pbtxt's types, its model.py not having been read):
  ``arrival_time_ns``, ``first_scheduled_time_ns``,
  ``first_token_time_ns``, ``last_token_time_ns`` (this process's monotonic clock, as the
  executor's steady clock: differences are meaningful, not the absolute values), the KV-cache
  block counts and hit rate, and the speculative-decoding figures (0 here);
* the ``stop`` input cancels the running request with the same request id and answers with a
  CANCELLED error; a cancelled request stops at the next step.

What it does not do: beam search or ``best_of`` > 1 (refused), LoRA and images (refused when sent).
Requests are batched in flight like the engine stand-in: one loop runs steps; at every step
boundary requests join (up to ``max_batch_size`` of ``model.yaml``) and finished ones leave; a
step costs ``step_ms`` + ``per_sequence_ms`` × running requests (``reference`` in the checkpoint's
``config.json``).
"""

import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils
import yaml
from inflight import InFlightLoop
from tiny_lm import TinyLM
from tokenizers import Tokenizer

_FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
_DEFAULT_MAX_TOKENS = 32  # tensorrt_llm.SamplingParams.max_tokens
_BLOCK_TOKENS = 64  # tokens per KV-cache block (the metric outputs count blocks)


def _model_yaml():
    path = os.path.join(pb_utils.get_model_dir(), os.environ.get("LLM_CONFIG_PATH", "model.yaml"))
    if not os.path.isfile(path):
        raise pb_utils.TritonModelException(f"'model.yaml' containing TRT-LLM engine args not found in "
                                            f"'{pb_utils.get_model_dir()}'")
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _scalar(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return None
    value = tensor.as_numpy()
    if value.size != 1:
        raise ValueError(f"Expected a scalar tensor for tensor {name}")
    item = value.reshape(-1)[0]
    return item.decode("utf-8") if isinstance(item, bytes) else item.item() if hasattr(item, "item") else item


def _strings(values):
    return np.asarray([str(v).encode("utf-8") for v in values], dtype=np.object_)


_NUMPY = {"TYPE_INT64": np.int64, "TYPE_INT32": np.int32, "TYPE_FP32": np.float32}


class _Request:
    def __init__(self, request, prompt, ids, settings):
        self.request = request
        self.sender = request.get_response_sender()
        self.prompt = prompt
        self.ids = ids
        self.__dict__.update(settings)
        self.tokens = []
        self.log_prob = 0.0
        self.arrival_ns = time.monotonic_ns()
        self.scheduled_ns = 0
        self.first_token_ns = 0
        self.last_token_ns = 0
        self.cancelled = False


class TritonPythonModel(InFlightLoop):
    @classmethod
    def auto_complete_config(cls, auto_complete_model_config):
        triton_config = _model_yaml()["triton_config"]
        auto_complete_model_config.set_model_transaction_policy(dict(decoupled=bool(triton_config["decoupled"])))
        auto_complete_model_config.set_max_batch_size(int(triton_config["max_batch_size"]))
        return auto_complete_model_config

    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        config = _model_yaml()
        self.decoupled = bool(config["triton_config"]["decoupled"])
        llm_args = {k: v for k, v in config.items() if k != "triton_config"}
        checkpoint = str(llm_args.get("model", ""))
        with open(os.path.join(checkpoint, "config.json"), encoding="utf-8") as f:
            ref = json.load(f)["reference"]
        unknown = sorted(set(llm_args) - set(ref["llm_args"]))
        if unknown:
            raise pb_utils.TritonModelException(f"LLM() got unexpected arguments {unknown} (TensorRT-LLM "
                                                f"{ref['trtllm_version']})")
        self.tokenizer = Tokenizer.from_file(os.path.join(checkpoint, "tokenizer.json"))
        self.lm = TinyLM(int(ref["vocab_size"]), hidden_size=int(ref["hidden_size"]), seed=int(ref["seed"]),
                         allowed=list(ref["allowed_token_ids"]))
        self.max_batch = int(llm_args.get("max_batch_size") or ref["max_batch_size"])
        self.max_seq_len = int(llm_args.get("max_seq_len") or ref["max_seq_len"])
        self.step_s = float(ref["step_ms"]) / 1000.0
        self.per_sequence_s = float(ref["per_sequence_ms"]) / 1000.0
        self.best_of_input = ref["best_of_input"]
        self.metrics_as_strings = bool(ref["metrics_as_strings"])
        self.output_types = {o["name"]: o["data_type"] for o in self.model_config["output"]}
        self.start_loop("reference-llmapi")

    # ---- requests -------------------------------------------------------------------------------
    def execute(self, requests):
        for request in requests:
            try:
                if _scalar(request, "stop"):
                    self._stop(request)
                    continue
                item = self._convert(request)
            except ValueError as exc:
                self._error(request.get_response_sender(), f"Error generating request: {exc}")
                continue
            self.enqueue([item])
        return None

    def _convert(self, request):
        text = pb_utils.get_input_tensor_by_name(request, "text_input")
        if text is None:
            raise ValueError("text_input is missing from the request")
        text = text.as_numpy()
        if len(text.shape) > 1:
            raise ValueError("The current implementation only supports text_input being a 1D tensor.")
        prompt = text[0].decode("utf-8") if isinstance(text[0], bytes) else str(text[0])
        for name in ("image_url", "lora_id", "lora_name", "lora_path"):
            if pb_utils.get_input_tensor_by_name(request, name) is not None:
                raise ValueError(f"the reference stand-in does not serve {name}")
        streaming = bool(_scalar(request, "streaming") or False)
        if streaming and not self.decoupled:
            raise ValueError("Streaming is only supported in decoupled mode.")
        width = _scalar(request, self.best_of_input)
        if width is not None and int(width) != 1:
            raise ValueError(f"the reference stand-in generates one sequence: {self.best_of_input} {width}")
        max_tokens = _scalar(request, "sampling_param_max_tokens")
        max_tokens = _DEFAULT_MAX_TOKENS if max_tokens is None else int(max_tokens)
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        stop = pb_utils.get_input_tensor_by_name(request, "sampling_param_stop")
        stops = [] if stop is None else [s.decode("utf-8") if isinstance(s, bytes) else str(s)
                                         for s in stop.as_numpy().reshape(-1)]
        ids = self.tokenizer.encode(prompt).ids
        if len(ids) + max_tokens > self.max_seq_len:
            raise ValueError(f"prompt ({len(ids)} tokens) + max_tokens ({max_tokens}) exceeds max_seq_len "
                             f"{self.max_seq_len}")
        settings = {
            "streaming": streaming, "max_tokens": max_tokens, "stops": [s for s in stops if s],
            "exclude_input": bool(_scalar(request, "sampling_param_exclude_input_from_output") or False),
            "perf": bool(_scalar(request, "sampling_param_return_perf_metrics") or False),
            "want_finish": bool(_scalar(request, "return_finish_reason") or False),
            "want_stop": bool(_scalar(request, "return_stop_reason") or False),
            "want_logprob": bool(_scalar(request, "return_cumulative_logprob") or False),
        }
        return _Request(request, prompt, ids, settings)

    def _stop(self, request):
        target = request.request_id()
        sender = request.get_response_sender()
        if not target:
            self._error(sender, "A request id must be provided for request cancellation")
            return
        with self.cond:
            for item in [*self.waiting, *self.active]:
                if item.request.request_id() == target:
                    item.cancelled = True
        sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(
            "Request cancelled by client", pb_utils.TritonError.CANCELLED)), flags=_FINAL)

    def _error(self, sender, message):
        out = pb_utils.Tensor("text_output", np.asarray([b"N/A"], dtype=np.object_))
        sender.send(pb_utils.InferenceResponse(output_tensors=[out], error=pb_utils.TritonError(message)),
                    flags=_FINAL)

    # ---- the in-flight loop -----------------------------------------------------------------------
    def _run(self):
        while True:
            with self.cond:
                if not self.wait_for_work():
                    return
                now = time.monotonic_ns()
                while self.waiting and len(self.active) < self.max_batch:
                    item = self.waiting.popleft()
                    item.scheduled_ns = now
                    self.active.append(item)
                batch = list(self.active)
            started = time.monotonic()
            for item in batch:
                try:
                    self._advance(item)
                except Exception as exc:  # fail this request only; keep the loop alive
                    item.done, item.error = True, str(exc)
            remaining = self.step_s + self.per_sequence_s * len(batch) - (time.monotonic() - started)
            if remaining > 0:
                time.sleep(remaining)
            for item in batch:
                self._respond(item)

    def _advance(self, item):
        item.done, item.error, item.finish, item.stop_reason = False, None, None, None
        if item.cancelled or item.request.is_cancelled():
            item.done, item.finish = True, "cancelled"
            return
        token, log_prob = self.lm.next_token(np.asarray(item.ids + item.tokens), item.tokens)
        item.tokens.append(token)
        item.log_prob += log_prob
        item.last_token_ns = time.monotonic_ns()
        item.first_token_ns = item.first_token_ns or item.last_token_ns
        generated = self.tokenizer.decode(item.tokens)
        for stop in item.stops:
            at = generated.find(stop)
            if at >= 0:
                item.done, item.finish, item.stop_reason = True, "stop", stop
                generated = generated[:at]
                break
        else:
            if len(item.tokens) >= item.max_tokens:
                item.done, item.finish = True, "length"
        item.text = generated if item.exclude_input else item.prompt + generated

    def _respond(self, item):
        if item.error is not None:
            self._drop(item)
            self._error(item.sender, f"Error generating request: {item.error}")
            return
        if item.finish == "cancelled":
            self._drop(item)
            if not item.request.is_cancelled():
                item.sender.send(flags=_FINAL)
            return
        if item.streaming or item.done:
            item.sender.send(self._response(item), flags=_FINAL if item.done else 0)
        if item.done:
            self._drop(item)

    def _drop(self, item):
        with self.cond:
            if item in self.active:
                self.active.remove(item)

    def _response(self, item):
        tensors = [pb_utils.Tensor("text_output", _strings([item.text]))]
        if item.want_finish:
            tensors.append(pb_utils.Tensor("finish_reason", _strings([item.finish])))
        if item.want_stop:
            tensors.append(pb_utils.Tensor("stop_reason", _strings([item.stop_reason])))
        if item.want_logprob:
            value = _strings([item.log_prob]) if self.metrics_as_strings else np.asarray([item.log_prob], np.float32)
            tensors.append(pb_utils.Tensor("cumulative_logprob", value))
        if item.perf:
            blocks = -(-(len(item.ids) + len(item.tokens)) // _BLOCK_TOKENS)
            for name, value in (("kv_cache_reused_block", 0), ("kv_cache_hit_rate", 0.0),
                                ("kv_cache_alloc_new_blocks", blocks), ("kv_cache_alloc_total_blocks", blocks),
                                ("kv_cache_missed_block", blocks), ("arrival_time_ns", item.arrival_ns),
                                ("first_scheduled_time_ns", item.scheduled_ns),
                                ("first_token_time_ns", item.first_token_ns),
                                ("last_token_time_ns", item.last_token_ns), ("acceptance_rate", 0.0),
                                ("total_accepted_draft_tokens", 0), ("total_draft_tokens", 0)):
                if self.metrics_as_strings:
                    tensors.append(pb_utils.Tensor(name, _strings([value])))
                else:
                    tensors.append(pb_utils.Tensor(name, np.asarray([value], dtype=_NUMPY[self.output_types[name]])))
        return pb_utils.InferenceResponse(output_tensors=tensors)
