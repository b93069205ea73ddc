"""attnkit.AttentionStack on the CPU with NumPy arrays through DLPack: prefill and decode of
several requests against a dense NumPy attention on the same random inputs, the cache as
zero-copy views, and every error path a caller can hit."""

import math

import numpy as np
import pytest

import attnkit

TOL = 2e-5  # float32 CPU_FLASH against float64 dense attention, |x| <= 1


class DenseModel:
    """Keeps every request's keys and values per layer and attends densely (float64), as the
    paged cache should: causal, GQA, sliding window, sinks."""

    def __init__(self):
        self.keys, self.values = {}, {}

    def attend(self, layer, rid, q, k, v, sinks=None):
        key = (layer["index"], rid)
        self.keys[key] = np.concatenate([self.keys.get(key, k[:0]), k]).astype(np.float64)
        self.values[key] = np.concatenate([self.values.get(key, v[:0]), v]).astype(np.float64)
        keys, values = self.keys[key], self.values[key]
        n, first = len(keys), len(keys) - len(q)
        group = layer["num_heads"] // layer["num_kv_heads"]
        out = np.zeros((len(q), layer["num_heads"], layer["head_size_v"]))
        window = layer["sliding_window"]
        for t in range(len(q)):
            pos = first + t
            lo = max(0, pos - window + 1) if window else 0
            for h in range(layer["num_heads"]):
                s = keys[lo:pos + 1, h // group] @ q[t, h].astype(np.float64) * layer["scale"]
                m = s.max() if sinks is None else max(s.max(), sinks[h])
                p = np.exp(s - m)
                denom = p.sum() + (0.0 if sinks is None else math.exp(sinks[h] - m))
                out[t, h] = p @ values[lo:pos + 1, h // group] / denom
        return out


def rows(rng, n, heads, width, dtype=np.float32):
    return rng.uniform(-1, 1, (n, heads, width)).astype(dtype)


def run_steps(stack, steps, rng, layers=None, sinks=None, dtype=np.float32, tol=TOL):
    """steps: per step, {request_id: new tokens}; checks every layer's output of every step."""
    dense = DenseModel()
    computed = {}
    layers = layers or stack.layers()
    for step in steps:
        for rid in step:
            if rid not in computed:
                stack.add_request(rid)
                computed[rid] = 0
        stack.plan_step([(rid, computed[rid], n) for rid, n in step.items()])
        total = sum(step.values())
        for layer in layers:
            h, hk, d, dv = (layer[f] for f in ("num_heads", "num_kv_heads", "head_size", "head_size_v"))
            q, k, v = rows(rng, total, h, d, dtype), rows(rng, total, hk, d, dtype), rows(rng, total, hk, dv, dtype)
            out = np.full((total, h, dv), np.nan, dtype=dtype)  # every row must be written
            stack.forward(layer["index"], q, k, v, out)
            start = 0
            for rid, n in step.items():
                expected = dense.attend(layer, rid, q[start:start + n], k[start:start + n],
                                        v[start:start + n], sinks)
                np.testing.assert_allclose(out[start:start + n], expected, atol=tol, rtol=0,
                                           err_msg=f"layer {layer['index']} request {rid}")
                start += n
        for rid, n in step.items():
            computed[rid] += n
    return computed


def test_prefill_then_decode_matches_dense_attention():
    rng = np.random.default_rng(7)
    stack = attnkit.AttentionStack("llama-3.1-8b-instruct", dtype="float32", kv_cache_bytes=128 << 20)
    assert stack.device == "cpu" and stack.dtype == "float32"
    layers = stack.layers()[:2]
    steps = [{0: 37, 1: 5, 2: 16}] + [{0: 1, 1: 1, 2: 1}] * 3 + [{1: 9, 3: 21}]
    computed = run_steps(stack, steps, rng, layers)
    assert {rid: stack.num_tokens(rid) for rid in computed} == computed


def test_sliding_window_layers_of_gemma3():
    rng = np.random.default_rng(11)
    model = {
        "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"],
        "hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 32, "sliding_window": 8,
        "sliding_window_pattern": 3, "query_pre_attn_scalar": 32, "vocab_size": 100,
        "max_position_embeddings": 512,
    }
    stack = attnkit.AttentionStack(model, dtype="float32", kv_cache_bytes=8 << 20)
    kinds = {l["kind"] for l in stack.layers()}
    assert kinds == {"sliding_window", "full_attention"} and stack.num_groups >= 2
    steps = [{0: 20, 1: 3}] + [{0: 1, 1: 1}] * 10
    run_steps(stack, steps, rng)


def test_learned_sinks_are_used():
    rng = np.random.default_rng(3)
    stack = attnkit.AttentionStack("gpt-oss-20b", dtype="float32", kv_cache_bytes=128 << 20)
    layer = stack.layers()[0]
    assert layer["has_sinks"]
    sinks = rng.uniform(-2, 2, layer["num_heads"]).astype(np.float32)
    stack.set_sinks(layer["index"], sinks)
    run_steps(stack, [{0: 12}, {0: 1}], rng, [layer], sinks=sinks)


def test_float16_inputs():
    rng = np.random.default_rng(5)
    stack = attnkit.AttentionStack("llama-3.1-8b-instruct", dtype="float16", kv_cache_bytes=128 << 20)
    run_steps(stack, [{0: 9}, {0: 1}], rng, stack.layers()[:1], dtype=np.float16, tol=3e-3)


def test_the_cache_is_a_zero_copy_view_written_at_the_step_slots():
    rng = np.random.default_rng(1)
    stack = attnkit.AttentionStack("llama-3.1-8b-instruct", dtype="float32", kv_cache_bytes=128 << 20)
    layer = stack.layers()[0]
    cache = stack.kv_cache(layer["index"], "numpy")
    assert cache.layout == "NHD" and cache.key.shape[1:] == (cache.block_size, 8, 128)
    stack.add_request(4)
    stack.plan_step([(4, 0, 3)])
    q = rows(rng, 3, 32, 128)
    k, v = rows(rng, 3, 8, 128), rows(rng, 3, 8, 128)
    stack.forward(layer["index"], q, k, v, np.empty_like(q))
    slots = stack.step_metadata(layer["group"])["slot_mapping"]
    for t, slot in enumerate(slots):
        block, offset = divmod(slot, cache.block_size)
        np.testing.assert_array_equal(cache.key[block, offset], k[t])
        np.testing.assert_array_equal(cache.value[block, offset], v[t])
    del stack  # the views keep the memory alive
    assert np.isfinite(cache.key).all()


def test_strided_inputs_are_read_in_place():
    rng = np.random.default_rng(2)
    stack = attnkit.AttentionStack("llama-3.1-8b-instruct", dtype="float32", kv_cache_bytes=128 << 20)
    layer = stack.layers()[0]
    stack.add_request(0)
    stack.plan_step([(0, 0, 4)])
    qkv = rows(rng, 4, 48, 128)  # fused projections: q, k, v are slices of one array
    q, k, v = qkv[:, :32], qkv[:, 32:40], qkv[:, 40:48]
    out = np.empty((4, 32, 128), np.float32)
    stack.forward(layer["index"], q, k, v, out)
    expected = DenseModel().attend(layer, 0, q, k, v)
    np.testing.assert_allclose(out, expected, atol=TOL, rtol=0)


def test_requests_free_their_blocks():
    stack = attnkit.AttentionStack("llama-3.1-8b-instruct", dtype="float32", num_blocks=16)
    free = stack.num_free_blocks
    stack.add_request(0)
    stack.plan_step([(0, 0, 40)])
    assert stack.num_free_blocks < free and stack.num_requests == 1
    stack.free_request(0)
    assert stack.num_free_blocks == free and not stack.has_request(0)


def test_out_of_blocks_changes_nothing():
    stack = attnkit.AttentionStack("llama-3.1-8b-instruct", dtype="float32", num_blocks=4)
    stack.add_request(0)
    stack.add_request(1)
    stack.plan_step([(0, 0, 16)])
    free = stack.num_free_blocks
    with pytest.raises(MemoryError, match="out of KV-cache blocks: the step needs 3, 2 free"):
        stack.plan_step([(0, 16, 1), (1, 0, 32)])
    assert stack.num_free_blocks == free
    assert stack.num_tokens(0) == 16 and stack.num_tokens(1) == 0
    stack.plan_step([(0, 16, 1), (1, 0, 16)])  # what fits still runs


def test_errors_name_the_bad_value():
    stack = attnkit.AttentionStack("llama-3.1-8b-instruct", dtype="float32", kv_cache_bytes=128 << 20,
                                   max_num_reqs=2, max_num_tokens=64, max_seq_len=128)
    q = np.zeros((4, 32, 128), np.float32)
    kv = np.zeros((4, 8, 128), np.float32)
    with pytest.raises(ValueError, match="no step is planned yet"):
        stack.forward(0, q, kv, kv, q.copy())
    with pytest.raises(KeyError, match="layer 40 is not an attention layer"):
        stack.kv_cache(40)
    with pytest.raises(attnkit.Error, match="unknown request|request 9"):
        stack.plan_step([(9, 0, 4)])
    stack.add_request(0)
    with pytest.raises(ValueError, match="duplicate|already"):
        stack.add_request(0)
    with pytest.raises(ValueError, match="3 requests, beyond the stack's max_num_reqs 2"):
        stack.plan_step([(0, 0, 1), (1, 0, 1), (2, 0, 1)])
    with pytest.raises(ValueError, match="65 query tokens, beyond the stack's max_num_tokens 64"):
        stack.plan_step([(0, 0, 65)])
    with pytest.raises(ValueError, match="would hold 129 tokens, beyond the stack's max_seq_len 128"):
        stack.plan_step([(0, 100, 29)])
    with pytest.raises(ValueError, match="appears twice"):
        stack.plan_step([(0, 0, 1), (0, 0, 1)])
    with pytest.raises(ValueError, match=r"\(request_id, num_computed_tokens, num_new_tokens"):
        stack.plan_step([(0, 0)])
    stack.plan_step([(0, 0, 4)])
    with pytest.raises(ValueError, match="query has 3 rows"):
        stack.forward(0, q[:3], kv, kv, q.copy())
    with pytest.raises(ValueError, match="float16"):
        stack.forward(0, q.astype(np.float16), kv, kv, q.copy())
    with pytest.raises(ValueError, match=r"query must be \[tokens, 32, 128\], got float32\[4, 16, 128\]"):
        stack.forward(0, np.zeros((4, 16, 128), np.float32), kv, kv, q.copy())
    with pytest.raises(TypeError, match="key: expected an array .* got list"):
        stack.forward(0, q, [[0.0]], kv, q.copy())
    with pytest.raises(TypeError, match="output: expected a writable array .* got str"):
        stack.forward(0, q, kv, kv, "out")
    read_only = q.copy()
    read_only.flags.writeable = False
    with pytest.raises(TypeError, match="output: expected a writable array .* got numpy.ndarray"):
        stack.forward(0, q, kv, kv, read_only)
    with pytest.raises(ValueError, match="no attention sinks"):
        stack.set_sinks(0, np.zeros(32, np.float32))
    with pytest.raises(ValueError, match="device 'tpu'"):
        attnkit.AttentionStack("llama-3.1-8b-instruct", device="tpu")
    with pytest.raises(ValueError, match="max_seq_len must be positive, got 0"):
        attnkit.AttentionStack("llama-3.1-8b-instruct", max_seq_len=0)


def test_cuda_without_a_gpu_says_so():
    from conftest import cuda_available

    if cuda_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(attnkit.Error, match="cuda|CUDA"):
        attnkit.AttentionStack("llama-3.1-8b-instruct", device="cuda")


def test_sinks_count_is_checked():
    stack = attnkit.AttentionStack("gpt-oss-20b", dtype="float32", kv_cache_bytes=128 << 20)
    with pytest.raises(ValueError, match="3 sink values given, the layer has 64 heads"):
        stack.set_sinks(0, np.zeros(3, np.float32))


def test_per_kind_choice_is_what_runs():
    stack = attnkit.AttentionStack("gemma-3-1b-it", dtype="float32", kv_cache_bytes=32 << 20,
                                   attention_config={"backend_per_kind": {"sliding_window": "REFERENCE"}})
    by_kind = {(l["kind"], l["backend"]) for l in stack.layers()}
    assert by_kind == {("sliding_window", "REFERENCE"), ("full_attention", "CPU_FLASH")}
    report = stack.explain()
    assert [l["backend"] for l in report["layers"] if l["is_attention"]] == [
        l["backend"] for l in stack.layers()]
    assert set(sum(stack.backends_by_group().values(), [])) == {"REFERENCE", "CPU_FLASH"}


@pytest.mark.gpu
def test_cupy_jax_and_torch_arrays_on_cuda_give_the_same_output():
    """The same prefill and decode steps with CuPy arrays, JAX inputs (JAX arrays are
    read-only: the output is CuPy's) and torch tensors: bit-identical outputs (one kernel),
    and the dense float64 attention within 5e-3 (float16 rounding of the probabilities and
    the output, |out| <= 1)."""
    cupy = pytest.importorskip("cupy")
    jnp = pytest.importorskip("jax.numpy")
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(21)
    steps = [{1: 40, 2: 7}, {1: 1, 2: 1}, {1: 1, 2: 1}]
    inputs = []
    for step in steps:
        total = sum(step.values())
        inputs.append([rows(rng, total, h, 128, np.float16) for h in (32, 8, 8)])
    frameworks = {
        "cupy": (cupy.asarray, lambda shape: cupy.full(shape, np.nan, np.float16),
                 lambda out: cupy.asnumpy(out)),
        "jax": (lambda a: jnp.asarray(a).block_until_ready(),
                lambda shape: cupy.full(shape, np.nan, np.float16), lambda out: cupy.asnumpy(out)),
        "torch": (lambda a: torch.from_numpy(a).cuda(),
                  lambda shape: torch.full(shape, float("nan"), dtype=torch.float16, device="cuda"),
                  lambda out: out.cpu().numpy()),
    }
    results = {}
    for name, (to_device, empty, to_host) in frameworks.items():
        stack = attnkit.AttentionStack("llama-3.1-8b-instruct", device="cuda", dtype="float16",
                                       kv_cache_bytes=64 << 20)
        computed, outs = {}, []
        for step, (q, k, v) in zip(steps, inputs):
            for rid in step:
                if rid not in computed:
                    stack.add_request(rid)
                    computed[rid] = 0
            stack.plan_step([(rid, computed[rid], n) for rid, n in step.items()])
            out = empty(q.shape)
            stack.forward(0, to_device(q), to_device(k), to_device(v), out)
            cupy.cuda.runtime.deviceSynchronize()
            outs.append(to_host(out))
            for rid, n in step.items():
                computed[rid] += n
        results[name] = outs
    for name in ("cupy", "jax"):
        for step, (a, b) in enumerate(zip(results[name], results["torch"])):
            np.testing.assert_array_equal(a, b, err_msg=f"{name} step {step}")
    dense = DenseModel()
    layer = attnkit.AttentionStack("llama-3.1-8b-instruct", num_blocks=2).layer(0)
    for step, ((q, k, v), out) in enumerate(zip(inputs, results["torch"])):
        start = 0
        for rid, n in steps[step].items():
            expected = dense.attend(layer, rid, q[start:start + n], k[start:start + n],
                                    v[start:start + n])
            np.testing.assert_allclose(out[start:start + n], expected, atol=5e-3, rtol=0,
                                       err_msg=f"step {step} request {rid}")
            start += n


HYBRID = {
    "model_type": "qwen3_next", "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 32, "full_attention_interval": 4,
    "linear_num_key_heads": 2, "linear_key_head_dim": 16, "linear_num_value_heads": 4,
    "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4,
}


def test_state_layers_take_their_parameters_and_keep_their_state_across_steps():
    stack = attnkit.AttentionStack(HYBRID, dtype="float32", kv_cache_bytes=16 << 20)
    layers = stack.layers()
    assert [l["kind"] for l in layers] == ["mamba"] * 3 + ["full_attention"]
    assert [l["backend"] for l in layers] == ["GDN_ATTN"] * 3 + ["CPU_FLASH"]
    state = layers[0]["state"]
    assert state["type"] == "gated_delta_net" and not state["has_params"]
    assert layers[3]["state"] is None
    # conv over q, k (2 x 16 each) and v (4 x 8); then a and b per value head
    assert state["input_width"] == 2 * 2 * 16 + 4 * 8 + 2 * 4
    assert [name for name, _ in state["param_segments"]] == ["conv_weight", "a_log", "dt_bias"]
    rng = np.random.default_rng(3)
    conv = rng.uniform(-0.5, 0.5, 96 * 4)
    params = np.concatenate([conv, np.log(rng.uniform(1, 16, 4)), rng.uniform(-5, -2, 4)])
    assert params.size == state["num_params"]
    stack.set_state_params(0, params.astype(np.float32))
    stack.add_request(1)
    x = rng.uniform(-1, 1, (5, state["input_width"])).astype(np.float32)
    whole = np.full((5, state["output_width"]), np.nan, dtype=np.float32)
    stack.plan_step([(1, 0, 5)])
    stack.forward(0, x, None, None, whole)
    # The same sequence as a prefill of 2 and three decodes, continuing from the state.
    stack.add_request(2)
    parts = []
    for start, n in [(0, 2), (2, 1), (3, 1), (4, 1)]:
        out = np.full((n, state["output_width"]), np.nan, dtype=np.float32)
        stack.plan_step([(2, start, n)])
        stack.forward(0, x[start:start + n], None, None, out)
        parts.append(out)
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    assert np.isfinite(whole).all() and np.abs(whole).max() > 0


def test_state_parameter_errors_name_the_layer_and_the_size():
    stack = attnkit.AttentionStack(HYBRID, dtype="float32", kv_cache_bytes=16 << 20)
    with pytest.raises(ValueError, match=r"3 parameter values given, but gated_delta_net"):
        stack.set_state_params(1, np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match=r"layer 3 \(layers.3.self_attn\) is an attention layer"):
        stack.set_state_params(3, np.zeros(3, dtype=np.float32))
    stack.add_request(1)
    stack.plan_step([(1, 0, 1)])
    x = np.zeros((1, stack.layers()[1]["state"]["input_width"]), dtype=np.float32)
    out = np.zeros((1, stack.layers()[1]["state"]["output_width"]), dtype=np.float32)
    with pytest.raises(ValueError, match=r"GDN_ATTN \(layer 1\): the layer has no parameters"):
        stack.forward(1, x, None, None, out)
