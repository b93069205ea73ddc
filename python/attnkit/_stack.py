"""attnkit.AttentionStack: a model's attention layers over attnkit's paged KV cache."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from . import _core
from ._model import attention_config_text, dtype_name, model_source


class KvCache(NamedTuple):
    """One layer's paged cache: DLPack views of the stack's memory (no copy), which keep the
    stack alive. key/value: [num_blocks, block_size, num_kv_heads, head_size] for NHD,
    [num_blocks, num_kv_heads, block_size, head_size] for HND; MLA has the latent in key
    and value None. fp8 caches are uint8 views. block_size is the kernel block size."""

    key: Any
    value: Any
    layout: str
    block_size: int


def _device_platform(device: str) -> tuple[str, int | None]:
    text = str(device)
    if text == "cpu":
        return "cpu", None
    if text == "cuda":
        return "cuda", None
    if text.startswith("cuda:") and text[5:].isdigit():
        return "cuda", int(text[5:])
    raise ValueError(f"device {text!r} is not one of: cpu, cuda, cuda:N")


def _on_device(index: int | None):
    """Makes CUDA device `index` current while the stack allocates (through PyTorch, which
    owns the current device in a PyTorch process)."""
    if index is None:
        return contextlib.nullcontext()
    import torch

    return torch.cuda.device(index)


class AttentionStack(_core.AttentionStack):
    """Selects a backend for every attention layer of `model`, plans and allocates the paged
    KV cache they shape (on the CPU or a CUDA device), and runs the layers.

    Each step: give requests their slots and plan every KV-cache group once with
    plan_step([(request_id, num_computed_tokens, num_new_tokens), ...]); then call
    forward(layer, query, key, value, output) per attention layer with the step's rows
    (query [T, num_heads, head_size], key/value [T, num_kv_heads, head_size(_v)], output
    [T, num_heads, head_size_v], rows of request i after those of i-1). Tensors come from
    any DLPack producer (NumPy, PyTorch, JAX, CuPy) and are never copied. On CUDA, PyTorch
    tensors run on PyTorch's current stream; give stream= (a cudaStream_t as int) for
    others. After construction plan_step() and forward() allocate nothing on the device,
    and forward() may be captured into a CUDA graph (plan_step(..., graph_shape=True)
    before capture and before each replay).

    Bad input raises the CLI's messages: ValueError (attnkit.InvalidArgumentError),
    KeyError (NotFoundError), NotImplementedError (UnsupportedError), MemoryError
    (OutOfMemoryError: the step is not applied)."""

    def __init__(
        self,
        model: Any,
        *,
        device: str = "cpu",
        dtype: Any = None,
        kv_cache_dtype: str = "auto",
        attention_config: Any = None,
        block_size: int | None = None,
        num_blocks: int = 0,
        kv_cache_bytes: int = 256 << 20,
        max_num_reqs: int = 256,
        max_num_tokens: int = 8192,
        max_seq_len: int = 8192,
        checked: bool | None = None,
    ) -> None:
        kind, source, name = model_source(model)
        platform, index = _device_platform(device)
        self._explain_args = dict(
            model=model,
            attention_config=attention_config,
            platform=platform if index is None else None,
            dtype=dtype,
            kv_cache_dtype=kv_cache_dtype,
            block_size=block_size,
        )
        with _on_device(index):
            super().__init__(
                kind,
                source,
                name,
                platform,
                dtype_name(dtype),
                kv_cache_dtype,
                block_size,
                attention_config_text(attention_config),
                num_blocks,
                kv_cache_bytes,
                max_num_reqs,
                max_num_tokens,
                max_seq_len,
                checked,
            )

    def kv_cache(self, layer: int, framework: str | None = None) -> KvCache:  # type: ignore[override]
        """The layer's cache as DLPack views; framework="torch" or "numpy" converts them
        (still without a copy)."""
        key, value, layout, block_size = super().kv_cache(layer)
        if framework == "torch":
            import torch

            key = torch.from_dlpack(key)
            value = None if value is None else torch.from_dlpack(value)
        elif framework == "numpy":
            import numpy

            key = numpy.from_dlpack(key)
            value = None if value is None else numpy.from_dlpack(value)
        elif framework is not None:
            raise ValueError(f"framework {framework!r} is not one of: torch, numpy, None")
        return KvCache(key, value, layout, block_size)

    def plan_step(  # type: ignore[override]
        self,
        batch: Iterable[Sequence[Any]],
        stream: int | None = None,
        graph_shape: bool = False,
    ) -> None:
        """Gives every request of the batch its slots and plans each KV-cache group. batch:
        (request_id, num_computed_tokens, num_new_tokens[, write_encoder_kv]) per request,
        in the order of their rows. All or nothing: MemoryError leaves the tables as they
        were."""
        requests = []
        for entry in batch:
            if len(entry) == 3:
                requests.append((int(entry[0]), int(entry[1]), int(entry[2]), False))
            elif len(entry) == 4:
                requests.append((int(entry[0]), int(entry[1]), int(entry[2]), bool(entry[3])))
            else:
                raise ValueError(
                    "a batch entry is (request_id, num_computed_tokens, num_new_tokens"
                    f"[, write_encoder_kv]); got {tuple(entry)!r}"
                )
        super().plan_step(requests, stream, graph_shape)

    def backends_by_group(self) -> dict[int, list[str]]:
        """The backends that execute each KV-cache group's layers."""
        out: dict[int, set[str]] = {}
        for layer in self.layers():
            out.setdefault(layer["group"], set()).add(layer["backend"])
        return {g: sorted(b) for g, b in sorted(out.items())}

    def explain(self, *, text: bool = False) -> Any:
        """attnkit.explain() of this stack's model and options: why each backend was chosen."""
        from . import explain

        return explain(text=text, **self._explain_args)

    def __repr__(self) -> str:
        return (
            f"AttentionStack({self.model_name!r}, device={self.device!r}, dtype={self.dtype!r}, "
            f"{len(self.layers())} attention layers, {self.num_groups} KV-cache groups, "
            f"{self.num_blocks} blocks)"
        )
