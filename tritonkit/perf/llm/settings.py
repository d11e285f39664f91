"""How an LLM load test is asked for: one frozen settings value, the contract between CLI and library.

``tritonkit perf run MODEL --llm`` builds an :class:`LLMSettings` from its options and hands it to
:func:`tritonkit.perf.pipeline.run_llm_perf`; a library user builds the same value. Text fields keep
the command line's spelling (``"128:16"``, ``"2s"``, ``"ttft=500ms"``) and are read here, once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tritonkit._values import (
    PROMPTS,
    REQUESTS,
    SECONDS,
    SECONDS_OR_ZERO,
    SEED,
    TOKENS,
    bounded,
    check_fields,
    excerpt,
)
from tritonkit.errors import ConfigError
from tritonkit.repository.units import to_microseconds

if TYPE_CHECKING:
    from tritonkit.perf.judge.sla import SLA
    from tritonkit.perf.llm.loadtest import LLMPlan
    from tritonkit.perf.llm.metrics import GoodputSLO
    from tritonkit.perf.llm.openai import OpenAITarget
    from tritonkit.perf.llm.prompts import Prompt
    from tritonkit.perf.llm.tokens import TokenCounter

__all__ = ["LLMSettings", "parse_goodput"]


@dataclass(frozen=True)
class LLMSettings:
    """One LLM load test's knobs.

    ``prompts``: a JSONL prompt file (else synthetic prompts of ``input_tokens`` /
    ``output_tokens`` = ``MEAN[:STDDEV]``, ``num_prompts`` of them from ``seed``). ``traffic``: a
    traffic shape (``'spike:2/s,20/s,5,3,10'``…) instead of the ``concurrency`` levels
    (``"1,2,4"`` or ``"1:16"``), ``requests`` per level. ``stream``: ``None`` streams exactly when
    the model is decoupled. ``client_deadline`` (``'2s'``) and ``goodput``
    (``'ttft=500ms,itl=40ms'``; default: the SLA's bounds). ``settle_s``: how long the server is
    still watched after a shape; ``timeout_s``: the limit of one perf_analyzer step.
    ``interface``: the request interface by name (``text``, ``ids``, ``vllm``, ``text_io``,
    ``generic``; default: chosen from the model's inputs). ``tokenizer``: the model's
    ``tokenizer.json`` (or its folder): prompt lengths are then its tokens, not words; without
    one, a TensorRT-LLM ensemble / BLS's own is found (:meth:`with_served_tokenizer`, from the
    server or ``repo``), ``tokenizer_from`` saying where. ``trtllm_version``: the TensorRT-LLM
    line requests are written for (default: read from the served models). ``token_output``: the
    model's output whose elements are its tokens (default: ``output_ids`` or an integer output named
    like ids, else one token per response with new output). ``protocol``: ``grpc`` (Triton's KServe
    stream) or ``openai`` (an OpenAI-compatible HTTP server: ``endpoint``, default
    ``v1/chat/completions``, and ``api_key_env``, the environment variable holding its key; see
    :meth:`openai_target`). ``shared_prefix``: ``"N:L"``, each request's prompt starts with one of N
    system prompts of L tokens, shared on purpose (a prefix cache serves them after their first use).
    ``client_cpus``: the cores the load generator runs on (``"1"``, ``"2-3"``), away from an engine's.
    """

    prompts: Path | None = None
    input_tokens: str = "128"
    output_tokens: str = "64"
    num_prompts: int = bounded(100, PROMPTS)
    seed: int = bounded(0, SEED)
    traffic: str | None = None
    requests: int = bounded(32, REQUESTS)
    stream: bool | None = None
    client_deadline: str | None = None
    goodput: str | None = None
    settle_s: float = bounded(2.0, SECONDS_OR_ZERO)
    concurrency: str = "1"
    timeout_s: float = bounded(600.0, SECONDS)
    interface: str | None = None
    tokenizer: Path | None = None
    tokenizer_from: str | None = None
    trtllm_version: str | None = None
    repo: Path | None = None
    token_output: str | None = None
    protocol: str = "grpc"
    endpoint: str | None = None
    api_key_env: str | None = None
    shared_prefix: str | None = None
    client_cpus: str | None = None

    def __post_init__(self) -> None:
        """Every value checked as it is given, the text ones read once here (a replay log is read
        when the run starts)."""
        from tritonkit.perf.llm.engine import cpu_list
        from tritonkit.perf.llm.shapes import parse_shape

        check_fields(self)
        self.levels()
        _mean_spread(self.input_tokens, "--input-tokens")
        _mean_spread(self.output_tokens, "--output-tokens")
        if self.traffic is not None and not self.traffic.strip().lower().startswith("replay:"):
            parse_shape(self.traffic)
        if self.client_deadline is not None:
            _ms(self.client_deadline, "--client-deadline")
        if self.goodput is not None:
            parse_goodput(self.goodput)
        if self.protocol not in ("grpc", "openai"):
            raise ConfigError(f"--llm speaks gRPC or OpenAI's HTTP API, not {excerpt(self.protocol)}",
                              hint="use --protocol grpc (Triton) or --protocol openai")
        self.openai_target()
        self.system_prompts()
        if self.client_cpus is not None:
            cpu_list(self.client_cpus, "--client-cpus")

    def system_prompts(self) -> tuple[int, int] | None:
        """``shared_prefix`` read: (how many system prompts, their length in tokens), or ``None``."""
        if self.shared_prefix is None:
            return None
        count, _, length = self.shared_prefix.partition(":")
        return (int(PROMPTS.parse(count, "--shared-prefix count")),
                int(replace(TOKENS, integer=True).parse(length, "--shared-prefix length")))

    def openai_target(self) -> OpenAITarget | None:
        """The OpenAI endpoint asked for (``None`` over gRPC); checked, the key not yet read."""
        from tritonkit.perf.llm.openai import OpenAITarget

        if self.protocol != "openai":
            return None
        return OpenAITarget(endpoint=self.endpoint or "v1/chat/completions", api_key_env=self.api_key_env,
                            stream=self.stream is not False)

    def levels(self) -> tuple[int, ...]:
        """The concurrency levels (``(1,)`` under a traffic shape, which sets its own load)."""
        from tritonkit.perf.measure.plan import parse_levels

        if self.traffic:
            return (1,)
        return tuple(int(v) for v in parse_levels(self.concurrency or "1", "concurrency", "--concurrency"))

    def load_prompts(self) -> tuple[list[Prompt], str]:
        """The prompts to send and a line saying where they came from."""
        from tritonkit.perf.llm.prompts import load_prompts, synthetic_prompts

        counter = self.token_counter()
        record = self.tokenizer_record()
        counted = f"; lengths counted by the tokenizer {record[0]}, {record[1]}" if record else "; lengths in words"
        if self.prompts is not None:
            return load_prompts(self.prompts, tokenizer=counter), f"{self.prompts}{counted}"
        isl, isl_sd = _mean_spread(self.input_tokens, "--input-tokens")
        osl, osl_sd = _mean_spread(self.output_tokens, "--output-tokens")
        prompts = synthetic_prompts(self.num_prompts, input_tokens_mean=isl, input_tokens_stddev=isl_sd,
                                    output_tokens_mean=osl, output_tokens_stddev=osl_sd, seed=self.seed,
                                    tokenizer=counter)
        return prompts, (f"synthetic (seed {self.seed}, {self.num_prompts} prompts, input {self.input_tokens}, "
                         f"output {self.output_tokens} tokens{counted})")

    def token_counter(self) -> TokenCounter | None:
        """The model's tokenizer as a counter (``None`` without ``tokenizer``)."""
        from tritonkit.perf.llm.tokens import load_tokenizer

        return load_tokenizer(self.tokenizer) if self.tokenizer is not None else None

    def with_served_tokenizer(self, model: str, url: str) -> LLMSettings:
        """These settings with the served pipeline's tokenizer when none was given (see
        :func:`~tritonkit.perf.llm.served.find_tokenizer`); unchanged when the model names none."""
        from tritonkit.perf.llm.served import find_tokenizer

        if self.tokenizer is not None or self.protocol == "openai":
            return self
        found = find_tokenizer(model, url, repo=self.repo)
        return self if found is None else replace(self, tokenizer=found.path, tokenizer_from=found.origin)

    def tokenizer_record(self) -> tuple[str, str] | None:
        """(the tokenizer's path, where it came from) for the result's metadata, or ``None``."""
        if self.tokenizer is None:
            return None
        return str(self.tokenizer), self.tokenizer_from or "given with --tokenizer"

    def plan(self, sla: SLA | None) -> LLMPlan:
        """The :class:`~tritonkit.perf.llm.loadtest.LLMPlan` these settings ask for (checked)."""
        from tritonkit.perf.llm.judge import goodput_slo_from_sla
        from tritonkit.perf.llm.loadtest import LLMPlan
        from tritonkit.perf.llm.shapes import parse_shape

        shape = parse_shape(self.traffic) if self.traffic else None
        goodput = parse_goodput(self.goodput) if self.goodput else goodput_slo_from_sla(sla)
        deadline = _ms(self.client_deadline, "--client-deadline") if self.client_deadline else None
        return LLMPlan(concurrency=self.levels(), requests_per_level=self.requests, shape=shape, goodput_slo=goodput,
                       client_deadline_ms=deadline, settle_s=self.settle_s, step_timeout_s=self.timeout_s,
                       salted=self.prompts is None, shared_prefix=self.system_prompts(), client_cpus=self.client_cpus)

    def describe_load(self) -> str:
        """The load in words (``--dry-run``)."""
        return self.traffic or f"concurrency {', '.join(map(str, self.levels()))} × {self.requests} requests"


