# mypy: ignore-errors
"""CPU reference engine: the ``tensorrt_llm`` model's inputs and outputs, served by the python backend.

It stands in for a TensorRT-LLM engine so the whole serving path can run and be measured without
a GPU. It is decoupled and batches in flight: ``execute`` only queues requests; one background
loop runs decode steps, and at every step boundary finished sequences leave and waiting ones join
(while the batch has room and the KV-cache budget, reserved as prompt + requested tokens like
TensorRT-LLM's ``guaranteed_no_evict`` policy, allows). A step costs a base time plus a share per
running sequence and per thousand tokens of context, plus the prefill of the prompts that joined,
so latency behaves like an engine's. Tokens come from a tiny deterministic numpy model; the text
means nothing. Settings come from ``<engine_dir>/config.json`` (``build_config`` and ``reference``).
A cancelled request, or TensorRT-LLM's stop request (input ``stop`` true with the running request's
id), leaves the batch at the next step.
"""

import collections
import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils
from tiny_lm import TinyLM

_FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _scalar(request, name, default=None):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return default
    values = tensor.as_numpy().reshape(-1)
    return values[0].item() if values.size else default


def _param(config, key, default=""):
    value = config.get("parameters", {}).get(key, {}).get("string_value", "")
    return value if value != "" else default


