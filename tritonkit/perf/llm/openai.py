"""LLM load tests over OpenAI-compatible HTTP endpoints (vLLM, SGLang, ``trtllm-serve``, Triton's
OpenAI frontend, Dynamo): the requests, the preflight, and the reading of what came back.

The load engine is perf_analyzer's OpenAI mode (``--service-kind openai --endpoint
v1/chat/completions -i http``, chosen by measurement: docs/llm-load-tests.md), so a step is the
same supervised process, the same ``--request-count`` / ``--request-intervals`` load and the same
profile export as a Triton step; only the request file and the reading of the responses differ:

* **requests** (:func:`write_openai_input_data`): one ``{"payload": [body]}`` entry per prompt, the
  body an OpenAI chat or completions request with ``max_tokens`` set, ``ignore_eos`` (vLLM's
  extension, so an engine answers exactly that many tokens; servers that do not know it ignore it)
  and, streaming, ``"stream": true`` with ``stream_options.include_usage`` (perf_analyzer 2.60 refuses
  ``--streaming`` over HTTP: the body asks for the stream);
* **responses** (:func:`records_from_openai_export`): each response perf_analyzer recorded holds the
  Server-Sent Events that arrived in one read, ``data: {json}`` each, ``data: [DONE]`` last. A
  response whose events carry text (chat ``delta.content``, completions ``text``) carries tokens;
  TTFT is the first such response. The output length is the server's ``usage.completion_tokens``
  (what the engine generated), else the model's tokenizer over the whole text (``--tokenizer``;
  re-tokenising text need not give back the tokens generated: on vLLM serving a random-weight model
  it counted 42 for 32), else one token per text-carrying event; the result's ``token_source`` says
  which (``usage`` / ``tokenizer`` / ``chunks``). Input lengths are the tokenizer's count of the
  prompt when one is given (the lengths the prompts were made to), else the server's
  ``usage.prompt_tokens`` (which includes the chat template), else words. A stream that ends without ``[DONE]``, carries an event that is no JSON or an
  ``error`` event is a failed request (not a measurement), and each is named.

The API key is read from an environment variable (``api_key_env``) in the process that starts
perf_analyzer (:mod:`tritonkit.perf.llm._keyed`), so no file tritonkit writes holds it: the saved
command line names the variable only. On a cluster's clients it travels in each client job's
environment (:mod:`tritonkit.perf.cluster.remote`), never on a command line.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonkit._dial import Dial, dial_for
from tritonkit._fs import atomic_write
from tritonkit._values import NO_ANSWER, excerpt
from tritonkit.errors import ConfigError, ConnectError, ModelNotReadyError, PerfError
from tritonkit.perf.llm._keyed import keyed_command
from tritonkit.perf.llm.metrics import RequestRecord, TokenSource, export_requests
from tritonkit.perf.llm.prompts import Prompt
from tritonkit.perf.measure.parse import read_export

__all__ = ["OPENAI_ENDPOINTS", "OpenAIExport", "OpenAITarget", "check_openai_server", "load_openai_records",
           "openai_body", "records_from_openai_export", "split_events", "write_openai_input_data"]

#: The endpoints a load test speaks (OpenAI's chat and completions APIs, as vLLM serves them).
OPENAI_ENDPOINTS = ("v1/chat/completions", "v1/completions")

_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class OpenAITarget:
    """Where and how an OpenAI-compatible server is asked: the ``endpoint`` path, the environment
    variable holding its API key (``api_key_env``; ``None``: no key), and whether to stream."""

    endpoint: str = "v1/chat/completions"
    api_key_env: str | None = None
    stream: bool = True

    def __post_init__(self) -> None:
        endpoint = self.endpoint.strip().strip("/")
        if endpoint not in OPENAI_ENDPOINTS:
            raise ConfigError(f"--endpoint {self.endpoint!r} is not an OpenAI endpoint tritonkit speaks",
                              hint=f"use one of {', '.join(OPENAI_ENDPOINTS)}")
        object.__setattr__(self, "endpoint", endpoint)
        if self.api_key_env is not None and not _ENV_NAME_RE.fullmatch(self.api_key_env):
            raise ConfigError(f"--api-key-env {self.api_key_env!r} is not an environment variable's name",
                              hint="name the variable that holds the key (e.g. OPENAI_API_KEY), not the key")

    @property
    def chat(self) -> bool:
        return self.endpoint == "v1/chat/completions"

    def api_key(self) -> str | None:
        """The key from the environment (``None`` without ``api_key_env``); a variable that is unset or
        empty is refused, naming the variable (never its value)."""
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise ConfigError(f"--api-key-env {self.api_key_env}: the variable is unset or empty",
                              hint=f"export {self.api_key_env}=<the server's key>, or drop --api-key-env")
        return key

    def analyzer_args(self) -> tuple[str, ...]:
        """perf_analyzer's options for this endpoint (after ``-i http``)."""
        return ("--service-kind", "openai", "--endpoint", self.endpoint)

    def command_prefix(self, perf_analyzer: Sequence[str]) -> list[str]:
        """The command that starts perf_analyzer: itself, or with a key, through the wrapper that adds
        the ``Authorization`` header from the environment (the argv names only the variable)."""
        if self.api_key_env is None:
            return list(perf_analyzer)
        self.api_key()  # refused now, not inside the step
        return keyed_command(self.api_key_env, perf_analyzer)


