"""Hugging Face transformers models whose attention attnkit computes, over its paged KV cache.

    import attnkit.integrations.transformers as akt
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="attnkit")
    per_kind = {"backend_per_kind": {"sliding_window": "REFERENCE"}}
    cache = akt.PagedCache(model, attention_config=per_kind, kv_cache_bytes=1 << 30)
    model.generate(input_ids, attention_mask=mask, past_key_values=cache, max_new_tokens=32)
    cache.executed_backends()          # {KV-cache group: [backends that ran its layers]}

Importing this module registers, under the name "attnkit":
- an attention function with ``transformers.AttentionInterface``. It writes each step's
  fresh keys and values into attnkit's paged cache and attends there
  (``AttentionStack.forward``);
- a mask function with ``transformers.AttentionMaskInterface``. It hands the attention
  function the 2D padding mask as it is, instead of a 4D sdpa mask: attnkit applies the
  causal and sliding-window rules itself and needs only which columns are tokens.

transformers' Cache holds keys and values for its attention functions. Here attnkit holds
them, so ``PagedCache.update()`` stores nothing and returns the fresh key/value unchanged.
The cache owns an ``attnkit.AttentionStack`` built from the model's config, so attnkit's
loader decides the layer kinds and its selector the backends (``attention_config``). Each
batch row is one attnkit request. Pad columns are dropped, the valid rows are packed
request after request, and the outputs are scattered back, with zeros at the pads.

generate() cannot be made to build this cache itself: with no cache given it builds a
``DynamicCache``, and there is no hook to change that. The attention function then stops
with an error that says to pass ``past_key_values=PagedCache(model)``. Rows must stay
fixed for the whole generation (greedy or sampling, with or without num_return_sequences).
Beam search and assisted decoding reorder, drop or roll back rows. attnkit's requests
cannot follow that, so they are refused with an error.
"""

from __future__ import annotations

import itertools
import math
import threading
from typing import Any, NamedTuple

import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.cache_utils import Cache, CacheLayerMixin

from .._errors import InvalidArgumentError, UnsupportedError
from .._stack import AttentionStack

__all__ = ["PagedCache", "attnkit_attention_forward", "attnkit_padding_mask"]

IMPLEMENTATION = "attnkit"

# Request ids are unique across caches, so that several caches may share one stack.
_request_ids = itertools.count()


class _Handoff(threading.local):
    """What the last ``PagedCache.update()`` on this thread handed to the attention function.
    transformers' attention modules call ``past_key_values.update(...)`` right before the
    attention function, but do not pass the cache to it. The cache is found here, and
    matched to the call by the identity of the key/value tensors it returned."""

    cache: PagedCache | None = None
    layer: int = -1
    key: torch.Tensor | None = None
    value: torch.Tensor | None = None


_handoff = _Handoff()


def _no_paged_cache_error() -> InvalidArgumentError:
    return InvalidArgumentError(
        f'attn_implementation="{IMPLEMENTATION}" keeps keys and values in attnkit\'s paged '
        "cache, so the model must run with "
        "past_key_values=attnkit.integrations.transformers.PagedCache(model): pass it to "
        "generate() or forward(). Without one, transformers makes a DynamicCache (or none "
        "with use_cache=False), whose keys attnkit cannot attend over."
    )


def _take_handoff(module: torch.nn.Module, key: torch.Tensor, value: torch.Tensor) -> PagedCache:
    """The PagedCache whose update() returned exactly `key` and `value` for this layer."""
    cache, layer = _handoff.cache, _handoff.layer
    matches = _handoff.key is key and _handoff.value is value
    _handoff.cache = _handoff.key = _handoff.value = None
    if cache is None or not matches or layer != module.layer_idx:
        raise _no_paged_cache_error()
    return cache


class _Step(NamedTuple):
    """One planned step: the batch shape transformers gives, and where its valid rows are."""

    batch: int
    length: int  # query columns per batch row, pads included
    rows: torch.Tensor | None  # flat (row * length + column) index of each valid column; None: all


