"""A real SentencePiece (Metaspace) tokenizer for tests, built from mistral-common's files.

`mistral_common/data/tokenizer.model.v1` is Mistral-7B's SentencePiece model. We read its
pieces with a tiny protobuf reader (no sentencepiece/protobuf dependency) and build the
`tokenizers` pipeline that transformers' LlamaConverter produces for it with
`legacy=False`: BPE with byte fallback, a `Metaspace` pre-tokenizer (prepend "first") and the
decoder `Replace("▁"," ") + ByteFallback + Fuse + Strip(left=1)`. That last `Strip` is what
drops the first token's leading space unless the detokenizer is seeded from the prompt.
"""

from __future__ import annotations

import json
import struct
from functools import lru_cache
from importlib import resources

from core.tokenizer import Tokenizer

# SentencePiece piece types (sentencepiece_model.proto)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes):
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield field, wire, value


def read_pieces(model: bytes) -> list[tuple[str, float, int]]:
    pieces = []
    for field, _, value in _fields(model):
        if field != 1:  # ModelProto.pieces
            continue
        piece, score, kind = "", 0.0, NORMAL
        for f, _, v in _fields(value):
            if f == 1:
                piece = v.decode("utf-8")
            elif f == 2:
                score = struct.unpack("<f", v)[0]
            elif f == 3:
                kind = v
        pieces.append((piece, score, kind))
    return pieces


def _merges(vocab: dict[str, int]) -> list[list[str]]:
    # transformers' generate_merges: every split of a piece into two known pieces,
    # ordered by the rank of the merged piece, then of the parts
    merges = []
    for piece, rank in vocab.items():
        for i in range(1, len(piece)):
            left, right = piece[:i], piece[i:]
            if left in vocab and right in vocab:
                merges.append((left, right, rank))
    merges.sort(key=lambda m: (m[2], vocab[m[0]], vocab[m[1]]))
    return [[a, b] for a, b, _ in merges]


@lru_cache(maxsize=1)
def mistral_v1_tokenizer_json() -> str:
    data = (resources.files("mistral_common") / "data" / "tokenizer.model.v1").read_bytes()
    pieces = read_pieces(data)
    vocab = {piece: i for i, (piece, _, _) in enumerate(pieces)}
    added = [{"id": i, "content": piece, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for i, (piece, _, kind) in enumerate(pieces) if kind in (UNKNOWN, CONTROL)]
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                          "split": False},
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "ignore_merges": False, "vocab": vocab, "merges": _merges(vocab)},
    }
    return json.dumps(tokenizer, ensure_ascii=False)


@lru_cache(maxsize=1)
def mistral_v1_tokenizer() -> Tokenizer:
    return Tokenizer(mistral_v1_tokenizer_json(), {
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})