#: A spread of prompt lengths: none, up to the longest prompt.
_SPREAD = replace(TOKENS, low_open=False)


def _mean_spread(text: str, what: str) -> tuple[float, float]:
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(?::\s*(\d+(?:\.\d*)?)\s*)?", text)
    if match is None:
        raise ConfigError(f"{what} {excerpt(text)} is not MEAN[:STDDEV]", hint="e.g. 128 or 128:16 (tokens)")
    mean, spread = float(match.group(1)), float(match.group(2) or 0.0)
    TOKENS.check(mean, f"{what} mean")
    _SPREAD.check(spread, f"{what} spread")
    return mean, spread


def _ms(text: str, what: str) -> float:
    return to_microseconds(text.strip(), field=what) / 1000.0


def parse_goodput(text: str) -> GoodputSLO:
    """``'ttft=500ms,itl=40ms,latency=2s'`` → ``GoodputSLO``."""
    from tritonkit.perf.llm.metrics import GoodputSLO

    names = {"ttft": "ttft_ms", "itl": "itl_ms", "latency": "latency_ms"}
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in names:
            raise ConfigError(f"cannot read goodput objective {excerpt(part)}",
                              hint="use ttft=500ms,itl=40ms,latency=2s")
        values[names[key]] = _ms(value, f"--goodput {key}")
    return GoodputSLO(**values)
