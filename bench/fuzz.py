"""Fuzz every POST route of a running proxy with mutated requests; report the 5xx answers.

    python bench/fuzz.py [--cases 1500] [--seed 1] [--workers 8] [--out bench/results/fuzz.md]

Two processes on loopback: `derender-proxy reference-engine` and `derender-proxy serve` in front of
it (hermes + qwen3 parsers, `--trust-request-chat-template`), so every route, the parser paths and
request templates run for real. For each POST route, `--cases` requests are made from a valid body
with 1 to 3 random mutations (seeded: a run is reproducible):

* values: a random place in the body gets an edge value (ints past int64, NaN / Infinity, lone
  surrogates, long strings, values nested 1,000 deep, long lists, hostile chat templates), a key is
  dropped, an unknown key added, a value wrapped in a list;
* bytes: the JSON text cut, a byte flipped, bytes inserted, a key duplicated;
* headers: a wrong or missing content type, a Content-Encoding (gzip valid or not, deflate, br,
  unknown), an X-Request-Id with bytes that are not UTF-8.

The property is the issue's: no answer is a 5xx (the engine is up, so not even 502/503/504), every
other non-2xx is an OpenAI error body `{"error": {message, type, param, code}}` with `code` equal to
the status, and every 200 event stream ends with `data: [DONE]`. The report counts the answers by
route and class, and shows the first few failures of each kind with the mutations that made them.
"""

from __future__ import annotations

import argparse
import collections
import copy
import gzip
import http.client
import json
import os
import platform
import random
import socket
import sys
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stack import PARSER_FLAGS, ROOT, publish, stack  # noqa: E402

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
PROMPT_IDS = [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198]
CHOICE = {"index": 0, "finish_reason": "stop", "stop_reason": 151645, "token_ids": [9707, 0, 151645],
          "logprobs": {"content": [{"token_id": 9707, "logprob": -0.1, "rank": 1,
                                    "top_logprobs": [{"token_id": 9707, "logprob": -0.1, "rank": 1}]}]}}
GENERATED = {"request_id": "generate-tokens-chatcmpl-0011223344556677", "choices": [CHOICE]}
CHAT = {"model": "tiny-qwen3", "messages": MESSAGES, "max_tokens": 8, "tools": TOOLS, "stop": ["xyz"],
        "logprobs": True, "top_logprobs": 2}
COMPLETION = {"model": "tiny-qwen3", "prompt": "Once upon", "max_tokens": 8, "logprobs": 2, "stop": ["xyz"], "n": 2}
ROUTES: list[tuple[str, dict[str, Any]]] = [
    ("/v1/chat/completions", CHAT),
    ("/v1/chat/completions", {**CHAT, "stream": True, "stream_options": {"include_usage": True}}),
    ("/v1/completions", COMPLETION),
    ("/v1/completions", {**COMPLETION, "stream": True, "echo": True}),
    ("/v1/chat/completions/render", {**CHAT, "chat_template_kwargs": {"enable_thinking": False}}),
    ("/v1/completions/render", COMPLETION),
    ("/v1/chat/completions/derender", {"prompt_token_ids": PROMPT_IDS, "generate_response": GENERATED,
                                       "chat_request": {"messages": MESSAGES, "logprobs": True, "top_logprobs": 1}}),
    ("/v1/chat/completions/derender", {"stream": True, "prompt_token_ids": PROMPT_IDS, "generate_chunk": GENERATED,
                                       "stream_state": None, "chat_request": {"messages": MESSAGES, "tools": TOOLS}}),
    ("/v1/completions/derender", {"prompt_token_ids": [PROMPT_IDS], "generate_responses": [GENERATED],
                                  "completion_request": {"prompt": "hi", "logprobs": 1, "echo": True}}),
    ("/v1/completions/derender", {"stream": True, "prompt_token_ids": PROMPT_IDS, "generate_chunk": GENERATED,
                                  "stream_state": None, "completion_request": {"prompt": "hi", "stop": ["o"]}}),
    ("/tokenize", {"model": "tiny-qwen3", "prompt": "hello", "return_token_strs": True}),
    ("/tokenize", {"messages": MESSAGES, "add_generation_prompt": True, "tools": TOOLS}),
    ("/detokenize", {"model": "tiny-qwen3", "tokens": [9707, 11, 1879]}),
]

DEEP = object()  # a value nested 1,000 deep (written as raw JSON: the json module refuses that depth)
NAN, INF = object(), object()  # written raw as NaN / Infinity
TEMPLATES = ["{% break %}", "{{ 9 ** (9 ** 7) }}", "{{ 'a' * 10**9 }}", "{{ raise_exception('no') }}",
             "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
             "{{ messages[0].content|center(10**9) }}", "{% for m in messages %}{{ m.content }}{% endfor %}",
             "{{" + "(" * 500 + "1" + ")" * 500 + "}}", "{{ '%0999999999d' % 1 }}", "{% if %}"]
