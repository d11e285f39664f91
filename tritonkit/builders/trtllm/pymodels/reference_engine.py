# mypy: ignore-errors
"""CPU reference engine: the ``tensorrt_llm`` model's inputs and outputs, served by the python backend.

It stands in for a TensorRT-LLM engine so the whole serving path can run and be measured without
a GPU. It batches in flight: ``execute`` only queues requests; one background loop runs decode
steps, and at every step boundary finished sequences leave and waiting ones join (while the
batch has room and the KV-cache budget, reserved as prompt + requested tokens like TensorRT-LLM's
``guaranteed_no_evict`` policy, allows). A step costs a base time plus a share per running
sequence and per thousand tokens of context, plus the prefill of the prompts that joined, so
latency behaves like an engine's. Tokens come from a tiny deterministic numpy model; the text
means nothing. Settings come from ``<engine_dir>/config.json`` (``build_config`` and ``reference``).

The contract of the C++ backend it keeps (tensorrtllm_backend v0.19.0, ``inflight_batcher_llm/src``):

* inputs are read under the names of the TensorRT-LLM line the repository was written for
  (``reference.min_tokens_input`` / ``seed_input``: ``min_length``/``random_seed`` up to 0.19,
  ``min_tokens``/``seed`` in 1.x); a declared input of another line is ignored, as there;
* ``cum_log_probs`` / ``output_log_probs`` only with ``return_log_probs``, ``context_logits`` /
  ``generation_logits`` only with ``return_context_logits`` / ``return_generation_logits``
  (model_instance_state.cc writes an output only when requested and present), ``batch_index``
  only for batch > 1; shapes ``output_ids [1, beams, tokens]``, ``sequence_length [1, beams]``,
  ``cum_log_probs [1, beams]``, ``output_log_probs [1, beams, tokens]``;
* batch > 1 splits into one sequence per row, its prompt cut to ``input_lengths`` (utils.cc
  splitBatchInputsTensors), and needs decoupled mode, as does streaming (createRequestsFromInputTensors);
* word lists are ``[2, N]`` (ids, then exclusive end offsets padded with -1) and refused like
  utils.cc convertWordList does (odd length, non-increasing or out-of-bound offsets, -1 in the
  middle); a bad word is never generated, a stop word ends the sequence (and is in the output);
  ``end_id`` ends it (and is not), never before ``min_tokens``;
* streaming sends only the new token per response; without streaming one response carries
  the prompt too unless ``exclude_input_in_output``;
* a cancelled request, or TensorRT-LLM's stop request (input ``stop`` true with the running
  request's id), leaves the batch at the next step.
"""

import json
import os
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils
from inflight import InFlightLoop
from tiny_lm import TinyLM

_FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def _tensor(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy()


def _row(value, row, default=None):
    if value is None:
        return default
    flat = value.reshape(value.shape[0], -1) if value.ndim > 1 else value.reshape(-1, 1)
    if flat.size == 0:
        return default
    return flat[min(row, flat.shape[0] - 1)].reshape(-1)[0].item()


def _param(config, key, default=""):
    value = config.get("parameters", {}).get(key, {}).get("string_value", "")
    return value if value != "" else default


def word_list(value, row):
    """utils.cc convertWordList: ``[2, N]`` ids and offsets → list of token sequences (ValueError if malformed)."""
    if value is None or value.size == 0:
        return []
    sparse = [int(x) for x in (value[min(row, value.shape[0] - 1)] if value.ndim == 3 else value).reshape(-1)]
    shown = " ".join(map(str, sparse))
    if len(sparse) % 2:
        raise ValueError(f"Sparse list must not have odd length: {shown}")
    n = len(sparse) // 2
    words, start = [], 0
    for i in range(n, 2 * n):
        if sparse[i] == -1:
            if any(x != -1 for x in sparse[i + 1:]):
                raise ValueError(f"Sparse list must not have additional -1s: {shown}")
            break
        if sparse[i] > n:
            raise ValueError(f"Sparse list must not have out-of-bound offsets: {shown}")
        if i != n and sparse[i] <= sparse[i - 1]:
            raise ValueError(f"Sparse list must not have non-increasing offsets: {shown}")
        words.append(sparse[start: sparse[i]])
        start = sparse[i]
    return words


class _Group:
    """One Triton request: its sender, shared by its rows (batch > 1), final once every row is done."""

    def __init__(self, request, rows):
        self.request = request
        self.sender = request.get_response_sender()
        self.left = rows
        self.lock = threading.Lock()
        requested = request.requested_output_names()
        self.requested = set(requested) if requested else None

    def wants(self, name):
        return self.requested is None or name in self.requested

    def send(self, response, *, last):
        with self.lock:
            if last:
                self.left -= 1
            final = last and self.left == 0
        if response is not None:
            self.sender.send(response, flags=_FINAL if final else 0)
        elif final:
            self.sender.send(flags=_FINAL)


class _Sequence:
    def __init__(self, group, row, prompt, settings):
        self.group = group
        self.row = row
        self.prompt = prompt
        self.__dict__.update(settings)
        self.tokens = []
        self.log_probs = []
        self.logits = []
        self.reserved = len(prompt) + self.max_new
        self.prefilled = False
        self.stopped = False
        self.context_sent = False


class TritonPythonModel(InFlightLoop):
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled"))
        engine_dir = _param(config, "gpt_model_path")
        if not os.path.isabs(engine_dir):
            engine_dir = os.path.join(args["model_repository"], engine_dir)
        with open(os.path.join(engine_dir, "config.json"), encoding="utf-8") as f:
            engine = json.load(f)
        build = engine["build_config"]
        ref = engine["reference"]
        self.min_tokens_input = ref.get("min_tokens_input", "min_tokens")
        self.seed_input = ref.get("seed_input", "seed")
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
        self.kv_used = 0
        self.start_loop("reference-engine")

    def execute(self, requests):
        for request in requests:
            if _row(_tensor(request, "stop"), 0, False):
                self._stop(request)
                continue
            try:
                sequences = self._admit_check(request)
            except ValueError as exc:
                # WAR: a non-decoupled python model may not answer through the sender *and* return
                # responses, so refusals go through the sender in both modes.
                request.get_response_sender().send(
                    pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(exc))), flags=_FINAL)
                continue
            self.enqueue(sequences)
        return None

    def _admit_check(self, request):
        ids = _tensor(request, "input_ids")
        if ids is None:
            raise ValueError("input_ids is required")
        ids = ids.reshape(1, -1) if ids.ndim == 1 else ids.reshape(ids.shape[0], -1)
        rows = ids.shape[0]
        streaming = bool(_row(_tensor(request, "streaming"), 0, False))
        if rows > 1 and not self.decoupled:
            raise ValueError("Batch size > 1 requires the tensorrt_llm backend to be using decoupled transaction policy")
        if streaming and not self.decoupled:
            raise ValueError("Streaming is only supported if model is deployed using decoupled mode.")
        lengths, out_len = _tensor(request, "input_lengths"), _tensor(request, "request_output_len")
        stop_words, bad_words = _tensor(request, "stop_words_list"), _tensor(request, "bad_words_list")
        group = _Group(request, rows)
        sequences = []
        for row in range(rows):
            prompt = [int(t) for t in ids[row][: int(_row(lengths, row, ids.shape[1]))]]
            max_new = int(_row(out_len, row, 0))
            if not prompt:
                raise ValueError("the prompt is empty")
            if max_new < 1:
                raise ValueError(f"request_output_len must be >= 1, got {max_new}")
            if len(prompt) > self.max_input_len:
                raise ValueError(f"prompt of {len(prompt)} tokens exceeds the engine's max_input_len "
                                 f"{self.max_input_len}")
            if len(prompt) > self.max_num_tokens:
                raise ValueError(f"prompt of {len(prompt)} tokens exceeds the engine's max_num_tokens "
                                 f"{self.max_num_tokens} (tokens per step, without chunked context)")
            if len(prompt) + max_new > self.max_seq_len:
                raise ValueError(f"prompt ({len(prompt)}) + request_output_len ({max_new}) exceeds the engine's "
                                 f"max_seq_len {self.max_seq_len}")
            if len(prompt) + max_new > self.kv_capacity:
                raise ValueError(f"the sequence needs {len(prompt) + max_new} KV-cache tokens; the cache holds "
                                 f"{self.kv_capacity}")
            settings = {
                "max_new": max_new, "streaming": streaming,
                "exclude_input": bool(_row(_tensor(request, "exclude_input_in_output"), row,
                                           self.exclude_input_default)),
                "return_log_probs": bool(_row(_tensor(request, "return_log_probs"), row, False)),
                "return_context_logits": bool(_row(_tensor(request, "return_context_logits"), row, False)),
                "return_generation_logits": bool(_row(_tensor(request, "return_generation_logits"), row, False)),
                "end_id": _row(_tensor(request, "end_id"), row, None),
                "min_tokens": int(_row(_tensor(request, self.min_tokens_input), row, 0)),
                "stop_words": [w for w in word_list(stop_words, row) if w],
                "bad_words": [w for w in word_list(bad_words, row) if w],
                "batch_index": row if rows > 1 else None,
            }
            sequences.append(_Sequence(group, row, prompt, settings))
        return sequences

    def _stop(self, request):
        # TensorRT-LLM's stop request: end the running request with the same id at the next step.
        target = request.request_id()
        with self.cond:
            for seq in [*self.waiting, *self.active]:
                if target and seq.group.request.request_id() == target:
                    seq.stopped = True
        request.get_response_sender().send(flags=_FINAL)

    # ---- the in-flight batching loop -------------------------------------------------------
    def _run(self):
        while True:
            with self.cond:
                if not self.wait_for_work():
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

    def _banned(self, seq):
        # A bad word is never completed: ban its last token where the output ends with the rest.
        banned = set()
        for word in seq.bad_words:
            head = word[:-1]
            if not head or seq.tokens[-len(head):] == head:
                banned.add(word[-1])
        if seq.end_id is not None and len(seq.tokens) < seq.min_tokens:
            banned.add(int(seq.end_id))
        return banned

    def _step(self, batch):
        started = time.monotonic()
        prefill_tokens = sum(len(s.prompt) for s in batch if not s.prefilled)
        context_tokens = sum(len(s.prompt) + len(s.tokens) for s in batch)
        ended, appended = set(), set()
        for seq in batch:
            if seq.stopped or seq.group.request.is_cancelled():
                self._finish(seq, cancelled=True)
                continue
            token, log_prob, logits = self.lm.step(np.asarray(seq.prompt + seq.tokens), seq.tokens, self._banned(seq))
            seq.prefilled = True
            if seq.end_id is not None and token == int(seq.end_id):
                ended.add(id(seq))  # end_id ends the sequence and is not part of the output
                continue
            seq.tokens.append(token)
            seq.log_probs.append(log_prob)
            appended.add(id(seq))
            if seq.return_generation_logits:
                seq.logits.append(np.where(np.isfinite(logits), logits, -1e30).astype(np.float32))
            if any(seq.tokens[-len(w):] == w for w in seq.stop_words):
                ended.add(id(seq))  # a stop word ends it, and stays in the output
        cost_s = (self.step_s + self.per_sequence_s * len(batch) + self.per_kilotoken_s * context_tokens / 1000.0
                  + self.prefill_per_kilotoken_s * prefill_tokens / 1000.0)
        remaining = cost_s - (time.monotonic() - started)
        if remaining > 0:
            time.sleep(remaining)
        for seq in batch:
            if seq not in self.active:
                continue
            done = len(seq.tokens) >= seq.max_new or id(seq) in ended
            if seq.streaming and id(seq) in appended:
                logits = seq.logits[-1:] if seq.return_generation_logits else []
                seq.group.send(self._response(seq, seq.tokens[-1:], seq.log_probs[-1:], logits), last=done)
            elif seq.streaming and done:
                seq.group.send(None, last=True)  # ended on end_id: nothing new, only the final flag
            elif done:
                ids = seq.tokens if seq.exclude_input else seq.prompt + seq.tokens
                seq.group.send(self._response(seq, ids, seq.log_probs, seq.logits), last=True)
            if done:
                self._finish(seq, cancelled=False)

    def _response(self, seq, ids, log_probs, logits):
        g = seq.group
        tensors = [pb_utils.Tensor("output_ids", np.asarray(ids, dtype=np.int32).reshape(1, 1, -1)),
                   pb_utils.Tensor("sequence_length", np.asarray([[len(ids)]], dtype=np.int32))]
        if seq.return_log_probs:
            if g.wants("cum_log_probs"):
                tensors.append(pb_utils.Tensor("cum_log_probs",
                                               np.asarray([[sum(seq.log_probs)]], dtype=np.float32)))
            if g.wants("output_log_probs"):
                tensors.append(pb_utils.Tensor("output_log_probs",
                                               np.asarray(log_probs, dtype=np.float32).reshape(1, 1, -1)))
        if seq.return_context_logits and not seq.context_sent and g.wants("context_logits"):
            seq.context_sent = True
            context = [self.lm.logits(np.asarray(seq.prompt[: i + 1])) for i in range(len(seq.prompt))]
            values = np.where(np.isfinite(context), context, -1e30).astype(np.float32)
            tensors.append(pb_utils.Tensor("context_logits", values.reshape(1, len(seq.prompt), -1)))
        if seq.return_generation_logits and g.wants("generation_logits"):
            values = np.asarray(logits, dtype=np.float32).reshape(1, 1, len(logits), -1)
            tensors.append(pb_utils.Tensor("generation_logits", values))
        if seq.batch_index is not None and g.wants("batch_index"):
            tensors.append(pb_utils.Tensor("batch_index", np.asarray([[seq.batch_index]], dtype=np.int32)))
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def _finish(self, seq, *, cancelled):
        with self.cond:
            if seq in self.active:
                self.active.remove(seq)
                self.kv_used -= seq.reserved
        if cancelled:
            seq.group.send(None, last=True)

    def _fail(self, seq, message):
        with self.cond:
            if seq not in self.active:
                return
        seq.group.send(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message)), last=True)
        self._finish(seq, cancelled=False)
