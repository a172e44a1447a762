"""One module per parser family; importing this package registers them all."""

from core.parsers.families import deepseek, glm45, hermes, kimi_k2, llama, mistral, pythonic, qwen3_xml, think  # noqa: F401
