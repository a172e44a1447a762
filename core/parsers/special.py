"""The texts of a tokenizer's special tokens, as vLLM 0.33's parser engine drops them.

vLLM's engine-based parsers (qwen3 reasoning, qwen3_xml, glm45, kimi_k2, mistral) lex the output
with one extra "drop" terminal per tokenizer special token (`tokenizer.all_special_tokens`) that
is not one of the grammar's own literals: `<|endoftext|>`, `<|im_end|>`, `<|box_start|>`...
never reach reasoning, content or tool arguments, wherever they appear (core/parsers/engine.py).
The classic parsers (hermes alone, deepseek_r1, llama3_json, ...) keep that text.
"""

from __future__ import annotations

from core.tokenizer import Tokenizer


def special_token_texts(tokenizer: Tokenizer) -> frozenset[str]:
    """The texts of transformers' `all_special_tokens` (named and additional special tokens)."""
    texts = tokenizer.convert_ids_to_tokens(sorted(tokenizer.all_special_ids))
    return frozenset(t for t in texts if t)