EDGES: list[Any] = [0, -1, 1, 2, -2**31, 2**31, 2**32 + 5, 2**53 + 1, 2**63 - 1, 2**63, -2**63 - 1, 2**64, 10**30,
                    151669, 151936, 40960, 40961, 16384, 16385, 1.5, -0.0, 1e308, 5e-324, NAN, INF, "", " ",
                    "\ud800", "a\udfffb", "\x00", "<think>", "</tool_call>", "<|im_end|>", "x" * 100_000,
                    "m" * 3_000_000, "tiny-qwen3", "auto", "required", "none", "function", None, True, False, [], {},
                    [None], [[[]]], {"": {}}, DEEP, list(range(10_000)), {f"k{i}": i for i in range(2000)},
                    *TEMPLATES]
CONTENT_TYPES = ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1", ""]
ENCODINGS = ["gzip", "gzip-bad", "deflate", "deflate-bad", "br", "zstd", "x-unknown", "gzip, gzip", "identity"]
REQUEST_IDS = [b"\xff\xfe", b"caf\xc3\xa9", b"x" * 4000, b"a b", b"", b"\xc3\x28"]


# -- mutations ------------------------------------------------------------------------------------

def places(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path] if path else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += places(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:8]):
            out += places(v, (*path, i))
    return out


def parent_of(body: Any, path: tuple) -> Any:
    for part in path[:-1]:
        body = body[part]
    return body


def encode(value: Any) -> bytes:
    """JSON with the raw markers written as the text they stand for."""
    def walk(v: Any) -> Any:
        if v is DEEP:
            return "\x00DEEP\x00"
        if v is NAN:
            return "\x00NAN\x00"
        if v is INF:
            return "\x00INF\x00"
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    text = json.dumps(walk(value))
    return (text.replace('"\\u0000DEEP\\u0000"', "[" * 1000 + "1" + "]" * 1000)
            .replace('"\\u0000NAN\\u0000"', "NaN").replace('"\\u0000INF\\u0000"', "Infinity").encode())


def edge(rng: random.Random) -> Any:
    """An edge value, a fresh copy of it when it is a container (later mutations may go into it)."""
    value = rng.choice(EDGES)
    return copy.deepcopy(value) if isinstance(value, (list, dict)) else value


def describe(value: Any) -> str:
    if value is DEEP or value is NAN or value is INF:
        return {id(DEEP): "<nested 1000 deep>", id(NAN): "NaN", id(INF): "Infinity"}[id(value)]
    if isinstance(value, (str, list, dict)) and len(repr(value)) > 40:
        return f"<{type(value).__name__} of {len(value)}>"
    return repr(value)