def openai_body(prompt: Prompt, model: str, target: OpenAITarget) -> dict[str, Any]:
    """One request body for ``prompt`` (see the module docstring)."""
    body: dict[str, Any] = {"model": model}
    if target.chat:
        body["messages"] = [{"role": "user", "content": prompt.text}]
    else:
        body["prompt"] = prompt.text
    # ignore_eos (vLLM's extension): the engine answers exactly max_tokens tokens.
    body.update({"max_tokens": prompt.output_tokens, "ignore_eos": True, "stream": target.stream})
    if target.stream:
        body["stream_options"] = {"include_usage": True}
    return body


def write_openai_input_data(path: str | os.PathLike[str], prompts: Sequence[Prompt], model: str,
                            target: OpenAITarget) -> Path:
    """perf_analyzer's ``--input-data`` for the OpenAI service kind: one payload per prompt (atomically)."""
    if not prompts:
        raise ConfigError("an LLM load test needs at least one prompt")
    data = {"data": [{"payload": [openai_body(p, model, target)]} for p in prompts]}
    return atomic_write(Path(path), json.dumps(data) + "\n")


def _get(url: str, key: str | None, timeout_s: float, dial: Dial) -> tuple[int, bytes]:
    headers = {**dict(dial.headers), **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s,  # noqa: S310 - http(s) URL built here
                                    context=dial.ssl_context() if dial.tls else None) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def check_openai_server(model: str, url: str, target: OpenAITarget, *, timeout_s: float = 5.0) -> list[str]:
    """Before launching: does an OpenAI-compatible server answer ``GET /v1/models`` at ``url``, and does
    it serve ``model``? Returns the models it lists. ``ConnectError`` when nothing answers,
    ``ConfigError`` on a refused key, ``ModelNotReadyError`` naming what it serves instead."""
    dial = dial_for(url)  # TLS and headers of the server (tritonkit._dial)
    base = url if "://" in url else f"{'https' if dial.tls else 'http'}://{url}"
    try:
        status, body = _get(f"{base.rstrip('/')}/v1/models", target.api_key(), timeout_s, dial)
    except NO_ANSWER as exc:  # refused, or no HTTP answered
        reason = getattr(exc, "reason", exc)
        raise ConnectError(f"cannot reach an OpenAI-compatible server at {url}: {excerpt(str(reason), 160)}", model=model,
                           hint="start the server, or pass its host:port with --url") from exc
    if status in (401, 403):
        raise ConfigError(f"the server at {url} refused the API key (HTTP {status})",
                          hint="pass --api-key-env VAR naming a variable that holds the server's key")
    if status != 200:
        raise ConnectError(f"GET {base}/v1/models answered HTTP {status}: is {url} an OpenAI-compatible server?",
                           model=model, hint="point --url at the server's HTTP port (vLLM's --port)")
    try:
        served = [str(m["id"]) for m in json.loads(body)["data"]]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ConnectError(f"GET {base}/v1/models did not answer an OpenAI model list", model=model,
                           hint="point --url at an OpenAI-compatible server") from exc
    if model not in served:
        raise ModelNotReadyError(f"model {model!r} is not served at {url} (it serves: {', '.join(served) or 'nothing'})",
                                 model=model, hint="pass the name the server serves it as (vLLM's --served-model-name)")
    return served