class _PagedLayer(CacheLayerMixin):
    """One model layer's place in a PagedCache: only its length in columns (pads included,
    as transformers counts), which transformers asks for positions and mask sizes. The
    keys and values are in attnkit's paged cache."""

    is_compileable = False
    is_croppable = False

    def __init__(self, is_sliding: bool) -> None:
        super().__init__()
        self.is_sliding = is_sliding
        self.length = 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.is_initialized = True  # nothing to allocate: the pages are the stack's

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.length += key_states.shape[-2]
        return key_states, value_states

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return -1  # no length of its own; the stack's max_seq_len bounds each request

    def reset(self) -> None:
        self.length = 0


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return "cuda" if device.index is None else f"cuda:{device.index}"
    return device.type


class PagedCache(Cache):
    """A transformers Cache whose keys and values live in an ``attnkit.AttentionStack``, for
    models loaded with ``attn_implementation="attnkit"``.

    model: the transformers model; the stack is built from its (text) config, on its device,
    in its dtype. attention_config: attnkit's backend choice, e.g. {"backend": "REFERENCE"}
    or {"backend_per_kind": {"sliding_window": "REFERENCE"}}. stack_options: the other
    AttentionStack arguments (max_num_reqs, max_num_tokens, max_seq_len, kv_cache_bytes,
    block_size, kv_cache_dtype, checked). stack: an existing stack for this model to use
    instead (then attention_config and stack_options must be left out), so that one cache
    allocation serves many generate() calls.

    The cache adds one attnkit request per batch row at its first step and frees them in
    reset() and when it is deleted."""

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        attention_config: Any = None,
        stack: AttentionStack | None = None,
        **stack_options: Any,
    ) -> None:
        config = model.config.get_text_config(decoder=True)
        if stack is None:
            stack = AttentionStack(
                config,
                device=_device_name(model.device),
                dtype=model.dtype,
                attention_config=attention_config,
                **stack_options,
            )
        elif attention_config is not None or stack_options:
            raise TypeError("attention_config and stack options are the stack's: give them when "
                            "building it, not with stack=")
        layer_types = getattr(config, "layer_types", None)
        layer_types = layer_types or ["full_attention"] * config.num_hidden_layers
        super().__init__(layers=[_PagedLayer(t == "sliding_attention") for t in layer_types])
        self.stack = stack
        self._layers = {layer["index"]: layer for layer in stack.layers()}
        self._clear()

    def _clear(self) -> None:
        self._requests: list[int] = []  # attnkit request id of each batch row
        self._computed: list[int] = []  # valid tokens of each row in attnkit's cache
        self._step: _Step | None = None
        self._ran: set[int] = set()  # layers that ran in the current step
        self._prepared: set[int] = set()  # layers whose parameters were checked (and sinks set)
        self._executed: set[int] = set()  # layers that ran at least once

    # --- transformers' Cache interface ---------------------------------------------------

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        """Stores nothing: returns the fresh key/value for the attention function, which
        writes them into attnkit's cache."""
        key_states, value_states = super().update(
            key_states, value_states, layer_idx, *args, **kwargs
        )
        _handoff.cache, _handoff.layer = self, layer_idx
        _handoff.key, _handoff.value = key_states, value_states
        return key_states, value_states

    def reset(self) -> None:
        """Frees the requests and starts over, as a new cache on the same stack."""
        super().reset()
        self._free_requests()
        self._clear()

    def __del__(self) -> None:
        self._free_requests()

    def _free_requests(self) -> None:
        for request in getattr(self, "_requests", ()):
            self.stack.free_request(request)
        self._requests = []

    def _fixed_rows_only(self, what: str):
        raise UnsupportedError(
            f"PagedCache cannot {what}: it keeps one attnkit request per batch row, so "
            "generation must keep its rows fixed (greedy or sampling; not beam search, "
            "assisted decoding or other modes that reorder, drop or roll back rows)"
        )

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self._fixed_rows_only("reorder its rows")

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._fixed_rows_only("select rows")

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._fixed_rows_only("repeat rows")

    def crop(self, tokens_to_remove: int) -> None:
        self._fixed_rows_only("drop tokens")

    # --- what attnkit holds and ran ------------------------------------------------------

    @property
    def requests(self) -> list[int]:
        """The attnkit request id of each batch row (empty before the first step)."""
        return list(self._requests)

    def executed_backends(self) -> dict[int, list[str]]:
        """The backends that ran each KV-cache group's layers, counting only layers that ran
        since the cache was made or reset: {group: sorted backend names}."""
        out: dict[int, set[str]] = {}
        for index in self._executed:
            layer = self._layers[index]
            out.setdefault(layer["group"], set()).add(layer["backend"])
        return {group: sorted(names) for group, names in sorted(out.items())}

    # --- the attention function's side ---------------------------------------------------

    def _attend(
        self,
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        settings: dict[str, Any],
    ) -> torch.Tensor:
        """One layer of one step. query [B, H, S, D], key/value [B, Hkv, S, D(v)] and the 2D
        mask [B, past + S] as transformers gives them; returns [B, S, H, Dv]."""
        index = module.layer_idx
        if index not in self._layers:
            raise InvalidArgumentError(
                f"layer {index} of the model is not an attention layer of the attnkit stack "
                f"(its attention layers: {sorted(self._layers)})"
            )
        if index not in self._prepared:
            self._prepare(module, self._layers[index], query, settings)
            self._prepared.add(index)
        if self._step is None or index in self._ran:
            self._step = self._plan(attention_mask, query, index)
            self._ran = set()
        self._ran.add(index)
        step = self._step
        if (query.shape[0], query.shape[2]) != (step.batch, step.length):
            raise InvalidArgumentError(
                f"layer {index} got a batch of {query.shape[0]} rows x {query.shape[2]} columns "
                f"in a step planned for {step.batch} x {step.length}"
            )

        def packed(x: torch.Tensor) -> torch.Tensor:  # [B, heads, S, d] -> [tokens, heads, d]
            rows = x.transpose(1, 2).reshape(step.batch * step.length, x.shape[1], x.shape[3])
            return rows if step.rows is None else rows.index_select(0, step.rows)

        q, k, v = packed(query), packed(key), packed(value)
        out = q.new_empty(q.shape[0], q.shape[1], v.shape[2])
        self.stack.forward(index, q, k, v, out)
        self._executed.add(index)
        if step.rows is not None:
            scattered = out.new_zeros(step.batch * step.length, *out.shape[1:])
            out = scattered.index_copy_(0, step.rows, out)
        return out.view(step.batch, step.length, *out.shape[1:])

    def _prepare(self, module, layer: dict, query: torch.Tensor, settings: dict[str, Any]) -> None:
        """Before a layer's first forward: what transformers would apply must be what the
        stack's layer (attnkit's reading of the config) applies, and learned sinks go into
        the stack."""
        index = layer["index"]
        scaling = settings["scaling"]
        if scaling is None:  # transformers' default, sdpa's too
            scaling = query.shape[-1] ** -0.5
        checks = [
            ("scaling", scaling, layer["scale"]),
            ("sliding_window", settings["sliding_window"] or 0, layer["sliding_window"]),
            ("softcap", settings["softcap"] or 0.0, layer["soft_cap"]),
        ]
        for name, theirs, ours in checks:
            if not math.isclose(theirs, ours, rel_tol=1e-6):
                raise InvalidArgumentError(
                    f"layer {index}: the model's module applies {name} {theirs}, attnkit's layer "
                    f"{ours} (attnkit read the config differently; the two must agree)"
                )
        if not settings["is_causal"]:
            raise UnsupportedError(f"layer {index}: attnkit runs causal decoder attention; this "
                                   "module asks for bidirectional attention")
        sinks = getattr(module, "sinks", None)
        if layer["has_sinks"] != (sinks is not None):
            raise InvalidArgumentError(
                f"layer {index}: the module {'has' if sinks is not None else 'has no'} learned "
                f"sinks, attnkit's layer {'has' if layer['has_sinks'] else 'has none'}"
            )
        if sinks is not None:
            self.stack.set_sinks(index, sinks.detach().to("cpu", torch.float32).numpy())

    def _plan(self, attention_mask: torch.Tensor | None, query: torch.Tensor, index: int) -> _Step:
        """A new step: one attnkit request per row, with the row's valid new columns."""
        batch, length = query.shape[0], query.shape[2]
        past = self.layers[index].get_seq_length() - length
        if not self._requests:
            self._requests = [next(_request_ids) for _ in range(batch)]
            self._computed = [0] * batch
            for request in self._requests:
                self.stack.add_request(request)
        elif batch != len(self._requests):
            self._fixed_rows_only(f"take a batch of {batch} rows after {len(self._requests)}")
        if attention_mask is None:
            valid = torch.ones(batch, length, dtype=torch.bool, device=query.device)
            earlier = [past] * batch
        else:
            if attention_mask.dim() != 2 or tuple(attention_mask.shape) != (batch, past + length):
                raise InvalidArgumentError(
                    f"attnkit needs the 2D padding mask [batch {batch}, columns {past + length}] "
                    f"of the whole sequence, got a mask of shape {tuple(attention_mask.shape)} "
                    "(a 4D or custom mask cannot be honoured)"
                )
            mask = attention_mask.bool()
            valid = mask[:, past:]
            earlier = mask[:, :past].sum(dim=1).tolist()
        if earlier != self._computed:
            raise InvalidArgumentError(
                f"the attention mask counts {earlier} earlier tokens per row, attnkit's cache "
                f"holds {self._computed}: rows were reordered or the mask changed between steps"
            )
        counts = valid.sum(dim=1).tolist()
        self.stack.plan_step(
            [(r, c, n) for r, c, n in zip(self._requests, self._computed, counts) if n > 0]
        )
        self._computed = [c + n for c, n in zip(self._computed, counts)]
        rows = None if all(n == length for n in counts) else valid.reshape(-1).nonzero().squeeze(1)
        return _Step(batch, length, rows)


