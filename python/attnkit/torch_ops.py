"""attnkit as PyTorch operators, so that torch.compile and CUDA graphs can hold its attention.

Importing this module registers two ops in the ``attnkit`` namespace:

- ``torch.ops.attnkit.forward_(handle, layer, query, key, value, out, key_cache, value_cache)``
  writes the layer's output into ``out`` (the out variant);
- ``torch.ops.attnkit.attention(handle, layer, query, key, value, key_cache, value_cache)``
  returns it as a new tensor.

Both run ``AttentionStack.forward`` on the last planned step: they write this step's key and
value rows into the layer's paged cache and attend over it. That write is why the cache
tensors (``stack.kv_cache(layer, "torch")``) are arguments: the schema declares them mutated,
so torch.compile orders the op against every other use of the cache instead of assuming it
pure. A stack is named by an integer handle (``handle(stack)``), since an op's schema has no
type for a Python object; the registry behind it holds stacks weakly, so a handle never keeps
a stack alive.

Under torch.compile call the ops directly, with the handle and cache tensors fetched outside
the compiled region (they are Python-side lookups TorchDynamo cannot trace)::

    h, cache = attnkit.torch_ops.handle(stack), stack.kv_cache(layer, "torch")

    @torch.compile(fullgraph=True)
    def step(q, k, v):
        return torch.ops.attnkit.attention(h, layer, q, k, v, cache.key, cache.value)

For eager code, ``forward(stack, layer, q, k, v, out)`` and ``attention(stack, layer, q, k,
v)`` do those lookups themselves. plan_step() is not an op: it runs on the host between
steps (with ``graph_shape=True`` before capturing or replaying a CUDA graph).
"""

from __future__ import annotations

import itertools
import weakref
from typing import NamedTuple

import torch

from ._errors import InvalidArgumentError, NotFoundError
from ._stack import AttentionStack

__all__ = ["attention", "forward", "handle"]


class _CachePointers(NamedTuple):
    key: int
    value: int | None


class _Registry:
    """Live stacks by handle. Weak both ways: a handle outliving its stack names nothing (and
    is never reused), and registering a stack changes nothing about when it is freed."""

    def __init__(self) -> None:
        self._next = itertools.count(1)
        self._stacks = weakref.WeakValueDictionary[int, AttentionStack]()
        self._handles = weakref.WeakKeyDictionary[AttentionStack, int]()
        # Where each layer's cache lives, to check that an op is handed that memory; plain
        # ints, because a tensor view of the cache would keep its stack alive.
        self._pointers: dict[tuple[int, int], _CachePointers] = {}

    def handle(self, stack: AttentionStack) -> int:
        if not isinstance(stack, AttentionStack):
            raise TypeError(f"expected an attnkit.AttentionStack, got {type(stack).__name__}")
        found = self._handles.get(stack)
        if found is not None:
            return found
        number = next(self._next)
        self._stacks[number] = stack
        self._handles[stack] = number
        weakref.finalize(stack, self._forget, number)
        return number

    def stack(self, number: int) -> AttentionStack:
        stack = self._stacks.get(number)
        if stack is None:
            raise NotFoundError(
                f"attnkit stack handle {number} names no live AttentionStack (the stack was "
                "freed, or the handle did not come from attnkit.torch_ops.handle())"
            )
        return stack

    def cache_pointers(self, number: int, layer: int) -> _CachePointers:
        key = (number, layer)
        if key not in self._pointers:
            cache = self.stack(number).kv_cache(layer, "torch")
            value = None if cache.value is None else cache.value.data_ptr()
            self._pointers[key] = _CachePointers(cache.key.data_ptr(), value)
        return self._pointers[key]

    def _forget(self, number: int) -> None:
        for key in [k for k in self._pointers if k[0] == number]:
            del self._pointers[key]


_registry = _Registry()


def handle(stack: AttentionStack) -> int:
    """The integer that names `stack` in the ops' ``handle`` argument (the same one every
    time for the same stack). It does not keep the stack alive."""
    return _registry.handle(stack)


