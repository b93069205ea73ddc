"""attnkit's PyTorch ops (attnkit.torch_ops): torch.ops.attnkit.forward_ and
torch.ops.attnkit.attention against a dense float64 attention, under torch.compile
(fullgraph) against eager, their fake implementations, the stack
handles, and (GPU) replay of a captured CUDA graph with new sequence lengths."""

import gc
import weakref

import pytest

torch = pytest.importorskip("torch", reason="attnkit.torch_ops needs PyTorch")

import attnkit  # noqa: E402
import attnkit.torch_ops as ops  # noqa: E402

TOL = 2e-5  # float32 CPU_FLASH against float64 dense attention, |x| <= 1
MODEL = "llama-3.1-8b-instruct"  # 32 heads, 8 KV heads, head size 128
TORCH_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs PyTorch built with CUDA")


def make_stack(device="cpu", dtype="float32"):
    return attnkit.AttentionStack(MODEL, device=device, dtype=dtype, kv_cache_bytes=64 << 20,
                                  max_num_reqs=4, max_num_tokens=256, max_seq_len=512)


class Dense:
    """Every request's keys and values so far, attended causally in float64 (GQA)."""

    def __init__(self, layer):
        self.layer, self.keys, self.values = layer, {}, {}

    def attend(self, steps, q, k, v):
        """steps: [(request, new tokens)] in row order; q/k/v the step's packed rows."""
        out, start = [], 0
        group = self.layer["num_heads"] // self.layer["num_kv_heads"]
        for request, n in steps:
            rows = slice(start, start + n)
            keys = torch.cat([self.keys.get(request, k[:0].double()), k[rows].double()])
            values = torch.cat([self.values.get(request, v[:0].double()), v[rows].double()])
            self.keys[request], self.values[request] = keys, values
            scores = torch.einsum("thd,shd->hts", q[rows].double(), keys.repeat_interleave(group, 1))
            first = len(keys) - n
            causal = torch.arange(len(keys))[None, :] <= first + torch.arange(n)[:, None]
            scores = (scores * self.layer["scale"]).masked_fill(~causal.to(scores.device), float("-inf"))
            out.append(torch.einsum("hts,shd->thd", scores.softmax(-1), values.repeat_interleave(group, 1)))
            start += n
        return torch.cat(out)


def rows(n, layer, generator, device="cpu", dtype=torch.float32):
    """Random query, key, value rows of a step of n tokens, in [-1, 1)."""
    shapes = [(n, layer["num_heads"], layer["head_size"]), (n, layer["num_kv_heads"], layer["head_size"]),
              (n, layer["num_kv_heads"], layer["head_size_v"])]
    return [(torch.rand(s, generator=generator) * 2 - 1).to(device, dtype) for s in shapes]


def start_step(stack, step, layer, generator):
    """Adds the step's new requests, plans it, and returns fresh q, k, v for its rows."""
    for request, computed, _ in step:
        if computed == 0:
            stack.add_request(request)
    stack.plan_step(step)
    return rows(sum(n for *_, n in step), layer, generator)


STEPS = [  # (request, computed tokens, new tokens) per step: a prefill, then decodes
    [(0, 0, 13), (1, 0, 5)],
    [(0, 13, 1), (1, 5, 1)],
    [(0, 14, 1), (1, 6, 1), (2, 0, 9)],
]


def test_eager_ops_match_dense_attention_and_write_the_cache():
    stack = make_stack()
    layer = stack.layers()[0]
    dense, g = Dense(layer), torch.Generator().manual_seed(0)
    cache = stack.kv_cache(layer["index"], "torch")
    for step in STEPS:
        q, k, v = start_step(stack, step, layer, g)
        out = torch.full_like(q, float("nan"))
        ops.forward(stack, layer["index"], q, k, v, out)
        expected = dense.attend([(r, n) for r, _, n in step], q, k, v)
        torch.testing.assert_close(out.double(), expected, atol=TOL, rtol=0)
        # The functional op: the same output as a new tensor (the same rows are rewritten).
        torch.testing.assert_close(ops.attention(stack, layer["index"], q, k, v), out, atol=0, rtol=0)
        slots = torch.tensor(stack.step_metadata(layer["group"])["slot_mapping"])
        written = cache.key.flatten(0, 1)[slots]  # NHD: [blocks * block_size, heads, size]
        torch.testing.assert_close(written, k, atol=0, rtol=0)