def mutate(rng: random.Random, body: dict[str, Any]) -> tuple[bytes, dict[str, Any], list[str]]:
    """(raw body, extra headers, what was done) for one case."""
    body = copy.deepcopy(body)
    headers: dict[str, Any] = {}
    done: list[str] = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        spots = places(body)
        if kind < 0.55 and spots:
            path = rng.choice(spots)
            value = edge(rng)
            parent_of(body, path)[path[-1]] = value
            done.append(f"{'.'.join(map(str, path))}={describe(value)}")
        elif kind < 0.65 and spots:
            path = rng.choice(spots)
            parent = parent_of(body, path)
            if isinstance(parent, dict):
                del parent[path[-1]]
                done.append(f"del {'.'.join(map(str, path))}")
        elif kind < 0.72:
            dicts = [p for p in [(), *spots] if isinstance(parent_of(body, (*p, None)) if p else body, dict)]
            target = parent_of(body, (*rng.choice(dicts), None)) if dicts else body
            key = rng.choice(["chat_template", "n", "request_id", "priority", "stream", "echo", "prompt_logprobs",
                              "max_completion_tokens", "truncate_prompt_tokens", "x" * 50])
            target[key] = edge(rng)
            done.append(f"add {key}")
        elif kind < 0.77 and spots:
            path = rng.choice(spots)
            parent = parent_of(body, path)
            parent[path[-1]] = [parent[path[-1]]]
            done.append(f"wrap {'.'.join(map(str, path))}")
        elif kind < 0.85:
            headers["Content-Encoding"] = rng.choice(ENCODINGS)
            done.append(f"Content-Encoding: {headers['Content-Encoding']}")
        elif kind < 0.90:
            headers["Content-Type"] = rng.choice(CONTENT_TYPES)
            done.append(f"Content-Type: {headers['Content-Type']!r}")
        else:
            headers["X-Request-Id"] = rng.choice(REQUEST_IDS)
            done.append(f"X-Request-Id: {headers['X-Request-Id'][:12]!r}")
    raw = encode(body)
    if rng.random() < 0.15:
        at = rng.randrange(len(raw))
        action = rng.choice(["cut", "flip", "insert", "dup-key"])
        if action == "cut":
            raw = raw[:at]
        elif action == "flip":
            raw = raw[:at] + bytes([rng.randrange(256)]) + raw[at + 1:]
        elif action == "insert":
            raw = raw[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + raw[at:]
        else:
            raw = raw.replace(b"{", b'{"model": 1, ', 1)
        done.append(f"bytes {action}@{at}")
    coding = headers.get("Content-Encoding")
    if coding in ("gzip", "gzip, gzip"):
        raw = gzip.compress(raw) if coding == "gzip" else gzip.compress(gzip.compress(raw))
    elif coding == "deflate":
        raw = zlib.compress(raw)
    elif coding in ("gzip-bad", "deflate-bad"):
        headers["Content-Encoding"] = coding.split("-")[0]
    return raw, headers, done


# -- one case -------------------------------------------------------------------------------------

def send(port: int, path: str, raw: bytes, headers: dict[str, Any], timeout: float) -> tuple[str, str]:
    """(class, detail) of one answer: "2xx", "4xx", "5xx", "bad-error-body", "stream-no-done", or the
    client-side failure ("timeout", "connection")."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest("POST", path)
        sent = {"Content-Type": "application/json", **headers}
        for name, value in sent.items():
            if value != "":
                conn.putheader(name, value)
        conn.putheader("Content-Length", str(len(raw)))
        conn.endheaders(raw)
        resp = conn.getresponse()
        body = resp.read()
    except socket.timeout:
        return "timeout", ""
    except (OSError, http.client.HTTPException) as exc:
        return "connection", f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    status = resp.status
    detail = f"{status} {body[:300]!r}"
    if status >= 500:
        return "5xx", detail
    if status >= 300:
        try:
            error = json.loads(body)["error"]
            ok = list(error) == ["message", "type", "param", "code"] and error["code"] == status
        except (ValueError, KeyError, TypeError):
            ok = False
        return ("4xx" if ok else "bad-error-body"), detail
    if resp.getheader("Content-Type", "").startswith("text/event-stream") and not body.endswith(b"data: [DONE]\n\n"):
        return "stream-no-done", detail
    return "2xx", detail


def run(args: argparse.Namespace, port: int) -> tuple[dict, dict, float]:
    rng = random.Random(args.seed)
    cases = []
    for path, body in ROUTES:
        for _ in range(args.cases):
            raw, headers, done = mutate(rng, body)
            cases.append((path, raw, headers, done))
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures: dict[str, list] = collections.defaultdict(list)
    t0 = time.monotonic()

    def one(case: tuple) -> tuple:
        path, raw, headers, done = case
        return path, done, *send(port, path, raw, headers, args.timeout)

    with ThreadPoolExecutor(args.workers) as pool:
        for path, done, kind, detail in pool.map(one, cases):
            counts[path][kind] += 1
            if kind not in ("2xx", "4xx") and len(failures[kind]) < 5:
                failures[kind].append((path, done, detail))
    return counts, failures, time.monotonic() - t0


def report(args: argparse.Namespace, counts: dict, failures: dict, wall: float) -> str:
    kinds = ["2xx", "4xx", "5xx", "bad-error-body", "stream-no-done", "timeout", "connection"]
    total = sum(sum(c.values()) for c in counts.values())
    bad = sum(c[k] for c in counts.values() for k in kinds[2:])
    lines = [
        "# Fuzz of every POST route (`bench/fuzz.py`)",
        "",
        f"Recorded {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} CPUs (Python "
        f"{platform.python_version()}). Reference engine and `derender-proxy serve` (hermes + qwen3 parsers, "
        f"--trust-request-chat-template) on loopback; {args.cases} mutated requests per route body (seed {args.seed}), "
        f"{total} in all, {args.workers} at a time, in {wall:.0f} s.",
        "",
        f"**{bad} answers broke the rule** (a 5xx, an error body not in OpenAI's shape, a stream without "
        "`data: [DONE]`, no answer in time).",
        "",
        "| route | " + " | ".join(kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for path in dict.fromkeys(p for p, _ in ROUTES):
        c = counts[path]
        lines.append(f"| `{path}` | " + " | ".join(str(c[k]) for k in kinds) + " |")
    if failures:
        lines += ["", "## First failures of each kind", ""]
        for kind, items in failures.items():
            for path, done, detail in items:
                lines.append(f"* {kind} on `{path}` after {', '.join(done)}: `{detail[:200]}`")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1500, help="mutated requests per route body")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "fuzz.md"))
    args = parser.parse_args()
    log = Path(tempfile.mkdtemp(prefix="bench-fuzz-")) / "proxy.log"
    with stack([], [*PARSER_FLAGS, "--trust-request-chat-template", "--request-template-timeout", "2"],
               proxy_stderr=log.open("wb")) as running:
        counts, failures, wall = run(args, running.proxy_port)
    text = report(args, counts, failures, wall)
    errors = [line for line in log.read_text(errors="replace").splitlines() if '"level":"error"' in line]
    text += f"\nProxy log lines at level error: {len(errors)}.\n"
    text += "".join(f"* `{line[:300]}`\n" for line in errors[:5])
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
