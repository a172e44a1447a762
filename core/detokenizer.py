"""Incremental detokenization, exactly as vLLM's engine and derender do it (docs/vllm-wire-spec.md §4).

Why not `tokenizer.decode(all_ids)` on every chunk: that is O(output) per chunk. Why not
`tokenizers.decoders.DecodeStream`: its state cannot be serialized, and it seeds and windows
slightly differently from vLLM (it decodes ids through the full pipeline, vLLM converts the
window's token strings with the backend decoder). We reproduce vLLM's algorithm instead:

* the window is a short list of token strings, `prefix` and `read` offsets into it;
* each new id appends its token string (skip-special ids append nothing, ids outside the
  vocabulary append ""), then `prefix_text = decode(window[prefix:read])` and
  `new_text = decode(window[prefix:])`;
* when `new_text` is not longer than `prefix_text`, or ends with U+FFFD (a partial UTF-8
  sequence from byte-level or byte-fallback tokens), nothing is emitted and the offsets stay;
* otherwise `new_text[len(prefix_text):]` is emitted, `prefix = read`, `read = len(window)`,
  and the window is trimmed to `window[prefix:]` (offsets rebased), as vLLM's derender does.

The window is seeded from the last 7 prompt ids (`prefix = read - 5`), so SentencePiece /
Metaspace tokenizers keep the first output token's leading space, as vLLM does.

Cost per token: two calls into the Rust decoder on a window of a handful of tokens, flat in
the output position. The `prefix_text` of the previous step is reused when the offsets did
not move. State: the window's ids (not strings: ids are shorter and cannot be forged into
arbitrary text) and the two offsets; see `to_state` / `from_state`.

A degenerate output (hundreds of consecutive tokens that each decode to nothing or end in a
partial character) would grow vLLM's window without bound. We bound it at `MAX_WINDOW`
tokens: past that, the pending text is emitted as it decodes (with its U+FFFD) and the window
restarts. Real text never gets near it (a character is at most 4 byte tokens).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from core.tokenizer import Tokenizer

# vLLM: INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET; the seed reads OFFSET + 2 prompt ids
SEED_OFFSET = 5
SEED_IDS = SEED_OFFSET + 2
MAX_WINDOW = 64
REPLACEMENT_CHAR = "\ufffd"
# a window slot whose id had no token string (outside the vocabulary): decodes as ""
_NO_TOKEN = -1


def skip_special_ids(tokenizer: Tokenizer) -> frozenset[int]:
    """The ids `skip_special_tokens` removes: transformers' `all_special_ids`, as vLLM uses.

    Llama-3's `<|reserved_special_token_N|>` are added tokens flagged special but not in that
    set, so they stay in the text, as in vLLM (`tokenizer.decode` would drop them).
    """
    return tokenizer.decode_skip_ids


def decode_params(tokenizer: Tokenizer | None, skip_special_tokens: bool | None,
                  spaces_between_special_tokens: bool | None) -> tuple[bool, bool]:
    """(skip_special_tokens, spaces_between_special_tokens) as vLLM's engine derives them.

    `None` means "not given": skip defaults to true, spaces to true. Our tokenizer is always a
    fast (HF `tokenizers`) one, for which vLLM forces spaces on when skipping; the flag has
    no effect on the fast decode path anyway, it is kept for the record.
    """
    skip = skip_special_tokens is not False
    spaces = spaces_between_special_tokens is not False
    if skip:
        spaces = True
    return skip, spaces


class IncrementalDetokenizer:
    """One output sequence's incremental decoder. `step(id)` / `feed(ids)` return new text."""

    __slots__ = ("tokenizer", "skip_special_tokens", "spaces_between_special_tokens",
                 "_ids", "_tokens", "_prefix", "_read", "_prefix_text", "_prefix_key",
                 "_skip_ids", "_cache", "_vocab_len", "_decode")

    def __init__(self, tokenizer: Tokenizer, *, skip_special_tokens: bool = True,
                 spaces_between_special_tokens: bool = True) -> None:
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.spaces_between_special_tokens = spaces_between_special_tokens
        self._ids: list[int] = []        # window ids (_NO_TOKEN for "")
        self._tokens: list[str] = []     # window token strings, parallel to _ids
        self._prefix = 0
        self._read = 0
        self._prefix_text = ""
        self._prefix_key: tuple[int, int] | None = (0, 0)
        self._skip_ids = skip_special_ids(tokenizer) if skip_special_tokens else frozenset()
        self._cache = tokenizer.token_strings(skip_special_tokens)
        self._vocab_len = len(tokenizer)
        # the backend decoder itself (one Python call less per decode than the wrapper)
        decoder = tokenizer._decoder
        self._decode = decoder.decode if decoder is not None else tokenizer.convert_tokens_to_string

    # -- construction ---------------------------------------------------------------

    @classmethod
    def seeded(cls, tokenizer: Tokenizer, prompt_token_ids: Sequence[int] | None, *,
               skip_special_tokens: bool = True,
               spaces_between_special_tokens: bool = True) -> IncrementalDetokenizer:
        """A decoder primed with the prompt's tail, as vLLM seeds it (docs/vllm-wire-spec.md §2.4 step 2)."""
        detok = cls(tokenizer, skip_special_tokens=skip_special_tokens,
                    spaces_between_special_tokens=spaces_between_special_tokens)
        if prompt_token_ids:
            detok._seed(prompt_token_ids[-SEED_IDS:])
        return detok

    def _seed(self, tail: Iterable[int]) -> None:
        cache, top = self._cache, len(self._cache)
        backend = self.tokenizer.backend
        for tid in tail:
            if tid in self._skip_ids:
                continue
            # like vLLM, ids outside the vocabulary go through the Rust lookup: None, or an
            # OverflowError for ids that do not fit in u32 (the caller turns it into a 400)
            token = cache[tid] if 0 <= tid < top else backend.id_to_token(tid)
            if token is None:  # unknown prompt id: vLLM keeps an empty slot
                self._ids.append(_NO_TOKEN)
                self._tokens.append("")
            else:
                self._ids.append(tid)
                self._tokens.append(token)
        self._read = len(self._tokens)
        self._prefix = max(self._read - SEED_OFFSET, 0)
        self._prefix_key = None

    # -- decoding -------------------------------------------------------------------

    def step(self, token_id: int) -> str:
        """Consume one id; return the text it completes ("" while a character is partial)."""
        if token_id in self._skip_ids:
            # vLLM converts [id] with skip_special_tokens: nothing is appended, but the
            # window is still decoded (and may release text held by an earlier step)
            pass
        elif 0 <= token_id < self._vocab_len:
            token = self._cache[token_id] if token_id < len(self._cache) else None
            if token is None:
                self._ids.append(_NO_TOKEN)
                self._tokens.append("")
            else:
                self._ids.append(token_id)
                self._tokens.append(token)
        else:
            self._ids.append(_NO_TOKEN)
            self._tokens.append("")

        tokens = self._tokens
        prefix, read = self._prefix, self._read
        key = (prefix, read)
        if self._prefix_key == key:
            prefix_text = self._prefix_text
        else:
            prefix_text = self._decode(tokens[prefix:read]) if read > prefix else ""
            self._prefix_text, self._prefix_key = prefix_text, key
        new_text = self._decode(tokens[prefix:])
        if len(new_text) <= len(prefix_text) or new_text.endswith(REPLACEMENT_CHAR):
            if len(tokens) - prefix > MAX_WINDOW:
                return self._force_release(prefix_text, new_text)
            return ""
        # advance: prefix = old read, read = end; trim everything before the new prefix
        del tokens[:read]
        del self._ids[:read]
        self._prefix = 0
        self._read = len(tokens)
        self._prefix_key = None
        return new_text[len(prefix_text):]

    def _force_release(self, prefix_text: str, new_text: str) -> str:
        """Bound a degenerate window: emit what decodes now and restart after it."""
        out = new_text[len(prefix_text):] if new_text.startswith(prefix_text) else ""
        keep = SEED_OFFSET
        del self._tokens[:-keep]
        del self._ids[:-keep]
        self._read = len(self._tokens)
        self._prefix = 0
        self._prefix_key = None
        return out

    def feed(self, token_ids: Sequence[int]) -> str:
        """Consume several ids; the concatenation of their `step` texts."""
        step = self.step
        if len(token_ids) == 1:  # type: ignore[arg-type]
            return step(token_ids[0])  # type: ignore[index]
        return "".join([step(t) for t in token_ids])

    # -- state ----------------------------------------------------------------------

    @property
    def window_size(self) -> int:
        return len(self._ids)

    def to_state(self) -> list[Any]:
        """A small JSON value: [window ids, prefix, read] (ids -1 for empty slots).

        Only `window[prefix:]` is ever read again, so the state starts there (as vLLM's
        derender trims `prev_tokens`)."""
        p = self._prefix
        return [self._ids[p:], 0, self._read - p]

    @classmethod
    def from_state(cls, tokenizer: Tokenizer, state: Any, *, skip_special_tokens: bool = True,
                   spaces_between_special_tokens: bool = True) -> IncrementalDetokenizer:
        """Rebuild from `to_state()`; raises ValueError on anything malformed."""
        if not (isinstance(state, list) and len(state) == 3):
            raise ValueError("detokenizer state must be [ids, prefix, read]")
        ids, prefix, read = state
        if not isinstance(ids, list) or len(ids) > MAX_WINDOW + SEED_IDS:
            raise ValueError("detokenizer window is not a bounded list")
        if not (isinstance(prefix, int) and isinstance(read, int)) or isinstance(prefix, bool) \
                or isinstance(read, bool) or not 0 <= prefix <= read <= len(ids):
            raise ValueError("detokenizer offsets out of range")
        detok = cls(tokenizer, skip_special_tokens=skip_special_tokens,
                    spaces_between_special_tokens=spaces_between_special_tokens)
        cache, top = detok._cache, len(detok._cache)
        tokens: list[str] = []
        for tid in ids:
            if not isinstance(tid, int) or isinstance(tid, bool):
                raise ValueError("detokenizer window ids must be integers")
            if tid == _NO_TOKEN:
                tokens.append("")
                continue
            token = cache[tid] if 0 <= tid < top else None
            if token is None:
                raise ValueError("detokenizer window id outside the vocabulary")
            tokens.append(token)
        detok._ids = list(ids)
        detok._tokens = tokens
        detok._prefix, detok._read = prefix, read
        detok._prefix_key = None
        return detok


def detokenize(tokenizer: Tokenizer, token_ids: Sequence[int], *,
               prompt_token_ids: Sequence[int] | None = None, skip_special_tokens: bool = True,
               spaces_between_special_tokens: bool = True) -> str:
    """One-shot text of `token_ids` through the incremental algorithm (what vLLM returns)."""
    detok = IncrementalDetokenizer.seeded(tokenizer, prompt_token_ids,
                                          skip_special_tokens=skip_special_tokens,
                                          spaces_between_special_tokens=spaces_between_special_tokens)
    return detok.feed(token_ids)