# ---- reading the export -------------------------------------------------------------------------


def split_events(responses: Sequence[str]) -> tuple[list[tuple[int, str]], str]:
    """The Server-Sent Events in a request's recorded responses, each with the index of the response
    in which it was completed, and what was left unterminated at the end."""
    events: list[tuple[int, str]] = []
    buffer = ""
    for index, chunk in enumerate(responses):
        buffer += chunk.replace("\r\n", "\n")
        while "\n\n" in buffer:
            event, buffer = buffer.split("\n\n", 1)
            if event.strip():
                events.append((index, event))
    return events, buffer.strip()


def _data(event: str) -> str | None:
    """An event's ``data:`` payload (its lines joined), ``None`` for comments and other fields."""
    lines = [line[5:].lstrip() for line in event.split("\n") if line.startswith("data:")]
    return "\n".join(lines) if lines else None


def _text(chunk: Mapping[str, Any]) -> str:
    text = []
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, Mapping):
            continue
        delta = choice.get("delta") if isinstance(choice.get("delta"), Mapping) else choice.get("message")
        if isinstance(delta, Mapping) and isinstance(delta.get("content"), str):
            text.append(delta["content"])
        elif isinstance(choice.get("text"), str):
            text.append(choice["text"])
    return "".join(text)


@dataclass
class _Stream:
    """One request's responses read: the text each carried, the server's usage, what went wrong."""

    texts: list[str]
    usage: Mapping[str, Any] | None = None
    problem: str | None = None


def _read_stream(responses: Sequence[str], streaming: bool) -> _Stream:
    if not streaming:  # one JSON body
        body = "".join(responses)
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):
            return _Stream([""] * len(responses), problem="the answer is no JSON")
        if not isinstance(answer, Mapping) or "error" in answer:
            return _Stream([""] * len(responses), problem=f"the server answered an error: {body[:200]}")
        usage = answer.get("usage")
        return _Stream([_text(answer)] + [""] * (len(responses) - 1), usage=usage if isinstance(usage, Mapping) else None)
    stream = _Stream([""] * len(responses))
    events, rest = split_events(responses)
    done = False
    for index, event in events:
        data = _data(event)
        if data is None:
            continue
        if data.strip() == "[DONE]":
            done = True
            continue
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            stream.problem = stream.problem or f"an event is no JSON: {data[:80]!r}"
            continue
        if not isinstance(chunk, Mapping) or "error" in chunk:
            stream.problem = stream.problem or f"the server sent an error event: {data[:200]}"
            continue
        stream.texts[index] += _text(chunk)
        if isinstance(chunk.get("usage"), Mapping):
            stream.usage = chunk["usage"]
    if not done and stream.problem is None:
        stream.problem = "the stream ended before data: [DONE]" + (f" (left unterminated: {rest[:80]!r})" if rest else "")
    return stream


def _spread(texts: Sequence[str], total: int) -> tuple[int, ...]:
    """Per-response token counts: one for each response with text, the rest (or less) on the last, so
    that the first token keeps its time and the sum is ``total``."""
    counts = [1 if t else 0 for t in texts]
    carrying = [i for i, c in enumerate(counts) if c]
    if not carrying:
        return tuple(counts)
    excess = total - len(carrying)
    if excess >= 0:
        counts[carrying[-1]] += excess
    else:
        for i in reversed(carrying[1:]):
            if excess == 0:
                break
            counts[i], excess = 0, excess + 1
    return tuple(counts)


