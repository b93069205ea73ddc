"""How a model is named from Python: a config.json path (or a folder holding one), an
embedded model name, a config.json dict, or a ``transformers.PretrainedConfig``."""

from __future__ import annotations

import json
import os
from typing import Any


def model_source(model: Any) -> tuple[str, str, str]:
    """(kind, source, name) for the C++ loader: ("path", path-or-name, "") or
    ("json", config text, name)."""
    if isinstance(model, (str, os.PathLike)):
        return "path", os.fspath(model), ""
    if isinstance(model, dict):
        name = str(model.get("_name_or_path") or model.get("model_type") or "config dict")
        return "json", json.dumps(model), name
    to_json_string = getattr(model, "to_json_string", None)
    if callable(to_json_string):  # transformers.PretrainedConfig
        name = getattr(model, "name_or_path", "") or getattr(model, "model_type", "")
        return "json", to_json_string(use_diff=False), str(name or type(model).__name__)
    raise TypeError(
        "model must be a config.json path, an embedded model name, a config dict or a "
        f"transformers.PretrainedConfig; got {type(model).__name__}"
    )


def attention_config_text(attention_config: Any) -> str:
    """The attention config as the C++ side reads it: JSON text, a file path, or ''."""
    if attention_config is None:
        return ""
    if isinstance(attention_config, dict):
        return json.dumps(attention_config)
    if isinstance(attention_config, (str, os.PathLike)):
        return os.fspath(attention_config)
    raise TypeError(
        "attention_config must be a dict (keys: backend, backend_per_kind, override_mode), "
        f"JSON text or a JSON file path; got {type(attention_config).__name__}"
    )


def dtype_name(dtype: Any) -> str | None:
    """'bfloat16' for 'bfloat16', 'bf16', torch.bfloat16 or numpy.float16-like names."""
    if dtype is None:
        return None
    text = str(dtype)
    return text.removeprefix("torch.")
