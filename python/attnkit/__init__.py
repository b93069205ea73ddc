"""attnkit: pluggable attention backends over a paged KV cache, from Python.

    import attnkit
    attnkit.backends()                       # what `attnkit backends --json` prints
    attnkit.explain("gemma-3-1b-it")         # what `attnkit explain --json` prints
    stack = attnkit.AttentionStack("llama-3.1-8b-instruct", dtype="float32")
    stack.add_request(0)
    stack.plan_step([(0, 0, 5)])
    stack.forward(layer, q, k, v, out)       # any DLPack arrays, never copied

See docs/python.md.
"""

from __future__ import annotations

import json
from typing import Any

from . import _core
from ._errors import (
    Error,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfMemoryError,
    PluginError,
    UnsupportedError,
)
from ._model import attention_config_text, dtype_name, model_source
from ._stack import AttentionStack

__version__ = _core.__version__
has_cuda: bool = _core.has_cuda

__all__ = [
    "AttentionStack",
    "Error",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "OutOfMemoryError",
    "PluginError",
    "UnsupportedError",
    "backends",
    "embedded_models",
    "explain",
    "has_cuda",
]


def embedded_models() -> list[str]:
    """Names of the model configs carried by the library (usable wherever a model is)."""
    return list(_core.embedded_models())


def backends(platform: str | None = None, *, text: bool = False) -> Any:
    """Every registered backend with its capabilities and whether this build can run it on
    `platform` ("cpu", "cuda:9.0"; None = this machine): the data of
    `attnkit backends --json` (docs/schemas/backends.schema.json), or its text."""
    if text:
        return _core.backends_text(platform or "")
    return json.loads(_core.backends_json(platform or ""))


def explain(
    model: Any,
    attention_config: Any = None,
    platform: str | None = None,
    *,
    dtype: Any = None,
    kv_cache_dtype: str = "auto",
    block_size: int | None = None,
    text: bool = False,
) -> Any:
    """For every layer of `model`, the backend chosen and why, and the KV cache it shapes:
    the data of `attnkit explain --json` (docs/schemas/explain.schema.json), or its text.

    model: a config.json path or folder, an embedded model name, a config dict or a
    transformers.PretrainedConfig. attention_config: a dict such as
    {"backend": "CPU_FLASH", "backend_per_kind": {"sliding_window": "REFERENCE"}}, JSON text
    or a file. platform: "cpu", "cuda:MAJOR.MINOR", or None (this machine)."""
    kind, source, name = model_source(model)
    args = (
        kind,
        source,
        name,
        platform or "",
        dtype_name(dtype),
        kv_cache_dtype,
        block_size,
        attention_config_text(attention_config),
    )
    if text:
        return _core.explain_text(*args)
    return json.loads(_core.explain_json(*args))
