"""attnkit inside other frameworks' models. Each integration is its own module, imported on
purpose, because importing it registers attnkit with that framework:

- ``attnkit.integrations.transformers``: Hugging Face transformers models with
  ``attn_implementation="attnkit"`` and a ``PagedCache``.
"""
