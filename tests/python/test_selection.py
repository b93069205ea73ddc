"""attnkit.backends() and attnkit.explain(): the CLI's --json data as Python objects, every
way of naming a model, and the errors a caller can hit."""

import json
import os
import pathlib
import subprocess

import pytest

import attnkit

REPO = pathlib.Path(__file__).resolve().parents[2]
MODELS = REPO / "models"


def run_cli(cli, *args):
    out = subprocess.run([cli, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_backends_equal_the_cli_json(cli):
    assert attnkit.backends() == run_cli(cli, "backends", "--json")
    assert attnkit.backends("cuda:9.0") == run_cli(cli, "backends", "--platform", "cuda:9.0", "--json")


def test_backends_text_is_the_cli_text(cli):
    out = subprocess.run([cli, "backends", "--platform", "cpu"], check=True, capture_output=True,
                         text=True)
    assert attnkit.backends("cpu", text=True) == out.stdout


def test_backends_report_typed_capabilities():
    report = attnkit.backends("cpu")
    names = [b["name"] for b in report["backends"]]
    assert {"REFERENCE", "CPU_FLASH", "CPU_MLA"} <= set(names)
    flash = next(b for b in report["backends"] if b["name"] == "CPU_FLASH")
    assert flash["runnable"] is True and flash["reasons"] == []
    assert flash["capabilities"]["head_sizes"] == {"min": 16, "max": 576, "multiple_of": 16}


@pytest.mark.parametrize("model", ["gemma-3-1b-it", "deepseek-v2-lite", "whisper-tiny"])
def test_explain_equals_the_cli_json(cli, model):
    config = {"backend_per_kind": {"full_attention": "REFERENCE"}}
    expected = run_cli(cli, "explain", "--model", model, "--platform", "cpu", "--json",
                       "--attention-config", json.dumps(config))
    assert attnkit.explain(model, config, "cpu") == expected


def test_a_model_may_be_a_path_a_dict_or_a_config_object():
    path = MODELS / "llama-3.1-8b-instruct.json"
    by_name = attnkit.explain("llama-3.1-8b-instruct", platform="cpu")
    by_path = attnkit.explain(path, platform="cpu")
    config = json.loads(path.read_text())
    by_dict = attnkit.explain(config, platform="cpu")

    class PretrainedConfigLike:  # what transformers.PretrainedConfig offers
        name_or_path = "meta-llama/Llama-3.1-8B-Instruct"

        def to_json_string(self, use_diff=True):
            assert use_diff is False  # every field, defaults included
            return json.dumps(config)

    by_object = attnkit.explain(PretrainedConfigLike(), platform="cpu")
    layers = [l["backend"] for l in by_name["layers"]]
    for report in (by_path, by_dict, by_object):
        assert [l["backend"] for l in report["layers"]] == layers
        assert report["kv_cache_groups"] == by_name["kv_cache_groups"]
    assert by_object["model"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_backend_per_kind_is_honoured():
    report = attnkit.explain("gemma-3-1b-it", {"backend_per_kind": {"sliding_window": "REFERENCE"}},
                             "cpu")
    kinds = {l["kind"]: l["backend"] for l in report["layers"] if l["is_attention"]}
    assert kinds == {"sliding_window": "REFERENCE", "full_attention": "CPU_FLASH"}
    chosen = {l["chosen_by"] for l in report["layers"] if l["kind"] == "sliding_window"}
    assert chosen == {"per_kind"}


def test_explain_options_reach_the_selection():
    report = attnkit.explain("llama-3.1-8b-instruct", platform="cpu", dtype="float16",
                             kv_cache_dtype="fp8_e4m3", block_size=32)
    assert report["dtype"] == "float16"
    assert report["resolved_kv_cache_dtype"] == "fp8_e4m3"
    assert {g["block_size"] for g in report["kv_cache_groups"]} == {32}
    assert "CPU_FLASH" in attnkit.explain("llama-3.1-8b-instruct", platform="cpu", text=True)


def test_the_described_gpu_platform_selects_cuda_backends():
    report = attnkit.explain("llama-3.1-8b-instruct", platform="cuda:9.0")
    assert {l["backend"] for l in report["layers"]} == {"CUDA_FLASH"}


def test_schema_of_python_reports():
    jsonschema = pytest.importorskip("jsonschema")
    schemas = REPO / "docs" / "schemas"
    jsonschema.validate(attnkit.backends(), json.loads((schemas / "backends.schema.json").read_text()))
    jsonschema.validate(attnkit.explain("gpt-oss-20b"),
                        json.loads((schemas / "explain.schema.json").read_text()))


def test_unknown_model_names_the_embedded_ones():
    with pytest.raises(KeyError) as err:
        attnkit.explain("no-such-model")
    assert isinstance(err.value, attnkit.NotFoundError)
    message = str(err.value)
    assert "no-such-model" in message and "gemma-3-1b-it" in message


def test_bad_config_dict_names_the_field():
    config = json.loads((MODELS / "llama-3.1-8b-instruct.json").read_text())
    del config["num_attention_heads"]
    with pytest.raises(ValueError, match="num_attention_heads"):
        attnkit.explain(config)


def test_bad_values_name_themselves_and_the_valid_ones():
    with pytest.raises(KeyError, match="float13.*bfloat16"):
        attnkit.explain("gemma-3-1b-it", dtype="float13")
    with pytest.raises(ValueError, match="tpu"):
        attnkit.explain("gemma-3-1b-it", platform="tpu")
    with pytest.raises(ValueError, match="block_size must be a positive number of tokens, got 0"):
        attnkit.explain("gemma-3-1b-it", block_size=0)
    with pytest.raises(attnkit.Error, match="NO_SUCH_BACKEND"):
        attnkit.explain("gemma-3-1b-it", {"backend": "NO_SUCH_BACKEND"})
    with pytest.raises(attnkit.UnsupportedError, match="CPU_MLA"):
        attnkit.explain("gemma-3-1b-it", {"backend": "CPU_MLA"}, "cpu")
    with pytest.raises(TypeError, match="config dict"):
        attnkit.explain(42)
    with pytest.raises(TypeError, match="attention_config"):
        attnkit.explain("gemma-3-1b-it", attention_config=3)


def test_the_environment_backend_applies_as_on_the_command_line(monkeypatch):
    monkeypatch.setenv("ATTNKIT_ATTENTION_BACKEND", "REFERENCE")
    report = attnkit.explain("llama-3.1-8b-instruct", platform="cpu")
    assert {l["backend"] for l in report["layers"]} == {"REFERENCE"}
    assert {l["chosen_by"] for l in report["layers"]} == {"env"}


def test_embedded_models_are_listed():
    names = attnkit.embedded_models()
    assert "gemma-3-1b-it" in names and names == sorted(names)
    assert os.path.exists(MODELS / f"{names[0]}.json")
