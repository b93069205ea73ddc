"""Hugging Face transformers models with attn_implementation="attnkit" against transformers'
own attention on the same weights.

Each CPU test builds a small model from a real architecture (Llama, Qwen3, Gemma-3 with
sliding and full layers, GPT-OSS with learned sinks and a tiny MoE). The weights are seeded
and random. Both copies greedily generate from a left-padded batch of four prompts of
different lengths, and the test compares the tokens and every step's logits. The GPU tests
do the same at the real head sizes of models/*.json, in bfloat16.

Tolerances: on the CPU in float32, CPU_FLASH and transformers' attention differ only in
summation order, so the logits must agree to LOGITS_ATOL and the tokens exactly. In bfloat16
on a GPU, two logits within rounding can swap the greedy token. From there the sequences
diverge legitimately, so the logits are compared up to that step."""

import copy
import gc
import json
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="the transformers integration needs PyTorch")
transformers = pytest.importorskip("transformers", reason="the integration needs transformers")

import attnkit  # noqa: E402
import attnkit.integrations.transformers as akt  # noqa: E402


MODELS = pathlib.Path(__file__).resolve().parents[2] / "models"
LOGITS_ATOL = 1e-4  # float32 CPU: |logits| ~ 1, attention outputs agree to ~1e-6
NEW_TOKENS = 24
PROMPT_LENGTHS = [40, 7, 23, 31]  # the sliding window is 16: some prompts exceed it
SLIDING_WINDOW = 16

# transformers runs GPT-OSS's sinks only in its eager (and flash/flex) attention: the model
# declares _supports_sdpa = False, so eager is its reference.
REFERENCE_ATTENTION = {"gpt_oss": "eager"}

COMMON = dict(
    vocab_size=1000,
    max_position_embeddings=512,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=None,  # every row generates NEW_TOKENS tokens
    # Wider than the default 0.02 so that random logits are not nearly uniform: a greedy
    # choice between logits closer than float32 rounding would be a coin toss.
    initializer_range=0.1,
)


def small_configs():
    """One small config per architecture, with the features attnkit must honour."""
    from transformers import Gemma3TextConfig, GptOssConfig, LlamaConfig, Qwen3Config

    return {
        "llama": LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                             num_attention_heads=4, num_key_value_heads=2, **COMMON),
        "qwen3": Qwen3Config(hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=32, **COMMON),
        "gemma3": Gemma3TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                   query_pre_attn_scalar=24, sliding_window=SLIDING_WINDOW,
                                   sliding_window_pattern=2, **COMMON),
        "gpt_oss": GptOssConfig(hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                num_local_experts=4, num_experts_per_tok=2,
                                sliding_window=SLIDING_WINDOW, **COMMON),
    }


def model_pair(config, reference, dtype=torch.float32, device="cpu", seed=0):
    """The same seeded weights twice: with attnkit's attention and with `reference`."""
    torch.manual_seed(seed)
    with torch.device(device):
        ours = transformers.AutoModelForCausalLM.from_config(
            copy.deepcopy(config), attn_implementation="attnkit", dtype=dtype)
        theirs = transformers.AutoModelForCausalLM.from_config(
            copy.deepcopy(config), attn_implementation=reference, dtype=dtype)
    theirs.load_state_dict(ours.state_dict())
    return ours.eval(), theirs.eval()


def left_padded_batch(lengths, vocab_size, device="cpu", seed=1):
    """Random prompts of `lengths` tokens, left-padded with pad id 0, and their mask."""
    g = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, n in enumerate(lengths):
        ids[row, width - n:] = torch.randint(3, vocab_size, (n,), generator=g)
        mask[row, width - n:] = 1
    return ids.to(device), mask.to(device)


def generate(model, ids, mask, new_tokens=NEW_TOKENS, **kwargs):
    return model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False,
                          return_dict_in_generate=True, output_logits=True, **kwargs)


@pytest.fixture(autouse=True)
def _free_stacks():
    """Frees each test's stacks before the next: a model keeps no cache, but a failed
    generate() leaves one in the traceback."""
    yield
    gc.collect()


@pytest.mark.parametrize("arch", ["llama", "qwen3", "gemma3", "gpt_oss"])
@pytest.mark.parametrize("attention_config", [None, {"backend_per_kind": {"sliding_window": "REFERENCE"}}],
                         ids=["auto", "sliding-REFERENCE"])
