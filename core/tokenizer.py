"""The tokenizer as vLLM sees it, on top of HF `tokenizers` (Rust).

We talk to `tokenizers.Tokenizer` directly instead of a transformers wrapper: encode and
decode are the hot path and the wrapper adds Python overhead per call. What the
wrapper would add on top (special-token bookkeeping, `convert_tokens_to_string`, the
chat template and special-tokens map from tokenizer_config.json) is reproduced here,
matching transformers' fast-tokenizer semantics, which is what vLLM uses.

Construction takes already-read data (`tokenizer_json` text, `tokenizer_config` dict):
file access lives in `core.model_files`, called by the I/O layer.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from tokenizers import Tokenizer as RustTokenizer

# the names transformers puts in `special_tokens_map` (and so in the template namespace)
SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                      "cls_token", "mask_token")


def _token_content(value: Any) -> str | None:
    """tokenizer_config.json writes a special token as a string or an AddedToken dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        content = value.get("content")
        return content if isinstance(content, str) else None
    return None


class Tokenizer:
    """A fast tokenizer with the transformers-compatible surface that render/derender need."""

    # `backend` is a Hugging Face `tokenizers.Tokenizer` (Mistral's own tokenizer has none)
    hf_backend = True

    def __init__(self, tokenizer_json: str, tokenizer_config: dict[str, Any] | None = None) -> None:
        self.backend = RustTokenizer.from_str(tokenizer_json)
        config = tokenizer_config or {}
        self.config = config
        self.special_tokens_map: dict[str, str] = {}
        for key in SPECIAL_TOKEN_KEYS:
            content = _token_content(config.get(key))
            if content is not None:
                self.special_tokens_map[key] = content
        # transformers 4 names them `additional_special_tokens`, 5 also `extra_special_tokens`
        listed = list(config.get("additional_special_tokens") or [])
        extra_field = config.get("extra_special_tokens") or []
        listed += list(extra_field.values() if isinstance(extra_field, dict) else extra_field)
        extra = list(dict.fromkeys(c for c in map(_token_content, listed) if c is not None))
        self.additional_special_tokens = extra

        added = self.backend.get_added_tokens_decoder()  # id -> AddedToken
        # transformers' `all_special_ids`: the named special tokens and `additional_special_tokens`
        # only, NOT every added token flagged special (Llama-3's 250 reserved tokens are not in
        # it). vLLM's detokenizer skips exactly this set, so we must too.
        special_ids: set[int] = set()
        for content in [*self.special_tokens_map.values(), *extra]:
            tid = self.backend.token_to_id(content)
            if tid is not None:
                special_ids.add(tid)
        self.all_special_ids: frozenset[int] = frozenset(special_ids)
        # what `skip_special_tokens` drops when decoding (Mistral's own tokenizer keeps a few)
        self.decode_skip_ids: frozenset[int] = self.all_special_ids
        self.added_token_ids: frozenset[int] = frozenset(added)
        self.vocab_size: int = self.backend.get_vocab_size(with_added_tokens=True)
        # ids may exceed the size when added tokens leave gaps; vLLM bounds by len(tokenizer)
        self.max_token_id: int = max([self.vocab_size - 1, *added.keys()]) if added else self.vocab_size - 1
        self.bos_token_id = self.token_to_id(self.special_tokens_map.get("bos_token"))
        self.eos_token_id = self.token_to_id(self.special_tokens_map.get("eos_token"))
        self.chat_template: str | dict[str, str] | None = _chat_template(config.get("chat_template"))
        decoder = self.backend.decoder
        self._decoder = decoder
        self.decoder_type: str | None = _component_type(decoder)
        self.pre_tokenizer_type: str | None = _component_type(self.backend.pre_tokenizer)
        # SentencePiece-style tokenizers write a word-initial space as "▁" in the token
        self._id_to_token_cache: list[str | None] = [None] * (self.max_token_id + 1)
        for i in range(self.max_token_id + 1):
            self._id_to_token_cache[i] = self.backend.id_to_token(i)

    def __len__(self) -> int:
        return self.vocab_size

    # -- ids <-> text -------------------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    @functools.cached_property
    def text_backend(self) -> RustTokenizer:
        """A copy of the backend that reads special added tokens as text (transformers'
        `split_special_tokens=True`; added tokens that are not special still match), for prompts
        whose message text is tokenized apart from their structure (core/renderers/kimi_k3.py).
        Built on first use; the backend itself is never switched (it is shared across threads)."""
        backend = RustTokenizer.from_str(self.backend.to_str())
        backend.encode_special_tokens = True
        return backend

    def encode_with_offsets(self, text: str, add_special_tokens: bool = False
                            ) -> tuple[list[int], list[tuple[int, int]]]:
        enc = self.backend.encode(text, add_special_tokens=add_special_tokens)
        return enc.ids, enc.offsets

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    # -- ids <-> token strings (the incremental detokenizer works on these) ------------

    def id_to_token(self, token_id: int) -> str | None:
        if 0 <= token_id <= self.max_token_id:
            return self._id_to_token_cache[token_id]
        return None

    def token_to_id(self, token: str | None) -> int | None:
        if token is None:
            return None
        return self.backend.token_to_id(token)

    def token_strings(self, skip_special_tokens: bool) -> list[str | None]:
        """Each id's token string for the incremental detokenizer (Mistral's own tokenizer gives
        partial-UTF-8 pieces differently with and without skip_special_tokens)."""
        return self._id_to_token_cache

    def convert_ids_to_tokens(self, ids: Iterable[int], skip_special_tokens: bool = False) -> list[str | None]:
        skip = self.all_special_ids if skip_special_tokens else frozenset()
        cache = self._id_to_token_cache
        top = self.max_token_id
        out: list[str | None] = []
        for i in ids:
            if i in skip:
                continue
            out.append(cache[i] if 0 <= i <= top else None)
        return out

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        # transformers' fast tokenizers: the backend decoder, or a plain space join
        if self._decoder is None:
            return " ".join(tokens)
        return self._decoder.decode(tokens)

    def get_vocab(self) -> dict[str, int]:
        return self.backend.get_vocab(with_added_tokens=True)


def _chat_template(value: Any) -> str | dict[str, str] | None:
    """tokenizer_config.json stores one template as a string, several as [{name, template}]."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {t["name"]: t["template"] for t in value
                 if isinstance(t, dict) and "name" in t and "template" in t}
        return named or None
    return None


def _component_type(component: Any) -> str | None:
    if component is None:
        return None
    return type(component).__name__
