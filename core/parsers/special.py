"""Dropping the text of special tokens, as vLLM 0.33's parser engine does.

vLLM's engine-based parsers (qwen3 reasoning, qwen3_xml, glm45, kimi_k2, mistral with `[THINK]`)
lex the output with one extra "drop" terminal per tokenizer special token
(`tokenizer.all_special_tokens`) that is not one of the parser's own markers: `<|endoftext|>`,
`<|im_end|>`, `<|box_start|>`... never reach reasoning, content or tool arguments, wherever they
appear. The classic parsers (hermes alone, deepseek_r1, llama3_json, ...) keep that text.

`SpecialTokenDropper` does the same on text, streaming: the only state is the few characters at
the end of a chunk that may still become a special token (a proper prefix of one), so the work
per chunk is O(len(chunk) + longest token).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from core.tokenizer import Tokenizer


def special_token_texts(tokenizer: Tokenizer) -> frozenset[str]:
    """The texts of transformers' `all_special_tokens` (named and additional special tokens)."""
    texts = tokenizer.convert_ids_to_tokens(sorted(tokenizer.all_special_ids))
    return frozenset(t for t in texts if t)


class SpecialTokenDropper:
    """Removes every occurrence of the given token texts; holds back a possible partial one."""

    def __init__(self, tokens: Iterable[str]) -> None:
        ordered = sorted(set(tokens), key=lambda t: (-len(t), t))  # longest first: a longer token wins
        self.tokens = tuple(ordered)
        self._pattern = re.compile("|".join(re.escape(t) for t in ordered))
        self._first_chars = frozenset(t[0] for t in ordered)
        self._prefixes = frozenset(t[:k] for t in ordered for k in range(1, len(t)))
        self._longest_prefix = max((len(t) - 1 for t in ordered), default=0)

    def __bool__(self) -> bool:
        return bool(self.tokens)

    def apply(self, text: str) -> str:
        """Non-streaming: all the text at once."""
        return self._pattern.sub("", text) if any(c in text for c in self._first_chars) else text

    def feed(self, state: dict, text: str) -> str:
        """Streaming: `state["sp"]` holds the partial token left by the previous chunk."""
        held = state.get("sp") or ""
        if not held and not any(c in text for c in self._first_chars):
            return text
        parts = self._pattern.split(held + text)  # the text between dropped tokens
        tail = parts[-1]  # only text after the last dropped token may start a new one
        keep = self._partial_suffix(tail)
        state["sp"] = tail[len(tail) - keep:] if keep else ""
        if keep:
            parts[-1] = tail[:len(tail) - keep]
        return "".join(parts)

    def finish(self, state: dict) -> str:
        held, state["sp"] = state.get("sp") or "", ""
        return held

    def _partial_suffix(self, text: str) -> int:
        for k in range(min(self._longest_prefix, len(text)), 0, -1):
            if text[-k:] in self._prefixes:
                return k
        return 0


@functools.lru_cache(maxsize=64)
def dropper_for(tokenizer: Tokenizer, markers: frozenset[str]) -> SpecialTokenDropper:
    """The dropper for a tokenizer and a parser's markers (built once: parsers are per request)."""
    return SpecialTokenDropper(special_token_texts(tokenizer) - markers)