class _Sequence:
    def __init__(self, request, prompt, max_new, streaming, exclude_input, return_log_probs):
        self.request = request
        self.sender = request.get_response_sender()
        self.prompt = prompt
        self.max_new = max_new
        self.streaming = streaming
        self.exclude_input = exclude_input
        self.return_log_probs = return_log_probs
        self.tokens = []
        self.log_probs = []
        self.reserved = len(prompt) + max_new
        self.prefilled = False
        self.stopped = False


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        engine_dir = _param(config, "gpt_model_path")
        if not os.path.isabs(engine_dir):
            engine_dir = os.path.join(args["model_repository"], engine_dir)
        with open(os.path.join(engine_dir, "config.json"), encoding="utf-8") as f:
            engine = json.load(f)
        build = engine["build_config"]
        ref = engine["reference"]
        self.max_batch = int(build["max_batch_size"])
        self.max_input_len = int(build["max_input_len"])
        self.max_seq_len = int(build["max_seq_len"])
        self.max_num_tokens = int(build.get("max_num_tokens") or self.max_batch * self.max_input_len)
        kv_tokens = _param(config, "max_tokens_in_paged_kv_cache")
        self.kv_capacity = int(kv_tokens) if kv_tokens else self.max_batch * self.max_seq_len
        self.exclude_input_default = _param(config, "exclude_input_in_output", "false").lower() == "true"
        self.step_s = float(ref["step_ms"]) / 1000.0
        self.per_sequence_s = float(ref["per_sequence_ms"]) / 1000.0
        self.per_kilotoken_s = float(ref["per_kilotoken_context_ms"]) / 1000.0
        self.prefill_per_kilotoken_s = float(ref["prefill_per_kilotoken_ms"]) / 1000.0
        self.lm = TinyLM(int(ref["vocab_size"]), hidden_size=int(ref["hidden_size"]), seed=int(ref["seed"]),
                         allowed=list(ref["allowed_token_ids"]))
        self.waiting = collections.deque()
        self.active = []
        self.kv_used = 0
        self.cond = threading.Condition()
        self.stopping = False
        self.loop = threading.Thread(target=self._run, name="reference-engine", daemon=True)
        self.loop.start()

    def execute(self, requests):
        for request in requests:
            if _scalar(request, "stop", False):
                self._stop(request)
                continue
            try:
                seq = self._admit_check(request)
            except ValueError as exc:
                request.get_response_sender().send(
                    pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(exc))), flags=_FINAL)
                continue
            with self.cond:
                self.waiting.append(seq)
                self.cond.notify()
        return None

    def _admit_check(self, request):
        ids = pb_utils.get_input_tensor_by_name(request, "input_ids")
        if ids is None:
            raise ValueError("input_ids is required")
        prompt = [int(t) for t in ids.as_numpy().reshape(-1)]
        length = int(_scalar(request, "input_lengths", len(prompt)))
        prompt = prompt[:length]
        max_new = int(_scalar(request, "request_output_len", 0))
        if not prompt:
            raise ValueError("the prompt is empty")
        if max_new < 1:
            raise ValueError(f"request_output_len must be >= 1, got {max_new}")
        if len(prompt) > self.max_input_len:
            raise ValueError(f"prompt of {len(prompt)} tokens exceeds the engine's max_input_len {self.max_input_len}")
        if len(prompt) > self.max_num_tokens:
            raise ValueError(f"prompt of {len(prompt)} tokens exceeds the engine's max_num_tokens {self.max_num_tokens} "
                             "(tokens per step, without chunked context)")
        if len(prompt) + max_new > self.max_seq_len:
            raise ValueError(f"prompt ({len(prompt)}) + request_output_len ({max_new}) exceeds the engine's "
                             f"max_seq_len {self.max_seq_len}")
        if len(prompt) + max_new > self.kv_capacity:
            raise ValueError(f"the sequence needs {len(prompt) + max_new} KV-cache tokens; the cache holds "
                             f"{self.kv_capacity}")
        return _Sequence(request, prompt, max_new, bool(_scalar(request, "streaming", False)),
                         bool(_scalar(request, "exclude_input_in_output", self.exclude_input_default)),
                         bool(_scalar(request, "return_log_probs", False)))

    def _stop(self, request):
        # TensorRT-LLM's stop request: end the running request with the same id at the next step.
        target = request.request_id()
        with self.cond:
            for seq in [*self.waiting, *self.active]:
                if target and seq.request.request_id() == target:
                    seq.stopped = True
        request.get_response_sender().send(flags=_FINAL)

    # ---- the in-flight batching loop -------------------------------------------------------
    def _run(self):
        while True:
            with self.cond:
                while not self.stopping and not self.waiting and not self.active:
                    self.cond.wait(0.5)
                if self.stopping:
                    return
                # Step boundary: waiting requests join while the batch, the KV budget and the step's
                # token budget (one token per running sequence + each joining prompt) allow.
                step_tokens = len(self.active)
                while (self.waiting and len(self.active) < self.max_batch
                       and self.kv_used + self.waiting[0].reserved <= self.kv_capacity
                       and step_tokens + len(self.waiting[0].prompt) <= self.max_num_tokens):
                    seq = self.waiting.popleft()
                    self.kv_used += seq.reserved
                    step_tokens += len(seq.prompt)
                    self.active.append(seq)
                batch = list(self.active)
            try:
                self._step(batch)
            except Exception as exc:  # keep the loop alive; fail only this step's requests
                for seq in batch:
                    self._fail(seq, f"reference engine step failed: {exc}")

    def _step(self, batch):
        started = time.monotonic()
        prefill_tokens = sum(len(s.prompt) for s in batch if not s.prefilled)
        context_tokens = sum(len(s.prompt) + len(s.tokens) for s in batch)
        for seq in batch:
            if seq.stopped or seq.request.is_cancelled():
                self._finish(seq, cancelled=True)
                continue
            token, log_prob = self.lm.next_token(np.asarray(seq.prompt + seq.tokens), seq.tokens)
            seq.prefilled = True
            seq.tokens.append(token)
            seq.log_probs.append(log_prob)
        cost_s = (self.step_s + self.per_sequence_s * len(batch) + self.per_kilotoken_s * context_tokens / 1000.0
                  + self.prefill_per_kilotoken_s * prefill_tokens / 1000.0)
        remaining = cost_s - (time.monotonic() - started)
        if remaining > 0:
            time.sleep(remaining)
        for seq in batch:
            if seq not in self.active:
                continue
            done = len(seq.tokens) >= seq.max_new
            if seq.streaming:
                seq.sender.send(self._response(seq, seq.tokens[-1:], seq.log_probs[-1:]), flags=_FINAL if done else 0)
            elif done:
                ids = seq.tokens if seq.exclude_input else seq.prompt + seq.tokens
                seq.sender.send(self._response(seq, ids, seq.log_probs), flags=_FINAL)
            if done:
                self._finish(seq, cancelled=False)

    def _response(self, seq, ids, log_probs):
        out_ids = np.asarray(ids, dtype=np.int32).reshape(1, 1, -1)
        lps = np.asarray(log_probs if seq.return_log_probs else [0.0] * len(log_probs), dtype=np.float32)
        return pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("output_ids", out_ids),
            pb_utils.Tensor("sequence_length", np.asarray([[len(ids)]], dtype=np.int32)),
            pb_utils.Tensor("cum_log_probs", np.asarray([[lps.sum()]], dtype=np.float32)),
            pb_utils.Tensor("output_log_probs", lps.reshape(1, 1, -1)),
        ])

    def _finish(self, seq, *, cancelled):
        with self.cond:
            if seq in self.active:
                self.active.remove(seq)
                self.kv_used -= seq.reserved
        if cancelled:
            seq.sender.send(flags=_FINAL)

    def _fail(self, seq, message):
        with self.cond:
            if seq not in self.active:
                return
        seq.sender.send(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message)),
                        flags=_FINAL)
        self._finish(seq, cancelled=False)

    def finalize(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.loop.join(timeout=5)
