"""The SSE decoder returns the same events however the bytes are cut."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.engine.sse import SSEDecoder

PAYLOADS = [b'{"a":1}', b'{"text":"caf\xc3\xa9 \xf0\x9f\x99\x82"}', b'{"error":{"message":"x"}}', b"[DONE]"]
STREAM = b"".join(b"data: " + p + b"\n\n" for p in PAYLOADS)


def decode_in_pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    dec = SSEDecoder()
    out: list[bytes] = []
    last = 0
    for cut in sorted(set(cuts)) + [len(data)]:
        out += dec.feed(data[last:cut])
        last = cut
    assert dec.pending == b""
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_gives_the_same_events(cuts):
    assert decode_in_pieces(STREAM, cuts) == PAYLOADS


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM) + 20), max_size=12))
def test_crlf_line_endings_any_split(cuts):
    crlf = STREAM.replace(b"\n", b"\r\n")
    assert decode_in_pieces(crlf, [c for c in cuts if c <= len(crlf)]) == PAYLOADS


def test_multiline_data_comments_and_other_fields():
    dec = SSEDecoder()
    assert dec.feed(b": keep-alive\n\nevent: x\ndata: line1\ndata:line2\nid: 3\n\n") == [b"line1\nline2"]


def test_incomplete_event_is_pending():
    dec = SSEDecoder()
    assert dec.feed(b'data: {"a":1}\n\ndata: {"b"') == [b'{"a":1}']
    assert dec.pending == b'data: {"b"'
    assert dec.feed(b":2}\n\n") == [b'{"b":2}']


def test_an_event_that_never_ends_is_an_error(monkeypatch):
    import pytest

    from proxy.engine import sse

    monkeypatch.setattr(sse, "MAX_PENDING_BYTES", 1000)
    dec = sse.SSEDecoder()
    dec.feed(b"data: " + b"x" * 900)
    with pytest.raises(sse.SSEError):
        dec.feed(b"y" * 200)