def attnkit_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function contract: query [B, H, S, D], key/value as the cache's
    update() returned them, the mask from attnkit_padding_mask; returns ([B, S, H, Dv], no
    attention weights). The settings are those transformers would apply; they are checked
    against the stack's layer, which applies its own (and its learned sinks, taken from
    module.sinks, rather than the s_aux argument)."""
    cache = _take_handoff(module, key, value)
    if module.training and dropout > 0:
        raise UnsupportedError("attnkit attention has no dropout; run the model in eval() mode")
    if torch.is_grad_enabled() and query.requires_grad:
        raise UnsupportedError(
            "attnkit attention has no backward: run the model under torch.no_grad() or "
            "torch.inference_mode() (generate() does)"
        )
    settings = {
        "scaling": scaling,
        "sliding_window": sliding_window,
        "softcap": softcap,
        "is_causal": getattr(module, "is_causal", True) if is_causal is None else is_causal,
    }
    return cache._attend(module, query, key, value, attention_mask, settings), None


def attnkit_padding_mask(
    attention_mask: torch.Tensor | None = None, **kwargs: Any
) -> torch.Tensor | None:
    """transformers' mask-function contract, answered with the 2D padding mask itself
    ([batch, columns so far], True at tokens), or None when the model was given none."""
    return attention_mask


AttentionInterface.register(IMPLEMENTATION, attnkit_attention_forward)
AttentionMaskInterface.register(IMPLEMENTATION, attnkit_padding_mask)