@dataclass
class OpenAIExport:
    """What one step's export says: the requests (a failed one unanswered), where the output token
    counts came from, and one line per failed request."""

    records: list[RequestRecord]
    token_source: TokenSource
    problems: list[str] = field(default_factory=list)


def _prompt_of(payload: Mapping[str, Any]) -> str:
    if isinstance(payload.get("prompt"), str):
        return str(payload["prompt"])
    messages = payload.get("messages")
    return " ".join(str(m.get("content", "")) for m in (messages if isinstance(messages, list) else [])
                    if isinstance(m, Mapping))


def _record(request: Mapping[str, Any], sent: int, times: tuple[int, ...], outputs: list[Mapping[str, Any]],
            count_text: Callable[[str], int] | None) -> tuple[RequestRecord, str, str | None]:
    inputs = request.get("request_inputs") or {}
    raw = (inputs.get("payload") if isinstance(inputs, Mapping) else None) or "{}"
    try:
        payload = json.loads(raw) if isinstance(raw, str) else raw
    except (ValueError, RecursionError):
        payload = None
    if not isinstance(payload, Mapping):
        raise ValueError(f"its payload is not a JSON object: {excerpt(raw)}")
    responses = [str(o.get("response", "")) for o in outputs]
    if len(responses) != len(times):
        responses = (responses + [""] * len(times))[: len(times)]
    stream = _read_stream(responses, bool(payload.get("stream")))
    usage = stream.usage or {}
    if stream.problem is not None or not times:
        return RequestRecord(sent_ns=sent, response_ns=(), tokens_per_response=()), "chunks", stream.problem
    text = "".join(stream.texts)
    if _count(usage.get("completion_tokens")):
        total, source = int(usage["completion_tokens"]), "usage"
    elif count_text is not None:
        total, source = count_text(text), "tokenizer"
    else:
        total, source = sum(1 for t in stream.texts if t), "chunks"
    prompt = _prompt_of(payload)
    isl = (count_text(prompt) if count_text is not None else
           int(usage["prompt_tokens"]) if _count(usage.get("prompt_tokens")) else len(prompt.split()))
    asked = payload.get("max_tokens")
    return RequestRecord(sent_ns=sent, response_ns=times, tokens_per_response=_spread(stream.texts, total),
                         input_tokens=isl, asked_tokens=asked if type(asked) is int else None), source, None


def _count(value: Any) -> bool:
    """Whether the server's ``usage`` figure is a token count one can mean (a whole number, 0 to 2**31)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**31


def records_from_openai_export(data: Mapping[str, Any], *, where: str = "profile export",
                               count_text: Callable[[str], int] | None = None) -> OpenAIExport:
    """Every request of a parsed OpenAI-mode ``--profile-export-file``, in send order (see the module
    docstring for how tokens are counted and what fails a request)."""
    records: list[RequestRecord] = []
    sources: set[str] = set()
    problems: list[str] = []
    for number, (request, sent, times, outputs, at) in enumerate(export_requests(data, where)):
        try:
            record, source, problem = _record(request, sent, times, outputs, count_text)
        except ValueError as exc:
            raise PerfError(f"{at} is malformed: {exc}", hint="was it written by perf_analyzer --profile-export-file?") from exc
        records.append(record)
        if problem is not None:
            problems.append(f"request {number}: {problem}")
        elif record.answered:
            sources.add(source)
    records.sort(key=lambda r: r.sent_ns)
    token_source: TokenSource = ("tokenizer" if sources == {"tokenizer"} else "usage" if sources == {"usage"}
                                 else "chunks")
    return OpenAIExport(records, token_source, problems)


def load_openai_records(path: str | os.PathLike[str], *,
                        count_text: Callable[[str], int] | None = None) -> OpenAIExport:
    """Read and reduce an OpenAI-mode profile export file."""
    return records_from_openai_export(read_export(path), where=str(path), count_text=count_text)
