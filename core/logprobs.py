"""Logprobs: from the engine's integer-id form to OpenAI's chat and completion shapes.

The tokens-only engine has no tokenizer, so it reports ids (docs/vllm-wire-spec.md §2.3):
    0.33:   {"content": [{"token_id", "logprob", "rank", "top_logprobs": [{"token_id", "logprob", "rank"}]}]}
    legacy: {"content": [{"token": "token_id:N", "logprob", "bytes": null, "top_logprobs": [...same...]}]}
Both are accepted (`normalize_content`) and resolved the way vLLM's derender does (docs/vllm-wire-spec.md §2.4
step 9): each id becomes its single-token text and UTF-8 bytes, with the SentencePiece
leading space restored; a text ending in U+FFFD (a byte-fallback fragment) is re-decoded with
up to 4 preceding sampled ids as context; `top_logprobs` is cut to the request's limit.

Single-token texts are cached per tokenizer, so resolving costs a dict lookup per candidate
in the common case. Output is plain dicts in vLLM's field order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from core.tokenizer import Tokenizer

CONTEXT_WINDOW = 4  # preceding sampled ids used to repair U+FFFD (vLLM: _correct_decoded_token)
_LEGACY_PREFIX = "token_id:"
_REPLACEMENT = "\ufffd"


# -- request-side cuts (vLLM: chat_top_logprobs_limit / completion_top_logprobs_limit) ------

def chat_top_limit(logprobs: bool | None, top_logprobs: int | None,
                   logprob_token_ids: Sequence[int] | None, has_request: bool = True) -> int | None:
    """How many candidates chat keeps per position; None = all of them."""
    if not has_request or not logprobs:
        return None
    if logprob_token_ids or top_logprobs == -1:
        return None
    return top_logprobs or 0


def completion_top_limit(logprobs: int | None, logprob_token_ids: Sequence[int] | None,
                         has_request: bool = True) -> int | None:
    """How many candidates completions keep per position (logprobs + 1); None = all."""
    if not has_request or logprob_token_ids or logprobs is None or logprobs == -1:
        return None
    return max(logprobs + 1, 0)


# -- input normalization ----------------------------------------------------------------

def _legacy_id(token: Any) -> int:
    if isinstance(token, str) and token.startswith(_LEGACY_PREFIX):
        try:
            return int(token[len(_LEGACY_PREFIX):])
        except ValueError:
            pass
    raise ValueError(f"logprob token {token!r} is neither a token_id nor a 'token_id:N' placeholder")


def normalize_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """One logprob entry (either shape) as {"token_id", "logprob", "top_logprobs": [...]}."""
    if "token_id" in entry and entry["token_id"] is not None:
        token_id = entry["token_id"]
    else:
        token_id = _legacy_id(entry.get("token"))
    top = entry.get("top_logprobs") or []
    return {"token_id": token_id, "logprob": entry.get("logprob", -9999.0),
            "top_logprobs": [normalize_candidate(c) for c in top]}


def normalize_candidate(candidate: dict[str, Any]) -> dict[str, Any]:
    if "token_id" in candidate and candidate["token_id"] is not None:
        token_id = candidate["token_id"]
    else:
        token_id = _legacy_id(candidate.get("token"))
    return {"token_id": token_id, "logprob": candidate.get("logprob", -9999.0)}


def normalize_content(content: Iterable[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """A `logprobs.content` list in either shape, normalized; None stays None."""
    if content is None:
        return None
    return [normalize_entry(e) for e in content]


# -- token texts ------------------------------------------------------------------------

def leading_space_marker(tokenizer: Tokenizer) -> str | None:
    """The Metaspace replacement char when the pre-tokenizer is Metaspace (vLLM's test), else None."""
    cached = getattr(tokenizer, "_leading_space_marker", False)
    if cached is not False:
        return cached
    marker = None
    component = tokenizer.backend.pre_tokenizer
    try:  # the component's own JSON (serializing the whole tokenizer would cost ~1 s)
        pre = json.loads(component.__getstate__()) if component is not None else {}
    except (ValueError, AttributeError, TypeError):
        pre = {}
    candidates = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    for sub in candidates:
        if isinstance(sub, dict) and sub.get("type") == "Metaspace":
            marker = sub.get("replacement", "▁")
            break
    tokenizer._leading_space_marker = marker  # type: ignore[attr-defined]
    return marker


class TokenTexts:
    """Per-tokenizer cache of single-token texts and bytes (vLLM's decode_token_ids)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.marker = leading_space_marker(tokenizer)
        self._cache: dict[int, tuple[str, list[int] | None]] = {}

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> TokenTexts:
        texts = getattr(tokenizer, "_token_texts", None)
        if texts is None:
            texts = cls(tokenizer)
            tokenizer._token_texts = texts  # type: ignore[attr-defined]
        return texts

    def get(self, token_id: int) -> tuple[str, list[int] | None]:
        hit = self._cache.get(token_id)
        if hit is not None:
            return hit
        # ids outside the vocabulary go to the Rust lookup: None, or OverflowError for negative ids
        # and ids past u32, as in vLLM (callers turn it into a 400)
        piece = self.tokenizer.id_to_token(token_id)
        if piece is None and not 0 <= token_id <= self.tokenizer.max_token_id:
            piece = self.tokenizer.backend.id_to_token(token_id)
        if piece is None:
            result: tuple[str, list[int] | None] = ("", None)
        else:
            text = self.tokenizer.decode([token_id]) or ""
            if self.marker is not None:
                text = _restore_leading_spaces(piece, text, self.marker)
            result = (text, list(text.encode("utf-8", errors="replace")))
        if len(self._cache) < 1_000_000:
            self._cache[token_id] = result
        return result

    def repair(self, token_id: int, context: Sequence[int]) -> str:
        """Text of a byte-fallback fragment, using up to 4 preceding sampled ids as context."""
        decode = self.tokenizer.decode
        for n in range(1, min(len(context), CONTEXT_WINDOW) + 1):
            ctx = list(context[-n:])
            full = decode(ctx + [token_id])
            if full.endswith(_REPLACEMENT):
                continue
            clean_end = len(ctx)
            for j in range(len(ctx) - 1, -1, -1):
                if decode([ctx[j]]).endswith(_REPLACEMENT):
                    clean_end = j
                else:
                    break
            clean_prefix = decode(ctx[:clean_end]) if clean_end > 0 else ""
            if full.startswith(clean_prefix):
                return full[len(clean_prefix):]
            common = 0
            for a, b in zip(clean_prefix, full):
                if a != b:
                    break
                common += 1
            return full[common:]
        return ""


def _restore_leading_spaces(piece: str, text: str, marker: str) -> str:
    markers = len(piece) - len(piece.lstrip(marker))
    if not markers:
        return text
    missing = markers - (len(text) - len(text.lstrip(" ")))
    return " " * missing + text if missing > 0 else text


# -- resolution -------------------------------------------------------------------------

def resolve_chat_logprobs(texts: TokenTexts, content: list[dict[str, Any]] | None,
                          top_limit: int | None, context: Sequence[int] = ()) -> dict[str, Any]:
    """Chat `logprobs` object: {"content": [{token, logprob, bytes, top_logprobs}]} or {"content": null}.

    `content` is normalized (see `normalize_content`); `context` holds the sampled ids that
    precede it (the stream's last 4), for U+FFFD repair across chunk boundaries.
    """
    if content is None:
        return {"content": None}
    ctx = list(context)
    get = texts.get
    out = []
    for entry in content:
        tid = entry["token_id"]
        top = entry["top_logprobs"] if top_limit is None else entry["top_logprobs"][:top_limit]
        token, token_bytes = get(tid)
        if token.endswith(_REPLACEMENT):
            token = texts.repair(tid, ctx)
            token_bytes = list(token.encode("utf-8", errors="replace"))
        resolved_top = []
        for cand in top:
            ctext, cbytes = get(cand["token_id"])
            if ctext.endswith(_REPLACEMENT):
                ctext = texts.repair(cand["token_id"], ctx)
                cbytes = list(ctext.encode("utf-8", errors="replace"))
            resolved_top.append({"token": ctext, "logprob": cand["logprob"], "bytes": cbytes})
        out.append({"token": token, "logprob": entry["logprob"], "bytes": token_bytes,
                    "top_logprobs": resolved_top})
        ctx.append(tid)
    return {"content": out}


def completion_logprobs(chat_logprobs: dict[str, Any], content: list[dict[str, Any]] | None,
                        text_offset: int = 0) -> dict[str, Any]:
    """Completion `logprobs`: parallel lists with absolute `text_offset` (docs/vllm-wire-spec.md §2.5).

    A position whose source had no candidates gets `null` in `top_logprobs`; otherwise a
    {token: logprob} dict of the kept candidates.
    """
    resolved = chat_logprobs.get("content")
    offsets: list[int] = []
    token_logprobs: list[float | None] = []
    tokens: list[str] = []
    tops: list[dict[str, float] | None] = []
    if resolved is not None:
        offset = text_offset
        for entry, source in zip(resolved, content or ()):
            offsets.append(offset)
            tokens.append(entry["token"])
            token_logprobs.append(entry["logprob"])
            tops.append({t["token"]: t["logprob"] for t in entry["top_logprobs"]}
                        if source["top_logprobs"] else None)
            offset += len(entry["token"])
    return {"text_offset": offsets, "token_logprobs": token_logprobs, "tokens": tokens,
            "top_logprobs": tops}


def context_tail(context: Sequence[int], new_ids: Sequence[int]) -> list[int]:
    """The last 4 sampled ids after this chunk (carried in the stream state)."""
    return (list(context) + list(new_ids))[-CONTEXT_WINDOW:]