def test_greedy_generation_matches_transformers(arch, attention_config):
    config = small_configs()[arch]
    ours, theirs = model_pair(config, REFERENCE_ATTENTION.get(arch, "sdpa"))
    if arch == "gpt_oss":  # sinks of a size that matters, taken into the stack per layer
        for layer in ours.model.layers:
            layer.self_attn.sinks.data.uniform_(-2, 2)
        theirs.load_state_dict(ours.state_dict())
    ids, mask = left_padded_batch(PROMPT_LENGTHS, config.vocab_size)
    cache = akt.PagedCache(ours, attention_config=attention_config, kv_cache_bytes=8 << 20)

    got = generate(ours, ids, mask, past_key_values=cache)
    want = generate(theirs, ids, mask)

    assert torch.equal(got.sequences, want.sequences)
    for step, (a, b) in enumerate(zip(got.logits, want.logits, strict=True)):
        torch.testing.assert_close(a, b, atol=LOGITS_ATOL, rtol=0, msg=lambda m: f"step {step}: {m}")

    executed = cache.executed_backends()
    assert sorted(executed) == list(range(cache.stack.num_groups))  # every group's layers ran
    if arch in ("gemma3", "gpt_oss"):
        assert cache.stack.num_groups == 2  # sliding layers and full layers
    per_kind = (attention_config or {}).get("backend_per_kind", {})
    for layer in cache.stack.layers():
        assert executed[layer["group"]] == [per_kind.get(layer["kind"], "CPU_FLASH")], (layer, executed)


def test_sampling_with_several_sequences_per_prompt_matches():
    """Fixed rows include num_return_sequences: the prompts are repeated before the cache
    sees them. Same seed, same logits: the same samples."""
    config = small_configs()["llama"]
    ours, theirs = model_pair(config, "sdpa")
    ids, mask = left_padded_batch(PROMPT_LENGTHS[:2], config.vocab_size)
    kwargs = dict(attention_mask=mask, max_new_tokens=16, do_sample=True, num_return_sequences=2)
    torch.manual_seed(5)
    got = ours.generate(ids, past_key_values=akt.PagedCache(ours, kv_cache_bytes=8 << 20), **kwargs)
    torch.manual_seed(5)
    want = theirs.generate(ids, **kwargs)
    assert got.shape == (4, ids.shape[1] + 16)
    assert torch.equal(got, want)


def test_forward_steps_scatter_zeros_at_pads_and_match_a_dynamic_cache():
    """model(...) step by step, as generate() drives it: the same logits as transformers with
    its DynamicCache, and the attention output of every pad column zero."""
    config = small_configs()["gemma3"]
    ours, theirs = model_pair(config, "sdpa")
    ids, mask = left_padded_batch([20, 3, 11], config.vocab_size)
    attention_out = []
    ours.model.layers[0].self_attn.o_proj.register_forward_pre_hook(
        lambda module, args: attention_out.append(args[0]))
    cache = akt.PagedCache(ours, kv_cache_bytes=8 << 20)
    dynamic = transformers.DynamicCache(config=theirs.config)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        for step in range(4):
            a = ours(ids, attention_mask=mask, position_ids=positions, past_key_values=cache).logits
            b = theirs(ids, attention_mask=mask, position_ids=positions, past_key_values=dynamic).logits
            valid = mask[:, -ids.shape[1]:].bool()
            torch.testing.assert_close(a[valid], b[valid], atol=LOGITS_ATOL, rtol=0)
            assert not attention_out[-1][~valid].any() and attention_out[-1][valid].abs().sum() > 0
            ids = a[:, -1:].argmax(-1)
            mask = torch.cat([mask, torch.ones_like(ids)], dim=1)
            positions = positions[:, -1:] + 1
    assert cache.get_seq_length() == 20 + 3
    assert [cache.stack.num_tokens(r) for r in cache.requests] == [23, 6, 14]


def test_generate_without_a_paged_cache_says_what_to_pass():
    config = small_configs()["llama"]
    ours, _ = model_pair(config, "sdpa")
    ids, mask = left_padded_batch([5, 3], config.vocab_size)
    what_to_pass = r"past_key_values=attnkit\.integrations\.transformers\.PagedCache\(model\)"
    with pytest.raises(attnkit.InvalidArgumentError, match=what_to_pass):
        ours.generate(ids, attention_mask=mask, max_new_tokens=2)
    with pytest.raises(attnkit.InvalidArgumentError, match="PagedCache"):
        ours(ids, attention_mask=mask, use_cache=False)


