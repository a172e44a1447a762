"""Small text helpers shared by the parser families (tag splitting with a minimal hold-back)."""

from __future__ import annotations

from typing import Any


def partial_suffix(text: str, tags: tuple[str, ...]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of one of `tags`.

    That suffix is the only text a streaming parser must hold back: it may still become a tag.
    """
    best = 0
    for tag in tags:
        for k in range(min(len(tag) - 1, len(text)), best, -1):
            if text.endswith(tag[:k]):
                best = k
                break
    return best


def find_first(text: str, tags: tuple[str, ...], start: int = 0) -> tuple[int, str | None]:
    """Earliest occurrence of any tag in text[start:] (longest tag wins a tie)."""
    best, found = -1, None
    for tag in tags:
        i = text.find(tag, start)
        if i != -1 and (best == -1 or i < best or (i == best and len(tag) > len(found or ""))):
            best, found = i, tag
    return best, found


def merge_tool_deltas(deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold consecutive argument fragments of the same call into one delta (one per call per feed)."""
    merged: list[dict[str, Any]] = []
    for d in deltas:
        prev = merged[-1] if merged else None
        if prev is not None and "id" not in d and prev["index"] == d["index"]:
            prev["function"]["arguments"] = (prev["function"].get("arguments") or "") + d["function"]["arguments"]
        else:
            merged.append(d)
    return merged