def test_compiled_fullgraph_equals_eager():
    stack = make_stack()
    layer = stack.layers()[1]
    index, handle, cache = layer["index"], ops.handle(stack), stack.kv_cache(layer["index"], "torch")

    @torch.compile(fullgraph=True)
    def compiled(q, k, v, out):
        result = torch.ops.attnkit.attention(handle, index, q * 0.5, k, v, cache.key, cache.value)
        torch.ops.attnkit.forward_(handle, index, q * 0.5, k, v, out, cache.key, cache.value)
        return result + 1

    g = torch.Generator().manual_seed(1)
    for step in STEPS:
        q, k, v = start_step(stack, step, layer, g)
        out = torch.empty_like(q)
        got = compiled(q, k, v, out)
        eager = ops.attention(stack, index, q * 0.5, k, v)
        torch.testing.assert_close(got, eager + 1, atol=1e-6, rtol=0)
        torch.testing.assert_close(out, eager, atol=0, rtol=0)
    torch._dynamo.reset()  # compiled code holds the cache tensors (and so the stack)


def test_fake_implementations_give_the_real_metadata():
    """What torch.compile traces with: meta tensors run the ops' fake implementations.
    (torch.library.opcheck cannot check these ops: it runs them on copies of the cache,
    which they refuse by design, see test_cache_arguments_must_be_the_layers_own_memory.)"""
    stack = make_stack()
    layer = stack.layers()[0]
    stack.add_request(0)
    stack.plan_step([(0, 0, 6)])
    q, k, v = rows(6, layer, torch.Generator().manual_seed(2))
    cache = stack.kv_cache(layer["index"], "torch")
    real = ops.attention(stack, layer["index"], q, k, v)
    meta = [t.to("meta") for t in (q, k, v, cache.key, cache.value)]
    fake = torch.ops.attnkit.attention(ops.handle(stack), layer["index"], *meta)
    assert (fake.device.type, fake.shape, fake.dtype) == ("meta", real.shape, real.dtype)
    out = torch.empty_like(meta[0])
    assert torch.ops.attnkit.forward_(ops.handle(stack), layer["index"], *meta[:3], out, *meta[3:]) is None


def test_handles_name_live_stacks_without_keeping_them():
    stack = make_stack()
    handle = ops.handle(stack)
    assert ops.handle(stack) == handle and ops.handle(make_stack()) != handle
    alive = weakref.ref(stack)
    del stack
    gc.collect()
    assert alive() is None
    layer = attnkit.AttentionStack(MODEL, dtype="float32", kv_cache_bytes=64 << 20).layers()[0]
    q, k, v = rows(1, layer, torch.Generator().manual_seed(3))
    with pytest.raises(attnkit.NotFoundError, match=f"handle {handle} names no live AttentionStack"):
        torch.ops.attnkit.attention(handle, 0, q, k, v, k, v)
    with pytest.raises(TypeError, match="expected an attnkit.AttentionStack"):
        ops.handle(object())


def test_cache_arguments_must_be_the_layers_own_memory():
    """The op writes through the stack; a copy of the cache as the declared mutated argument
    would make that declaration untrue, so it is refused."""
    stack = make_stack()
    stack.add_request(0)
    stack.plan_step([(0, 0, 2)])
    layer = stack.layers()[0]
    q, k, v = rows(2, layer, torch.Generator().manual_seed(4))
    cache, other = stack.kv_cache(0, "torch"), stack.kv_cache(1, "torch")
    h = ops.handle(stack)
    with pytest.raises(attnkit.InvalidArgumentError, match=r"must be stack.kv_cache\(0, 'torch'\) itself"):
        torch.ops.attnkit.attention(h, 0, q, k, v, cache.key.clone(), cache.value)
    with pytest.raises(attnkit.InvalidArgumentError, match="must be stack.kv_cache"):
        torch.ops.attnkit.attention(h, 0, q, k, v, other.key, other.value)