def test_beam_search_is_refused_clearly():
    config = small_configs()["llama"]
    ours, _ = model_pair(config, "sdpa")
    ids, mask = left_padded_batch([5, 3], config.vocab_size)
    cache = akt.PagedCache(ours, kv_cache_bytes=8 << 20)
    with pytest.raises(attnkit.UnsupportedError, match="cannot reorder its rows.*not beam search"):
        ours.generate(ids, attention_mask=mask, max_new_tokens=3, num_beams=2, past_key_values=cache)


def test_a_module_attnkit_reads_differently_is_refused_naming_both_values():
    config = small_configs()["gpt_oss"]
    ours, _ = model_pair(config, "eager")
    ours.model.layers[1].self_attn.scaling = 0.5
    ids, mask = left_padded_batch([5, 3], config.vocab_size)
    cache = akt.PagedCache(ours, kv_cache_bytes=8 << 20)
    both = r"layer 1: the model's module applies scaling 0\.5, attnkit's layer 0\.25"
    with pytest.raises(attnkit.InvalidArgumentError, match=both):
        ours.generate(ids, attention_mask=mask, max_new_tokens=1, past_key_values=cache)
    assert cache.executed_backends() == {0: ["CPU_FLASH"]}  # layer 0 ran, layer 1 did not


def test_only_layers_that_ran_are_reported_and_requests_are_freed():
    config = small_configs()["gemma3"]
    ours, _ = model_pair(config, "sdpa")
    stack = attnkit.AttentionStack(ours.config, dtype="float32", kv_cache_bytes=8 << 20)
    sliding_group = {l["group"] for l in stack.layers() if l["kind"] == "sliding_window"}
    ids, mask = left_padded_batch([9, 4, 6], config.vocab_size)

    cache = akt.PagedCache(ours, stack=stack)
    assert cache.executed_backends() == {}
    ours.config.num_hidden_layers = 1  # transformers runs layers[:num_hidden_layers]: the first, sliding
    with pytest.raises(attnkit.UnsupportedError, match=r"no backward: run .* under torch.no_grad\(\)"):
        ours(ids, attention_mask=mask, past_key_values=akt.PagedCache(ours, stack=stack))
    with torch.no_grad():
        ours(ids, attention_mask=mask, past_key_values=cache)
    assert set(cache.executed_backends()) == sliding_group
    ours.config.num_hidden_layers = config.num_hidden_layers

    generate(ours, ids, mask, new_tokens=3, past_key_values=akt.PagedCache(ours, stack=stack))
    gc.collect()  # that cache is gone, and its requests with it
    assert stack.num_requests == 3  # `cache` still holds its three rows
    cache.reset()
    assert stack.num_requests == 0 and cache.get_seq_length() == 0 and cache.executed_backends() == {}
    generate(ours, ids, mask, new_tokens=2, past_key_values=cache)  # a reset cache starts over
    assert stack.num_requests == 3
    del cache
    gc.collect()
    assert stack.num_requests == 0


# --- GPU: real head sizes, bfloat16 ---------------------------------------------------------

GPU_MODELS = {  # config file -> layers kept (Gemma-3 keeps one full layer after five sliding)
    "llama-3.1-8b-instruct": 2,
    "qwen3-8b": 2,
    "gemma-3-1b-it": 6,
    "gpt-oss-20b": 2,
}
GPU_VOCAB = 32000  # keeps embeddings and logits small; the attention is the real one
TORCH_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs PyTorch built with CUDA")
# bfloat16 logits are judged against a float32 run of the same weights: attnkit's error may
# be at most BF16_ERROR_RATIO times transformers' own bfloat16 error, plus BF16_LOGITS_SLACK
# (both err by bfloat16 rounding of activations; GPT-OSS's router amplifies it, so a fixed
# bound between the two bfloat16 runs would be too tight for it and too loose for the rest).
BF16_ERROR_RATIO = 1.5
BF16_LOGITS_SLACK = 0.02


