"""The engine-side HTTP/1.1 response parser (`proxy.engine.http1`), which reads whatever bytes a
socket read returned, however TCP cut them.

- Property: a response built from random parts (interim 1xx answers, status, reason, random and
  repeated headers, body framed by Content-Length, by chunked encoding with random chunk boundaries,
  chunk extensions and trailers, by the connection's end, or bodyless: 204/304/HEAD) parses to the
  status, headers, body, `complete` and `keep_alive` computed here from the parts, whether fed in one
  piece, cut at random places (inside CRLF pairs too) or one byte at a time; body is taken with
  `take_body()` at random moments, and after every piece `buffered` is the body bytes decoded but not
  taken yet, which is every body byte that has arrived (the parser hands body out eagerly).
- Property: random bytes, random bytes after a valid status line, and mutated valid responses, in
  random pieces, never raise anything but ProtocolError (from `feed` or `feed_eof`).
- Concrete cases: interim answers, bodyless statuses, HEAD, keep-alive rules, body until close,
  header folding and case, truncation, data after the end, invalid chunk sizes / status lines /
  header lines / Content-Length, the size limits, and a vLLM-style SSE stream.
- Regressions of bugs these tests found: a Content-Length of a Latin-1 digit such as "²" raised a
  bare ValueError; the head, trailer and chunk-line limits depended on where TCP cut the bytes;
  header tokens were matched as substrings ("notchunked" read as chunked).
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.engine.http1 import MAX_CHUNK_LINE_BYTES, MAX_HEAD_BYTES, ProtocolError, ResponseParser

# -- building responses from random parts -------------------------------------------------------

TOKEN_CHARS = string.ascii_letters + string.digits + "-!#$%&'*+.^_`|~"
# Header-value and reason characters: visible ASCII, a space, and Latin-1 bytes (no CR/LF/controls).
VALUE_CHARS = "".join(chr(c) for c in range(0x20, 0x7F)) + "".join(chr(c) for c in range(0xA0, 0x100))
INTERIM_ANSWERS = [
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nContent-Length: 99\r\n\r\n",
]
CONNECTION_VALUES = [None, "close", "Close", "keep-alive", "Keep-Alive", "Upgrade, close", "TE"]


@dataclass
class Case:
    wire: bytes
    no_body: bool
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool
    until_close: bool  # complete only after feed_eof
    head_end: int  # offset just past the final head's blank line
    body_upto: list[int]  # body_upto[p]: body bytes within wire[:p]


header_names = st.one_of(
    st.sampled_from(["X-Request-Id", "x-request-id", "Server", "date", "Content-Type", "X-A", "x-a"]),
    st.text(TOKEN_CHARS, min_size=1, max_size=12).map(lambda s: "x-" + s),
)
header_values = st.text(VALUE_CHARS, max_size=30).map(lambda s: s.strip(" "))
padding = st.sampled_from(["", " ", "  ", "\t", " \t "])


@st.composite
def header_line(draw) -> tuple[str, str, bytes]:
    name, value = draw(header_names), draw(header_values)
    line = f"{name}:{draw(padding)}{value}{draw(padding)}".encode("latin-1")
    return name, value, line


@st.composite
def chunk_size_line(draw, size: int) -> bytes:
    digits = format(size, "x")
    digits = digits.upper() if draw(st.booleans()) else digits
    digits = "0" * draw(st.integers(0, 3)) + digits
    extensions = draw(st.lists(
        st.tuples(st.text(TOKEN_CHARS, min_size=1, max_size=6),
                  st.one_of(st.none(), st.text(TOKEN_CHARS, min_size=1, max_size=6),
                            st.text(TOKEN_CHARS + " ;", max_size=8).map(lambda s: f'"{s}"'))),
        max_size=2))
    ext = "".join(f";{n}" if v is None else f";{n}={v}" for n, v in extensions)
    bws = " " if extensions and draw(st.booleans()) else ""
    return f"{digits}{bws}{ext}\r\n".encode("latin-1")


@st.composite
def responses(draw) -> Case:
    framing = draw(st.sampled_from(["length", "chunked", "close", "bodyless"]))
    no_body = False
    if framing == "bodyless":
        no_body = draw(st.booleans())  # the answer to a HEAD request, else a 204/304
        status = draw(st.integers(200, 599)) if no_body else draw(st.sampled_from([204, 304]))
    else:
        status = draw(st.integers(200, 599).filter(lambda s: s not in (204, 304)))
    reason = draw(st.text(VALUE_CHARS, max_size=20))
    version = draw(st.sampled_from(["1.0", "1.1"]))
    body = b"" if framing == "bodyless" else draw(st.binary(max_size=300))

    lines = draw(st.lists(header_line(), max_size=6))
    framing_lines: list[tuple[str, str]] = []
    if framing == "length" or (framing == "bodyless" and draw(st.booleans())):
        # a HEAD answer declares the length it would have sent; a 204/304 may carry one too
        declared = len(body) if framing == "length" else draw(st.integers(0, 10**6))
        framing_lines.append((draw(st.sampled_from(["Content-Length", "content-length"])), str(declared)))
    if framing == "chunked":
        framing_lines.append((draw(st.sampled_from(["Transfer-Encoding", "transfer-encoding"])),
                              draw(st.sampled_from(["chunked", "Chunked", "gzip, chunked"]))))
    connection = draw(st.sampled_from(CONNECTION_VALUES))
    if connection is not None:
        framing_lines.append(("Connection", connection))
    for name, value in framing_lines:
        position = draw(st.integers(0, len(lines)))
        lines.insert(position, (name, value, f"{name}: {value}".encode("latin-1")))

    expected_headers: dict[str, str] = {}
    for name, value, _ in lines:
        key = name.lower()
        expected_headers[key] = f"{expected_headers[key]}, {value}" if key in expected_headers else value
    tokens = [t.strip().lower() for t in (connection or "").split(",")]
    keep_alive = (version == "1.1" and "close" not in tokens) or "keep-alive" in tokens
    if framing == "close":
        keep_alive = False

    status_line = f"HTTP/{version} {status}"
    if reason or draw(st.booleans()):
        status_line += f" {reason}"
    interim = b"".join(draw(st.lists(st.sampled_from(INTERIM_ANSWERS), max_size=2)))
    head = interim + b"\r\n".join([status_line.encode("latin-1")] + [line for _, _, line in lines]) + b"\r\n\r\n"

    segments: list[tuple[bytes, bool]] = [(head, False)]  # (bytes, is body)
    if framing in ("length", "close"):
        segments.append((body, True))
    elif framing == "chunked":
        cuts = sorted(draw(st.sets(st.integers(1, max(1, len(body) - 1)), max_size=8))) if len(body) > 1 else []
        bounds = [0] + [c for c in cuts if c < len(body)] + [len(body)]
        for start, end in zip(bounds, bounds[1:]):
            if end > start:
                segments += [(draw(chunk_size_line(end - start)), False), (body[start:end], True), (b"\r\n", False)]
        trailers = draw(st.lists(header_line(), max_size=2))
        segments.append((draw(chunk_size_line(0)) + b"".join(t + b"\r\n" for _, _, t in trailers) + b"\r\n", False))

    wire = b"".join(s for s, _ in segments)
    body_upto = [0]
    for seg, is_body in segments:
        for _ in seg:
            body_upto.append(body_upto[-1] + is_body)
    assert b"".join(s for s, b in segments if b) == body
    return Case(wire, no_body, status, reason, expected_headers, body, keep_alive, framing == "close",
                len(head), body_upto)


def parse_in_pieces(case: Case, cuts: list[int], takes: set[int]) -> ResponseParser:
    """Feed `case.wire` cut at `cuts`, taking the body after the pieces in `takes`, checking after
    each piece what must hold for the bytes seen so far; returns the parser after the end."""
    parser = ResponseParser(no_body=case.no_body)
    taken: list[bytes] = []
    bounds = [0] + sorted(set(c for c in cuts if 0 < c < len(case.wire))) + [len(case.wire)]
    for index, (start, end) in enumerate(zip(bounds, bounds[1:])):
        parser.feed(case.wire[start:end])
        taken_so_far = sum(map(len, taken))
        assert taken_so_far + parser.buffered == case.body_upto[end]  # all arrived body is out, none twice
        assert parser.has_body == (parser.buffered > 0)
        assert parser.head_done == (end >= case.head_end)
        assert parser.complete == (end == len(case.wire) and not case.until_close)
        if parser.head_done:
            assert (parser.status, parser.reason, parser.headers) == (case.status, case.reason, case.headers)
            assert parser.keep_alive == case.keep_alive
        if index in takes:
            expected_len = parser.buffered
            piece = parser.take_body()
            assert len(piece) == expected_len and parser.buffered == 0 and not parser.has_body
            taken.append(piece)
    if case.until_close:
        parser.feed_eof()
    assert parser.complete
    taken.append(parser.take_body())
    assert b"".join(taken) == case.body
    assert parser.buffered == 0 and parser.take_body() == b""
    assert (parser.status, parser.reason, parser.headers) == (case.status, case.reason, case.headers)
    assert parser.keep_alive == case.keep_alive
    return parser


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses(), st.data())
def test_any_split_parses_like_one_piece(case, data):
    whole = parse_in_pieces(case, [], set())
    n = len(case.wire)
    cuts = data.draw(st.lists(st.integers(1, max(1, n - 1)), max_size=20), label="cuts")
    # cut right inside CRLF pairs as well: that is where a naive parser breaks
    crlf_cuts = [i + 1 for i in range(n - 1) if case.wire[i:i + 2] == b"\r\n"]
    if crlf_cuts:
        cuts += data.draw(st.lists(st.sampled_from(crlf_cuts), max_size=6), label="crlf cuts")
    takes = data.draw(st.sets(st.integers(0, len(cuts) + 1)), label="takes")
    split = parse_in_pieces(case, cuts, takes)
    assert (split.status, split.headers, split.keep_alive) == (whole.status, whole.headers, whole.keep_alive)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses(), st.data())
def test_one_byte_at_a_time(case, data):
    takes = data.draw(st.sets(st.integers(0, len(case.wire))), label="takes")
    parse_in_pieces(case, list(range(1, len(case.wire))), takes)


# -- garbage never raises anything but ProtocolError -------------------------------------------

def feed_garbage(data: bytes, cuts: list[int], no_body: bool) -> None:
    parser = ResponseParser(no_body=no_body)
    bounds = [0] + sorted(set(c for c in cuts if 0 < c < len(data))) + [len(data)]
    try:
        for start, end in zip(bounds, bounds[1:]):
            parser.feed(data[start:end])
            buffered = parser.buffered
            assert buffered >= 0 and len(parser.take_body()) == buffered
        parser.feed_eof()
    except ProtocolError:
        return
    assert parser.complete  # feed_eof without an error means the response is whole


prefixes = st.sampled_from([b"", b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", b"HTTP/1.0 200 OK\r\n\r\n"])


@settings(max_examples=200, deadline=None)
@given(prefixes, st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=15), st.booleans())
def test_random_bytes_only_raise_protocol_error(prefix, garbage, cuts, no_body):
    feed_garbage(prefix + garbage, cuts, no_body)


# Latin-1 digits (\xb2 \xb3 \xb9) are drawn often: "²".isdigit() is True, int("²") is not
mutation_bytes = st.one_of(st.sampled_from(list(b"\r\n :;0aF\x00\xb2\xb3\xb9")), st.integers(0, 255))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses(), st.data())
def test_mutated_responses_only_raise_protocol_error(case, data):
    wire = bytearray(case.wire)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        position = data.draw(st.integers(0, len(wire)), label="position")
        action = data.draw(st.sampled_from(["insert", "delete", "replace"]), label="action")
        byte = data.draw(mutation_bytes, label="byte")
        if action == "insert":
            wire[position:position] = bytes([byte])
        elif position < len(wire):
            wire[position:position + 1] = b"" if action == "delete" else bytes([byte])
    cuts = data.draw(st.lists(st.integers(0, len(wire)), max_size=15), label="cuts")
    feed_garbage(bytes(wire), cuts, case.no_body)


# -- concrete cases ------------------------------------------------------------------------------

def parse(*pieces: bytes, no_body: bool = False, eof: bool = False) -> tuple[ResponseParser, bytes]:
    parser = ResponseParser(no_body=no_body)
    for piece in pieces:
        parser.feed(piece)
    if eof:
        parser.feed_eof()
    return parser, parser.take_body()


def test_interim_100_continue_is_skipped():
    parser, body = parse(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
    assert (parser.status, parser.reason, parser.headers, body) == (201, "Created", {"content-length": "2"}, b"ok")
    assert parser.complete and parser.keep_alive


def test_interim_answer_alone_is_not_the_head():
    parser = ResponseParser()
    parser.feed(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert not parser.head_done and parser.status == 0
    with pytest.raises(ProtocolError):
        parser.feed_eof()


@pytest.mark.parametrize("status", [204, 304])
def test_204_and_304_have_no_body(status):
    parser = ResponseParser()
    parser.feed(f"HTTP/1.1 {status} X\r\nContent-Length: 10\r\n\r\n".encode())
    assert parser.complete and parser.status == status and parser.take_body() == b"" and parser.keep_alive
    with pytest.raises(ProtocolError):
        parser.feed(b"0123456789")  # the body it must not have


def test_head_request_with_content_length_is_complete_after_the_head():
    parser, body = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", no_body=True)
    assert parser.complete and body == b"" and parser.headers["content-length"] == "1234" and parser.keep_alive
    chunked, _ = parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", no_body=True)
    assert chunked.complete


def test_the_same_head_without_no_body_waits_for_the_body():
    parser, _ = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n")
    assert parser.head_done and not parser.complete


@pytest.mark.parametrize("head, keep_alive", [
    (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", False),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", True),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", False),
    (b"HTTP/1.1 200 OK\r\nconnection: Close\r\nContent-Length: 0\r\n\r\n", False),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", True),
    (b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", True),
    (b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", True),
])
def test_keep_alive(head, keep_alive):
    parser, _ = parse(head)
    assert parser.complete and parser.keep_alive is keep_alive


@pytest.mark.parametrize("version", [b"1.0", b"1.1"])
def test_no_length_and_not_chunked_reads_until_eof(version):
    parser = ResponseParser()
    parser.feed(b"HTTP/" + version + b" 200 OK\r\nConnection: keep-alive\r\n\r\nhello ")
    assert parser.head_done and not parser.complete and not parser.keep_alive
    assert parser.take_body() == b"hello "
    parser.feed(b"world")
    assert parser.buffered == 5 and not parser.complete
    parser.feed_eof()
    assert parser.complete and not parser.keep_alive and parser.take_body() == b"world"
    with pytest.raises(ProtocolError):
        parser.feed(b"more")


def test_empty_body_until_eof():
    parser, body = parse(b"HTTP/1.1 200 OK\r\n\r\n", eof=True)
    assert parser.complete and body == b"" and not parser.keep_alive


def test_repeated_headers_are_joined_and_names_lower_cased():
    parser, body = parse(b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nX-Thing:  one \r\nset-cookie: b=2\r\n"
                         b"SET-COOKIE:c=3\r\nContent-Length: 0\r\n\r\n")
    assert parser.headers == {"set-cookie": "a=1, b=2, c=3", "x-thing": "one", "content-length": "0"}


def test_reason_phrase_keeps_its_spaces_and_may_be_missing():
    assert parse(b"HTTP/1.1 404 Not  Found here\r\nContent-Length: 0\r\n\r\n")[0].reason == "Not  Found here"
    parser, _ = parse(b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n")
    assert (parser.status, parser.reason, parser.complete) == (200, "", True)


@pytest.mark.parametrize("wire", [
    b"",
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nx: y\r\n",
])
def test_eof_before_the_end_raises(wire):
    parser = ResponseParser()
    parser.feed(wire)
    assert not parser.complete
    with pytest.raises(ProtocolError):
        parser.feed_eof()


@pytest.mark.parametrize("response, extra", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", b"X"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b"HTTP/1.1 200 OK\r\n\r\n"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", b"\r\n"),
    (b"HTTP/1.1 204 No Content\r\n\r\n", b"x"),
])
def test_bytes_after_the_end_raise(response, extra):
    with pytest.raises(ProtocolError):  # in the same read
        parse(response + extra)
    parser = ResponseParser()  # or in a later one
    parser.feed(response)
    assert parser.complete
    with pytest.raises(ProtocolError):
        parser.feed(extra)


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("size_line", [b"0x10", b"+1", b"1_0", b"", b"zz", b"1" * 17, b"-1", b"1 0", b"; ext",
                                       b"\xb2", b"\xd9\xa3"])
def test_invalid_chunk_sizes_raise(size_line):
    with pytest.raises(ProtocolError):
        parse(CHUNKED_HEAD + size_line + b"\r\n" + b"x" * 20 + b"\r\n0\r\n\r\n")


def test_valid_chunk_size_forms():
    wire = CHUNKED_HEAD + b"0005\r\nhello\r\nA;name=value;flag\r\n0123456789\r\n1 ; x=\"a;b\"\r\n!\r\n0;done\r\n\r\n"
    parser, body = parse(wire)
    assert parser.complete and body == b"hello0123456789!"
    big, body = parse(CHUNKED_HEAD + b"f" * 16 + b"\r\nabc")  # 16 hex digits are still a size
    assert body == b"abc" and not big.complete


@pytest.mark.parametrize("after", [b"XY", b"\n\r", b"\rX", b"x\r\n0\r\n\r\n", b"\n"])
def test_chunk_data_not_followed_by_crlf_raises(after):
    with pytest.raises(ProtocolError):
        parse(CHUNKED_HEAD + b"3\r\nabc" + after)
    with pytest.raises(ProtocolError):  # the same bytes, cut after the data and inside the ending
        parse(CHUNKED_HEAD + b"3\r\nab", b"c" + after[:1], after[1:])


def test_trailers_are_read_and_dropped():
    parser, body = parse(CHUNKED_HEAD + b"2\r\nok\r\n0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n")
    assert parser.complete and body == b"ok" and "x-checksum" not in parser.headers


def test_head_without_an_end_over_the_limit_raises():
    parser = ResponseParser()
    parser.feed(b"HTTP/1.1 200 OK\r\nX-Long: ")
    with pytest.raises(ProtocolError):
        for _ in range(MAX_HEAD_BYTES // 4096 + 1):
            parser.feed(b"a" * 4096)
    with pytest.raises(ProtocolError):  # in one piece too, and when the end does come, too late
        parse(b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n")


def test_head_just_under_the_limit_is_fine():
    status = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Long: "
    head = status + b"a" * (MAX_HEAD_BYTES - 3 - len(status))
    parser, _ = parse(head[:1000], head[1000:], b"\r\n\r\n")
    assert parser.complete and len(parser.headers["x-long"]) == MAX_HEAD_BYTES - 3 - len(status)


def test_chunk_size_line_over_the_limit_raises():
    parser = ResponseParser()
    parser.feed(CHUNKED_HEAD + b"5;ext=")
    with pytest.raises(ProtocolError):
        for _ in range(MAX_CHUNK_LINE_BYTES // 100 + 1):
            parser.feed(b"x" * 100)


@pytest.mark.parametrize("status_line", [b"HTTP/2 200 OK", b"HTTP/1.1 20 OK", b"HTTP/1.1 2000 OK", b"FOO",
                                         b"HTTP/1.1", b"HTTP/1.1 abc OK", b"http/1.1 200 OK", b"HTTP/1.1  200 OK",
                                         b"ICY 200 OK", b""])
def test_invalid_status_lines_raise(status_line):
    with pytest.raises(ProtocolError):
        parse(status_line + b"\r\nContent-Length: 0\r\n\r\n")


@pytest.mark.parametrize("line", [b"NoColon", b"Bad Name: x", b": empty name", b" Folded: x", b"Name : x",
                                  b"\tTabbed: x"])
def test_invalid_header_lines_raise(line):
    with pytest.raises(ProtocolError):
        parse(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + line + b"\r\n\r\n")


@pytest.mark.parametrize("value", [b"abc", b"-1", b"+1", b"1.5", b"0x10", b"1 2", b"5, 5", b""])
def test_invalid_content_length_raises(value):
    with pytest.raises(ProtocolError):
        parse(b"HTTP/1.1 200 OK\r\nContent-Length: " + value + b"\r\n\r\n")


def test_chunked_wins_over_content_length():
    parser, body = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"2\r\nok\r\n0\r\n\r\n")
    assert parser.complete and body == b"ok"


def test_content_length_body_is_handed_out_as_it_arrives():
    parser = ResponseParser()
    parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123")
    assert parser.buffered == 4 and parser.has_body and not parser.complete
    parser.feed(b"45")
    assert parser.take_body() == b"012345" and parser.buffered == 0 and not parser.has_body
    assert parser.take_body() == b""
    parser.feed(b"6789")
    assert parser.complete and parser.take_body() == b"6789"


VLLM_EVENTS = [
    b'data: {"id":"cmpl-1","object":"text_completion","created":1764500000,"model":"tiny-qwen3",'
    b'"choices":[{"index":0,"text":"","token_ids":[9707],"logprobs":null,"finish_reason":null}]}\n\n',
    b'data: {"id":"cmpl-1","object":"text_completion","created":1764500000,"model":"tiny-qwen3",'
    b'"choices":[{"index":0,"text":"","token_ids":[11,1879],"logprobs":null,"finish_reason":null}]}\n\n',
    b'data: {"id":"cmpl-1","object":"text_completion","created":1764500000,"model":"tiny-qwen3",'
    b'"choices":[{"index":0,"text":"","token_ids":[0],"logprobs":null,"finish_reason":"length",'
    b'"stop_reason":null}],"usage":{"prompt_tokens":3,"total_tokens":7,"completion_tokens":4}}\n\n',
    b"data: [DONE]\n\n",
]
UVICORN_HEAD = (b"HTTP/1.1 200 OK\r\ndate: Mon, 30 Nov 2026 13:30:00 GMT\r\nserver: uvicorn\r\n"
                b"content-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n")
VLLM_WIRE = UVICORN_HEAD + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in VLLM_EVENTS) + b"0\r\n\r\n"


def test_vllm_streamed_answer_yields_exactly_the_sse_bytes():
    parser = ResponseParser()
    parser.feed(UVICORN_HEAD)
    assert parser.head_done and not parser.complete and parser.status == 200 and parser.reason == "OK"
    assert parser.headers == {"date": "Mon, 30 Nov 2026 13:30:00 GMT", "server": "uvicorn",
                              "content-type": "text/event-stream; charset=utf-8", "transfer-encoding": "chunked"}
    rest = VLLM_WIRE[len(UVICORN_HEAD):]
    events = []
    for event in VLLM_EVENTS:  # one chunk per read, as uvicorn writes them
        chunk = b"%x\r\n%s\r\n" % (len(event), event)
        assert rest.startswith(chunk)
        rest = rest[len(chunk):]
        parser.feed(chunk)
        assert not parser.complete
        events.append(parser.take_body())
    assert events == VLLM_EVENTS
    parser.feed(rest)
    assert rest == b"0\r\n\r\n" and parser.complete and parser.keep_alive and parser.take_body() == b""
    whole, body = parse(VLLM_WIRE)
    assert whole.complete and body == b"".join(VLLM_EVENTS)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, len(VLLM_WIRE) - 1), max_size=30))
def test_vllm_streamed_answer_any_split(cuts):
    parser = ResponseParser()
    body = b""
    bounds = [0] + sorted(set(cuts)) + [len(VLLM_WIRE)]
    for start, end in zip(bounds, bounds[1:]):
        parser.feed(VLLM_WIRE[start:end])
        body += parser.take_body()
    assert parser.complete and body == b"".join(VLLM_EVENTS)


# -- regressions ----------------------------------------------------------------------------------

def test_content_length_of_a_latin1_digit_raises_protocol_error():
    with pytest.raises(ProtocolError):
        parse(b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n")


def test_head_limit_does_not_depend_on_where_the_read_ends():
    status = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Long: "
    head = status + b"a" * (MAX_HEAD_BYTES - len(status))
    assert len(head) == MAX_HEAD_BYTES
    whole, _ = parse(head + b"\r\n\r\n")
    assert whole.complete
    split, _ = parse(head + b"\r\n\r", b"\n")
    assert split.complete


def test_chunk_size_line_over_the_limit_raises_in_one_read_too():
    line = b"5;ext=" + b"x" * MAX_CHUNK_LINE_BYTES
    with pytest.raises(ProtocolError):
        parse(CHUNKED_HEAD + line + b"\r\nhello\r\n0\r\n\r\n")


def test_chunk_size_line_at_the_limit_is_accepted_with_its_cr_in_one_read_and_lf_in_the_next():
    line = b"5;" + b"x" * (MAX_CHUNK_LINE_BYTES - 2)
    assert len(line) == MAX_CHUNK_LINE_BYTES
    parser, body = parse(CHUNKED_HEAD + line + b"\r", b"\nhello\r\n0\r\n\r\n")
    assert parser.complete and body == b"hello"


def test_trailers_over_the_limit_raise_in_one_read_too():
    trailer = b"X-Trailer: " + b"t" * MAX_HEAD_BYTES + b"\r\n\r\n"
    with pytest.raises(ProtocolError):
        parse(CHUNKED_HEAD + b"5\r\nhello\r\n0\r\n" + trailer)


@pytest.mark.parametrize("head", [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: notchunked\r\nContent-Length: 5\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\n",
])
def test_transfer_encoding_is_read_as_tokens_not_substrings(head):
    parser, body = parse(head + b"hello")
    assert parser.complete and body == b"hello"


@pytest.mark.parametrize("connection, keep_alive", [("xclose", True), ("close, upgrade", False),
                                                    ("Upgrade, Keep-Alive", True)])
def test_connection_header_is_read_as_tokens(connection, keep_alive):
    parser, _ = parse(b"HTTP/1.1 200 OK\r\nConnection: " + connection.encode() + b"\r\nContent-Length: 0\r\n\r\n")
    assert parser.keep_alive is keep_alive


@pytest.mark.parametrize("status_line", [b"HTTP/1.9 200 OK", b"HTTP/1.1 000 Zero", b"HTTP/1.1 099 Low"])
def test_unknown_versions_and_statuses_below_100_raise(status_line):
    with pytest.raises(ProtocolError):
        parse(status_line + b"\r\nContent-Length: 0\r\n\r\n")