def test_stack_errors_come_through_the_op():
    stack = make_stack()
    layer = stack.layers()[0]
    q, k, v = rows(3, layer, torch.Generator().manual_seed(5))
    with pytest.raises(ValueError, match="no step is planned yet"):
        ops.attention(stack, 0, q, k, v)


def test_tensors_that_require_grad_are_refused():
    """attnkit has no backward pass: like Tensor.__dlpack__, forward() refuses them."""
    stack = make_stack()
    layer = stack.layers()[0]
    stack.add_request(0)
    stack.plan_step([(0, 0, 3)])
    q, k, v = rows(3, layer, torch.Generator().manual_seed(6))
    out = torch.empty_like(q)
    with pytest.raises(ValueError, match="query: a tensor that requires grad.*tensor.detach"):
        stack.forward(0, q.clone().requires_grad_(), k, v, out)
    with pytest.raises(ValueError, match="output: a tensor that requires grad"):
        stack.forward(0, q, k, v, out.clone().requires_grad_())
    stack.forward(0, q, k, v, out)  # the same call without grad runs
    assert torch.isfinite(out).all()


@pytest.mark.gpu
@TORCH_CUDA
def test_cuda_graph_replays_with_new_sequence_lengths():
    """One decode step of two requests captured into a CUDA graph and replayed for three
    steps. Before each step plan_step(graph_shape=True) plans the longer sequences. Each
    replay's output must equal an eager forward of the same planned step, bit for bit (one
    kernel, one split of the keys, as the C++ graph tests require)."""
    stack = make_stack(device="cuda", dtype="bfloat16")
    layer = stack.layers()[0]
    index, handle, cache = layer["index"], ops.handle(stack), stack.kv_cache(layer["index"], "torch")
    g = torch.Generator().manual_seed(6)
    lengths = {0: 37, 1: 11}
    for request in lengths:
        stack.add_request(request)
    stack.plan_step([(r, 0, n) for r, n in lengths.items()])
    prefill = rows(sum(lengths.values()), layer, g, "cuda", torch.bfloat16)
    ops.attention(stack, index, *prefill)

    q, k, v = rows(2, layer, g, "cuda", torch.bfloat16)  # the graph's static inputs
    out = torch.empty_like(q)
    graph = None
    for step in range(3):
        stack.plan_step([(r, n, 1) for r, n in lengths.items()], graph_shape=True)
        for r in lengths:
            lengths[r] += 1
        for static, fresh in zip((q, k, v), rows(2, layer, g, "cuda", torch.bfloat16)):
            static.copy_(fresh)
        # Eager first; on the first step this also warms the decode kernels up, which a
        # capture must not be the first to launch. The replay rewrites the same key/value.
        eager = ops.attention(stack, index, q, k, v)
        if graph is None:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                torch.ops.attnkit.forward_(handle, index, q, k, v, out, cache.key, cache.value)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, eager, atol=0, rtol=0, msg=lambda m: f"replay {step}: {m}")
    assert lengths == {0: 40, 1: 14}


@pytest.mark.gpu
@TORCH_CUDA
def test_compiled_fullgraph_equals_eager_on_cuda():
    stack = make_stack(device="cuda", dtype="bfloat16")
    layer = stack.layers()[0]
    index, handle, cache = layer["index"], ops.handle(stack), stack.kv_cache(layer["index"], "torch")

    @torch.compile(fullgraph=True)
    def compiled(q, k, v):
        return torch.ops.attnkit.attention(handle, index, q, k, v, cache.key, cache.value).float() * 2

    stack.add_request(0)
    stack.plan_step([(0, 0, 21)])
    q, k, v = rows(21, layer, torch.Generator().manual_seed(7), "cuda", torch.bfloat16)
    torch.testing.assert_close(compiled(q, k, v), ops.attention(stack, index, q, k, v).float() * 2,
                               atol=0, rtol=0)
    torch._dynamo.reset()