def real_config(name, layers):
    """models/<name>.json as a transformers config, cut to `layers` layers and GPU_VOCAB."""
    data = json.loads((MODELS / f"{name}.json").read_text())
    data.pop("quantization_config", None)  # random weights, not an mxfp4 checkpoint
    data["num_hidden_layers"] = layers
    if "layer_types" in data:
        data["layer_types"] = data["layer_types"][:layers]
    data.update(vocab_size=GPU_VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=None)
    if "num_local_experts" in data:
        # Every expert on every token: a top-k router's choice is discrete, and with random
        # weights a bfloat16 rounding flips near-tied experts, which would measure routing,
        # not attention. With all experts the output is continuous in the attention's.
        data["num_experts_per_tok"] = data["num_local_experts"]
    model_type = data.pop("model_type")
    return transformers.AutoConfig.for_model(model_type, **data)


# The swap moves the full_attention layers to CUDA_PAGED (the automatic selection puts every
# layer of these models on CUDA_FLASH); gpt-oss's full layers, with learned sink logits, are
# full_attention too, as in vLLM.
FULL_KIND = "full_attention"


@pytest.mark.gpu
@TORCH_CUDA
@pytest.mark.parametrize("swap", [False, True], ids=["auto", "full-CUDA_PAGED"])
@pytest.mark.parametrize("name", sorted(GPU_MODELS))
def test_real_sizes_in_bfloat16_on_cuda(name, swap):
    config = real_config(name, GPU_MODELS[name])
    reference = REFERENCE_ATTENTION.get(config.model_type, "sdpa")
    ours, theirs = model_pair(config, reference, dtype=torch.bfloat16, device="cuda")
    window = getattr(config, "sliding_window", None)
    lengths = [window + 40 if window else 300, 17, 129, 64]  # a prompt beyond the window
    ids, mask = left_padded_batch(lengths, config.vocab_size, device="cuda")
    full_kind = FULL_KIND
    attention_config = {"backend_per_kind": {full_kind: "CUDA_PAGED"}} if swap else None
    cache = akt.PagedCache(ours, attention_config=attention_config, kv_cache_bytes=2 << 30)

    got = generate(ours, ids, mask, new_tokens=32, past_key_values=cache)
    want = generate(theirs, ids, mask, new_tokens=32)

    executed = cache.executed_backends()
    print(f"\n{name} ({'swap' if swap else 'auto'}): executed backend per KV-cache group: {executed}")
    for layer in cache.stack.layers():
        expected = "CUDA_PAGED" if swap and layer["kind"] == full_kind else "CUDA_FLASH"
        assert expected in executed[layer["group"]], (layer, executed)
    # float32 truth: the same weights with transformers' attention in float32, teacher-forced
    # on attnkit's tokens (positions from the mask, as generate() gives them).
    prompt = ids.shape[1]
    truth_model = copy.deepcopy(theirs).float()
    full_mask = torch.cat([mask, torch.ones_like(got.sequences[:, prompt:])], dim=1)
    positions = (full_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        truth = truth_model(input_ids=got.sequences[:, :-1], attention_mask=full_mask[:, :-1],
                            position_ids=positions[:, :-1]).logits.float()
    del truth_model
    for row in range(len(lengths)):
        flips = (got.sequences[row, prompt:] != want.sequences[row, prompt:]).nonzero().flatten().tolist()
        # Up to and including the first flip both saw the same tokens, so the same truth.
        last = flips[0] if flips else len(want.logits) - 1
        for step in range(last + 1):
            exact = truth[row, prompt - 1 + step]
            ours_error = (got.logits[step][row].float() - exact).abs().max().item()
            theirs_error = (want.logits[step][row].float() - exact).abs().max().item()
            assert ours_error <= BF16_ERROR_RATIO * theirs_error + BF16_LOGITS_SLACK, (
                f"{name} row {row} step {step}: attnkit's bfloat16 logits are {ours_error:.4f} "
                f"from float32, transformers' {theirs_error:.4f}")
        if flips:  # attnkit's token was a near-tie in the float32 logits
            exact = truth[row, prompt - 1 + last]
            chosen = got.sequences[row, prompt + last]
            theirs_error = (want.logits[last][row].float() - exact).abs().max().item()
            assert exact.max() - exact[chosen] <= 2 * (theirs_error + BF16_LOGITS_SLACK), (
                name, row, last)
