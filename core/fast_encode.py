"""A faster exact encoder for byte-level BPE tokenizers (Qwen, Llama-3, GPT-style).

Profiling render showed tokenization dominating, and inside it the pre-tokenizer: the Rust
`tokenizers` Split step runs the model's regex through Oniguruma at ~1.5 us per character
(a 32k-token prompt: ~150 ms), and its per-word overhead is a few microseconds more. This module
produces the same ids faster by doing the same steps differently:

1. split the text on the added tokens (leftmost-longest, as the added-vocabulary matcher does);
2. NFC-normalize each remaining segment (the tokenizer's normalizer);
3. split each segment into words with the *same* regex, compiled by the `regex` module (~10x faster);
4. map each word to ids through a bounded cache; misses are BPE-encoded by the Rust tokenizer in
   one batch (the same BPE model, pre-tokenizer reduced to its byte-level step).

Step 1 also makes a prompt cache exact: the added tokens (`<|im_start|>`, `<|eot_id|>`, ...) cut
every chat into segments that are encoded independently, so a long segment seen before (a system
prompt, the tool definitions, every earlier turn of a conversation that is re-sent each turn) maps
to the ids it had last time. `SegmentCache` keeps them, bounded by characters: it turns a
multi-turn chat's render from O(conversation) into O(new message) tokenization, the tokenizer
prefix cache that the anchors' frontends added for the same reason.

Steps 1-4 are exactly what the tokenizer does, so the result is identical; it is only used for
tokenizers whose pipeline has exactly this shape (`FastEncoder.build` returns None otherwise),
and `build` cross-checks a battery of tricky strings against the Rust encoder before enabling
it. Tests compare both on random Unicode text (hypothesis) and on every code point.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from collections import OrderedDict
from itertools import chain
from typing import Any

import orjson
import regex

from tokenizers import Tokenizer as RustTokenizer

# words longer than this are encoded but not cached (base64 blobs, long digit-free runs)
_MAX_CACHED_WORD = 48
_MAX_CACHE_ENTRIES = 200_000  # ~40 MB at most; cleared whole when full
# segments shorter than this are a word or two: the word cache alone makes them cheap
MIN_CACHED_SEGMENT = 64
# the segment cache's bound: characters of text kept (ids take ~1 byte per character more, as
# 4-byte arrays at ~4 characters per token): ~16 MB in all, some thirty 60k-token conversations
SEGMENT_CACHE_CHARS = 8_000_000

SELF_CHECK = [
    "Hello, world! It's a test: we're 'quoted' and I'll do it; they'd've.",
    "  leading spaces\n\n\ttabs\r\n windows\u3000ideographic\u00a0nbsp\u2028line sep\u0085nel\u200bzwsp",
    "numbers 1234567 3.14159 -42 ١٢٣ ૬૭ ⅷ ²³ and emoji 🎉👩‍👩‍👧🏳️‍🌈 and CJK 你好，世界。日本語のテキスト",
    "combining: e\u0301 a\u0308 \u0915\u093f \u0e01\u0e34 Ä Å (NFC) Åmstrong, Ｆｕｌｌｗｉｄｔｈ",
    "code: def f(x):\n    return x**2  # comment\n\n\n    if a != b: {'k': [1, 2]}\n",
    "mixed RTL: مرحبا بالعالم שלום עולם and math ∑∫√∞ ≠ ≤ and symbols ©®™ §¶ …",
    "   \n  \n\n   trailing spaces   ",
    "'S 'T 'RE 'VE 'M 'LL 'D — case-insensitive contractions",
    "\x00\x01\x7f control \ufeff bom \U0001f600\U0001fae0 \U000e0001 tag",
]


def has_unassigned(text: str) -> bool:
    """Whether the text holds a code point Python's unicodedata does not know (category Cn).

    The `regex` module follows a newer Unicode than the tokenizers' Oniguruma, so the two disagree
    on characters assigned since (~17k of them, all unassigned in Python 3.11's Unicode 14, checked
    exhaustively); text holding any of them takes the Rust path. Checking the distinct characters
    costs well under a millisecond even for a 32k-token prompt.
    """
    if text.isascii():  # every ASCII code point is assigned; most prompts are ASCII (a C-speed check)
        return False
    category = unicodedata.category
    return any(category(c) == "Cn" for c in set(text))


_ASCII_SPACE = r"\t\n\x0b\x0c\r "


def ascii_pattern(pattern: str) -> str | None:
    """The split regex specialised to ASCII text, for Python's faster `re` (None if not translatable).

    On ASCII, \\p{L} is [A-Za-z], \\p{N} is [0-9] and \\s is [\\t\\n\\v\\f\\r ] (Unicode White_Space).
    """
    out, i, in_class = [], 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            two = pattern[i:i + 2]
            if pattern.startswith("\\p{L}", i) or pattern.startswith("\\p{N}", i):
                chars = "A-Za-z" if pattern[i + 3] == "L" else "0-9"
                out.append(chars if in_class else f"[{chars}]")
                i += 5
                continue
            if two == "\\s":
                out.append(_ASCII_SPACE if in_class else f"[{_ASCII_SPACE}]")
            elif two == "\\S":
                if in_class:
                    return None
                out.append(f"[^{_ASCII_SPACE}]")
            elif two in ("\\r", "\\n", "\\t", "\\'", "\\-", "\\.", "\\\\"):
                out.append(two)
            else:
                return None  # \\P{..}, \\w, \\d, ...: not worth translating
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
        elif ch == "]" and in_class:
            in_class = False
        out.append(ch)
        i += 1
    return "".join(out)


def _spec_supported(spec: dict[str, Any]) -> tuple[str, bool] | None:
    """(the split regex, whether NFC applies) if the pipeline has the supported shape."""
    normalizer = spec.get("normalizer")
    if normalizer is not None and normalizer.get("type") != "NFC":
        return None
    model = spec.get("model") or {}
    if model.get("type") != "BPE" or model.get("dropout") not in (None, 0, 0.0):
        return None
    pre = spec.get("pre_tokenizer") or {}
    if pre.get("type") != "Sequence" or len(pre.get("pretokenizers", [])) != 2:
        return None
    split, byte_level = pre["pretokenizers"]
    if (split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert")
            or "Regex" not in (split.get("pattern") or {})):
        return None
    if byte_level.get("type") != "ByteLevel" or byte_level.get("use_regex") or byte_level.get("add_prefix_space"):
        return None
    for token in spec.get("added_tokens", []):
        if token.get("normalized") or token.get("lstrip") or token.get("rstrip") or token.get("single_word"):
            return None
    return split["pattern"]["Regex"], normalizer is not None


class FastEncoder:
    """`encode(text)` == `tokenizer.encode(text, add_special_tokens=False).ids`, faster."""

    def __init__(self, backend: RustTokenizer, spec: dict[str, Any], pattern: str, nfc: bool) -> None:
        self.backend = backend
        self.words = regex.compile(pattern)
        self.space_safe = pattern in SPACE_SAFE_PATTERNS
        ascii_source = ascii_pattern(pattern)
        self.ascii_words = None
        if ascii_source is not None:
            try:
                candidate = re.compile(ascii_source)
            except re.error:
                candidate = None
            # exhaustive over ASCII pairs and triples in the contexts the pattern cares about
            probe = "".join(f"{chr(a)}{chr(b)}x{chr(a)} 1{chr(b)}{chr(b)}\n" for a in range(128) for b in range(0, 128, 3))
            if candidate is not None and candidate.findall(probe) == self.words.findall(probe):
                self.ascii_words = candidate
        self.nfc = nfc
        contents = sorted({t["content"] for t in spec.get("added_tokens", [])}, key=len, reverse=True)
        self.added_ids = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
        self.added = regex.compile("|".join(regex.escape(c) for c in contents)) if contents else None
        word_spec = dict(spec)
        word_spec["normalizer"] = None
        word_spec["pre_tokenizer"] = spec["pre_tokenizer"]["pretokenizers"][1]
        word_spec["post_processor"] = None
        word_spec["truncation"] = None
        word_spec["padding"] = None
        # orjson: the spec holds the whole vocabulary and merges (json.dumps takes ~10x as long)
        self.word_tokenizer = RustTokenizer.from_str(orjson.dumps(word_spec).decode())
        self.cache: dict[str, list[int]] = {}
        self.segments = SegmentCache(SEGMENT_CACHE_CHARS)

    @classmethod
    def build(cls, backend: RustTokenizer, *, specials_as_text: bool = False) -> FastEncoder | None:
        """`specials_as_text`: `backend` reads special added tokens as text (`encode_special_tokens`,
        core.tokenizer's `text_backend`), so only the added tokens that are not special split the text."""
        checks = list(SELF_CHECK)
        try:
            spec = orjson.loads(backend.to_str())
            if specials_as_text:
                added = spec.get("added_tokens") or []
                special = [t["content"] for t in added if t.get("special")][:8]
                checks.append(" ".join(special) + "".join(special) + "x".join(SELF_CHECK[:2]))
                spec["added_tokens"] = [t for t in added if not t.get("special")]
            supported = _spec_supported(spec)
            if supported is None:
                return None
            encoder = cls(backend, spec, *supported)
        except (regex.error, ValueError, KeyError, TypeError, Exception):  # unsupported syntax: use the slow path
            return None
        specials = "".join(list(encoder.added_ids)[:4])
        for text in [*checks, specials.join(SELF_CHECK[:3])]:
            if encoder.encode(text) != backend.encode(text, add_special_tokens=False).ids:
                return None
        encoder.cache.clear()
        encoder.segments.clear()
        return encoder

    def _unicode_words(self, piece: str) -> list[str]:
        if self.nfc:
            piece = unicodedata.normalize("NFC", piece)
        # a long piece (CJK text) is split with the GIL released, like the Rust tokenizer would be
        words = self.words.findall(piece, concurrent=True) if len(piece) > 4096 else self.words.findall(piece)
        return self._checked(self.words, piece, words)

    def _checked(self, pattern: Any, piece: str, words: list[str]) -> list[str]:
        if sum(map(len, words)) == len(piece):
            return words
        # the regex left gaps: "Isolated" keeps them as pieces of their own
        out, pos = [], 0
        for match in pattern.finditer(piece):
            if match.start() > pos:
                out.append(piece[pos:match.start()])
            out.append(match.group())
            pos = match.end()
        if pos < len(piece):
            out.append(piece[pos:])
        return out

    def _word_runs(self, segment: str) -> list[list[str]]:
        """The segment's words, as runs; ASCII stretches go through the faster `re` pattern.

        For the GPT-4-style patterns (`space_safe`), a space preceded by a non-space character always
        starts a new word whatever surrounds it, so the text can be cut there: non-ASCII words are
        split with the Unicode pattern, everything between them with the ASCII one.
        """
        ascii_words = self.ascii_words
        if ascii_words is None:
            return [self._unicode_words(segment)]
        if segment.isascii():
            return [self._checked(ascii_words, segment, ascii_words.findall(segment))]
        if not self.space_safe:
            return [self._unicode_words(segment)]
        runs: list[list[str]] = []
        pos, end = 0, len(segment)
        for match in _NON_ASCII.finditer(segment):
            start, stop = match.span()
            if stop <= pos:
                continue
            left = pos if start <= pos else _safe_left(segment, start, pos)
            right = _safe_right(segment, stop, end)
            if left > pos:
                piece = segment[pos:left]
                runs.append(self._checked(ascii_words, piece, ascii_words.findall(piece)))
            runs.append(self._unicode_words(segment[left:right]))
            pos = right
        if pos < end:
            piece = segment[pos:]
            runs.append(self._checked(ascii_words, piece, ascii_words.findall(piece)))
        return runs

    def _extend(self, words: list[str], out: list[int]) -> None:
        cache = self.cache
        mark = len(out)
        try:  # the warm path: every word already cached
            out.extend(chain.from_iterable(map(cache.__getitem__, words)))
            return
        except KeyError:
            del out[mark:]
        lookup: dict[str, list[int]] = {}
        missing = []
        for word in set(words):
            ids = cache.get(word)
            if ids is None:
                missing.append(word)
            else:
                lookup[word] = ids
        encoded = self.word_tokenizer.encode_batch(missing, add_special_tokens=False)
        if len(cache) + len(missing) > _MAX_CACHE_ENTRIES:
            cache.clear()
        for word, enc in zip(missing, encoded):
            ids = enc.ids
            lookup[word] = ids
            if len(word) <= _MAX_CACHED_WORD:
                cache[word] = ids
        out.extend(chain.from_iterable(map(lookup.__getitem__, words)))

    def _encode_segment(self, segment: str, out: list[int]) -> None:
        if len(segment) >= MIN_CACHED_SEGMENT:
            cached = self.segments.get(segment)
            if cached is not None:
                out.extend(cached)
                return
            mark = len(out)
            self._encode_words(segment, out)
            self.segments.put(segment, array("I", out[mark:]))
        elif segment:
            self._encode_words(segment, out)

    def _encode_words(self, segment: str, out: list[int]) -> None:
        runs = self._word_runs(segment)
        self._extend(runs[0] if len(runs) == 1 else list(chain.from_iterable(runs)), out)

    def encode(self, text: str) -> list[int]:
        if has_unassigned(text):
            return self.backend.encode_batch([text], add_special_tokens=False)[0].ids  # releases the GIL
        out: list[int] = []
        if self.added is None:
            self._encode_segment(text, out)
            return out
        pos = 0
        for match in self.added.finditer(text):
            self._encode_segment(text[pos:match.start()], out)
            out.append(self.added_ids[match.group()])
            pos = match.end()
        self._encode_segment(text[pos:], out)
        return out


class SegmentCache:
    """Ids of recently encoded segments, least recently used evicted first, bounded by the
    characters kept. Lookups hash the segment (a few microseconds per 10k characters, against
    ~0.3 ms to encode them). Safe to share between the event loop and the render threads: each
    step is one dict operation under the GIL, and a lost race only costs a re-encode."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.chars = 0
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[str, array] = OrderedDict()

    def get(self, segment: str) -> array | None:
        ids = self._items.get(segment)
        if ids is None:
            self.misses += 1
            return None
        self.hits += 1
        try:
            self._items.move_to_end(segment)
        except KeyError:  # evicted by another thread meanwhile
            pass
        return ids

    def put(self, segment: str, ids: array) -> None:
        if len(segment) > self.max_chars // 4:  # one huge document would flush everything else
            return
        if self._items.setdefault(segment, ids) is not ids:
            return  # another thread stored it first
        self.chars += len(segment)
        while self.chars > self.max_chars:
            try:
                old, _ = self._items.popitem(last=False)
            except KeyError:
                break
            self.chars -= len(old)

    def clear(self) -> None:
        self._items.clear()
        self.chars = self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


# Unicode White_Space: what the split patterns' \s matches
_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                        "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
# the GPT-4-style split patterns for which a cut before a space that follows a non-space is exact
SPACE_SAFE_PATTERNS = frozenset({
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
})


def _safe_left(text: str, start: int, floor: int) -> int:
    """The last cut point (a space after a non-space) at or before `start`, not below `floor`."""
    j = text.rfind(" ", floor, start)
    while j > floor:
        if text[j - 1] not in _WHITESPACE:
            return j
        j = text.rfind(" ", floor, j)
    return floor


def _safe_right(text: str, stop: int, end: int) -> int:
    """The first cut point at or after `stop`."""
    k = text.find(" ", stop)
    while k != -1:
        if text[k - 1] not in _WHITESPACE:
            return k
        k = text.find(" ", k + 1)
    return end


_UNSUPPORTED = object()  # cached: the pipeline was checked and is not one the fast encoder takes


def cached_encoder(tokenizer: Any, *, specials_as_text: bool = False) -> FastEncoder | None:
    """The FastEncoder of a `core.tokenizer.Tokenizer`, built once and kept on it (None when its
    pipeline is not supported): of its backend, or with `specials_as_text` of its `text_backend`
    (special added tokens read as text)."""
    attribute = "_fast_encoder_specials_as_text" if specials_as_text else "_fast_encoder"
    encoder = getattr(tokenizer, attribute, None)
    if encoder is None:
        backend = tokenizer.text_backend if specials_as_text else tokenizer.backend
        built = FastEncoder.build(backend, specials_as_text=specials_as_text)
        encoder = _UNSUPPORTED if built is None else built
        setattr(tokenizer, attribute, encoder)
    return None if encoder is _UNSUPPORTED else encoder
