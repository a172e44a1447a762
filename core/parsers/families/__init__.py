"""One module per parser family; importing this package registers them all."""

from core.parsers.families import deepseek, hermes, llama, think  # noqa: F401
