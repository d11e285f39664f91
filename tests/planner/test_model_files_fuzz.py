"""A mutation fuzz of the model files the planner reads, through ``tritonkit plan --hf-config … --json``.

Real configs (tests/data/planner) are mutated the ways files break and exporters misbehave: a field
the readers use (:data:`tritonkit._model_files.BOUNDS`, or one of the config's own) set to a
hostile value (``1e308``, a 400-digit whole number, ``NaN``, ``-1``, ``0.5``, ``true``, text, a
list, an object), removed, moved into ``text_config``, or the text cut short or broken. Each run of
the command must end in a documented status, 0 (planned) or 2 (refused, one ``error:`` line naming
the file or the field and a ``fix:`` line), and never in a traceback.

Seeded (``derandomize``) and bounded: :data:`EXAMPLES` cases, each a fraction of a second in-process
(``TRITONKIT_FUZZ_EXAMPLES`` runs more).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.paths import DATA
from tests.support.trtllm import engine_config_json
from tritonkit._model_files import BOUNDS
from tritonkit.builders.trtllm.engine import read_engine_config
from tritonkit.cli import main
from tritonkit.errors import ConfigError

EXAMPLES = int(os.environ.get("TRITONKIT_FUZZ_EXAMPLES", "300"))
BASES = {name: json.loads((DATA / "planner" / f"{name}.json").read_text()) for name in
         ("llama-3-8b", "mixtral-8x7b", "deepseek-v3")}
HUGE = "1" + "0" * 400  # a whole number past a float's range, written as JSON text
HOSTILE = st.sampled_from(["1e308", "-1e308", HUGE, "NaN", "Infinity", "-Infinity", "1e999", "-1", "0", "0.5",
                           "4096.0", "2147483648", "true", "null", '"4096"', "[]", "[1, 2]", "{}", '{"a": 1}'])
FIELDS = sorted({*BOUNDS, *(key for base in BASES.values() for key in base)})


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, str | None]:
    """The text of a mutated config, and the field the mutation touched (``None`` for a text mutation)."""
    config: dict[str, Any] = dict(BASES[draw(st.sampled_from(sorted(BASES)))])
    field = draw(st.sampled_from(FIELDS))
    how = draw(st.sampled_from(["set", "set", "set", "remove", "text_config", "nested", "cut", "junk"]))
    if how == "remove":
        config.pop(field, None)
        return json.dumps(config), field
    if how in ("cut", "junk"):
        text = json.dumps(config)
        at = draw(st.integers(0, len(text)))
        junk = draw(st.sampled_from(["", "\0", "}", "1e999", "\udcff"])) if how == "junk" else ""
        return text[:at] + junk + (text[at:] if how == "junk" else ""), None
    marker = "\"__value__\""
    if how == "text_config":
        config = {"architectures": config.get("architectures"), "text_config": {**config, field: "__value__"}}
    elif how == "nested":
        config["quantization_config"] = {**config.get("quantization_config", {}), field: "__value__"}
    else:
        config[field] = "__value__"
    return json.dumps(config).replace(marker, draw(HOSTILE)), field


@settings(derandomize=True, max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated())
def test_a_mutated_config_is_planned_or_refused_naming_the_file_or_field(case: tuple[str, str | None]) -> None:
    text, field = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.json"
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        result = CliRunner().invoke(main, ["plan", "--hf-config", str(path), "--gpu", "H100-80GB", "--json"])
    out = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (text, out, result.exception)
    assert "Traceback" not in out, (text, out)
    assert result.exit_code in (0, 2), (text, out)
    if result.exit_code == 2:
        errors = [line for line in out.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "\n  fix:" in out, (text, out)
        assert str(path) in errors[0] or (field is not None and field in errors[0]), (text, out)
    else:
        assert json.loads(out)["kind"] == "llm", (text, out)


QUANT_FIELDS = ("quant_algo", "kv_cache_quant_algo", "group_size", "exclude_modules", "bits", "num_bits")
LLAMA_70B_FP8 = DATA / "planner" / "llama-3.1-70b-instruct-fp8"


@settings(derandomize=True, max_examples=EXAMPLES // 3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(QUANT_FIELDS), value=st.one_of(HOSTILE, st.sampled_from(['"FP8"', '"NVFP4"', '"W4A16_AWQ"'])),
       where=st.sampled_from(["quantization", "top", "whole"]))
def test_a_mutated_hf_quant_config_is_planned_or_refused_naming_the_file(field: str, value: str, where: str) -> None:
    """ModelOpt's ``hf_quant_config.json`` beside NVIDIA's FP8 Llama-3.1-70B: its fields, or the whole
    ``quantization`` object, hostile."""
    quant: dict[str, Any] = json.loads((LLAMA_70B_FP8 / "hf_quant_config.json").read_text())
    if where == "whole":
        quant["quantization"] = "__v__"
    else:
        (quant["quantization"] if where == "quantization" else quant)[field] = "__v__"
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_text((LLAMA_70B_FP8 / "config.json").read_text())
        (Path(folder) / "hf_quant_config.json").write_text(json.dumps(quant).replace('"__v__"', value))
        result = CliRunner().invoke(main, ["plan", "--hf-config", folder, "--gpu", "H200", "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), (value, result.output)
    assert result.exit_code in (0, 2) and "Traceback" not in result.output, result.output
    if result.exit_code == 2:
        assert result.output.startswith("error: ") and "hf_quant_config.json" in result.output, result.output


def test_the_repro_of_a_number_past_a_floats_range_exits_2_naming_hidden_size(tmp_path: Path) -> None:
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 1e308, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
              "vocab_size": 128256, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
    for name, value in (("hidden_size", "1e+308"), ("num_hidden_layers", "1e+308"), ("vocab_size", HUGE)):
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**config, "hidden_size": 4096, name: "__v__"}).replace('"__v__"', value))
        result = CliRunner().invoke(main, ["plan", "--hf-config", str(path), "--gpu", "H100-80GB", "--json"])
        assert result.exit_code == 2, result.output
        error = result.output.splitlines()[0]
        assert error.startswith("error: ") and f"'{name}'" in error and str(path) in error, result.output
        assert "Traceback" not in result.output


@settings(derandomize=True, max_examples=EXAMPLES // 3, deadline=None)
@given(where=st.sampled_from([("build_config", "max_batch_size"), ("build_config", "max_seq_len"),
                              ("build_config", "max_num_tokens"), ("pretrained_config", "hidden_size")]),
       value=HOSTILE)
def test_a_trtllm_engine_config_reads_or_is_refused_naming_the_field(where: tuple[str, str], value: str) -> None:
    """The engine folder's config.json goes through the same check (``build trtllm``'s engine check reads it)."""
    section, field = where
    config = engine_config_json()
    config[section][field] = "__v__"
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "config.json").write_text(json.dumps(config).replace('"__v__"', value))
        try:
            info = read_engine_config(folder)
        except ConfigError as exc:
            assert f"'{section}.{field}'" in str(exc) or "not a TensorRT-LLM engine config" in str(exc), str(exc)
        else:
            assert info.max_batch_size >= 1 and info.max_seq_len >= 1