def _check_cache(
    number: int, layer: int, key_cache: torch.Tensor, value_cache: torch.Tensor | None
) -> None:
    """The cache tensors must be the layer's own memory: the op writes through the stack, not
    through them, so any other tensor (a copy, another layer's cache) would leave the declared
    mutation untrue, and a compiler copying it back would overwrite this step's keys."""
    expected = _registry.cache_pointers(number, layer)
    given = _CachePointers(
        key_cache.data_ptr(), None if value_cache is None else value_cache.data_ptr()
    )
    if given != expected:
        raise InvalidArgumentError(
            f"key_cache/value_cache of layer {layer} must be stack.kv_cache({layer}, 'torch') "
            f"itself (data at {expected.key:#x}/"
            f"{'none' if expected.value is None else hex(expected.value)}), got tensors at "
            f"{given.key:#x}/{'none' if given.value is None else hex(given.value)}"
        )


def _run(number, layer, query, key, value, out, key_cache, value_cache) -> None:
    _check_cache(number, layer, key_cache, value_cache)
    _registry.stack(number).forward(layer, query, key, value, out)


@torch.library.custom_op("attnkit::forward_", mutates_args=("out", "key_cache", "value_cache"))
def _forward_op(
    handle: int,
    layer: int,
    query: torch.Tensor,
    key: torch.Tensor | None,
    value: torch.Tensor | None,
    out: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor | None,
) -> None:
    """Runs `layer` of the stack `handle` on the last planned step, writing `out` and this
    step's key/value rows into the layer's cache (key/value None: nothing to write, e.g.
    cross attention after its encoder step)."""
    _run(handle, layer, query, key, value, out, key_cache, value_cache)


@_forward_op.register_fake
def _(handle, layer, query, key, value, out, key_cache, value_cache) -> None:
    return None


@torch.library.custom_op("attnkit::attention", mutates_args=("key_cache", "value_cache"))
def _attention_op(
    handle: int,
    layer: int,
    query: torch.Tensor,
    key: torch.Tensor | None,
    value: torch.Tensor | None,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor | None,
) -> torch.Tensor:
    """attnkit::forward_ into a new [tokens, num_heads, head_size_v] tensor."""
    out = query.new_empty(_output_shape(handle, layer, query))
    _run(handle, layer, query, key, value, out, key_cache, value_cache)
    return out


@_attention_op.register_fake
def _(handle, layer, query, key, value, key_cache, value_cache) -> torch.Tensor:
    return query.new_empty(_output_shape(handle, layer, query))


def _output_shape(number: int, layer: int, query: torch.Tensor) -> tuple[int, int, int]:
    """[tokens, num_heads, head_size_v]: the value width is the layer's (for MLA it is not
    the query's, and value may be None), so it is asked of the stack."""
    info = _registry.stack(number).layer(layer)
    return (query.shape[0], info["num_heads"], info["head_size_v"])


def forward(
    stack: AttentionStack,
    layer: int,
    query: torch.Tensor,
    key: torch.Tensor | None,
    value: torch.Tensor | None,
    out: torch.Tensor,
) -> None:
    """``torch.ops.attnkit.forward_`` on `stack`'s layer, with its handle and cache looked up
    here (eager code; see the module docstring for torch.compile)."""
    cache = stack.kv_cache(layer, "torch")
    torch.ops.attnkit.forward_(handle(stack), layer, query, key, value, out, cache.key, cache.value)


def attention(
    stack: AttentionStack,
    layer: int,
    query: torch.Tensor,
    key: torch.Tensor | None,
    value: torch.Tensor | None,
) -> torch.Tensor:
    """``torch.ops.attnkit.attention`` on `stack`'s layer: the output as a new tensor."""
    cache = stack.kv_cache(layer, "torch")
    return torch.ops.attnkit.attention(
        handle(stack), layer, query, key, value, cache.key, cache.value
    )
