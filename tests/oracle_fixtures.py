"""Load golden answers recorded from real vLLM (tests/fixtures/oracle/*.json).

The files are written by the recorders in tests/oracle/ (see tests/oracle/README.md for
every file's schema). Tests compare our answers with them field by field; values that vLLM
makes up per call (``created`` timestamps, random ``chatcmpl-tool-`` ids, render request
ids) are listed in ``VOLATILE_KEYS`` and must be compared by shape, not by value.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

ORACLE_FIXTURES = Path(__file__).parent / "fixtures" / "oracle"

# keys whose values differ on every call to vLLM
VOLATILE_KEYS = frozenset({"created"})
TOOL_CALL_ID = re.compile(r"^chatcmpl-tool-[0-9a-f]{16}$")
MISTRAL_TOOL_CALL_ID = re.compile(r"^[A-Za-z0-9]{9}$")


@functools.lru_cache(maxsize=None)
def load_document(name: str) -> dict[str, Any]:
    """The whole fixture file (``name`` with or without ``.json``). Cached: treat it as
    read-only (load_fixture returns copies)."""
    path = ORACLE_FIXTURES / (name if name.endswith(".json") else name + ".json")
    return json.loads(path.read_text(encoding="utf-8"))


def load_fixture(name: str) -> list[dict[str, Any]]:
    """The cases of one fixture file (deep copies: mutate freely); each case gets
    ``server_info`` (the file's description of the vLLM server it was recorded on: version,
    model, flags)."""
    doc = copy.deepcopy(load_document(name))
    servers = doc.get("servers", {})
    cases = []
    for case in doc["cases"]:
        case = dict(case)
        case["server_info"] = servers.get(case.get("server", ""), {})
        cases.append(case)
    return cases


def case_by_name(name: str, case_name: str) -> dict[str, Any]:
    for case in load_fixture(name):
        if case["name"] == case_name:
            return case
    raise KeyError(f"{name}: no case {case_name!r}")


def stream_calls(case: dict[str, Any]) -> list[tuple[dict[str, Any], int, Any]]:
    """The calls of a streaming case as ``(request without stream_state, status, chunk)``.

    Works for both stored forms: full ``calls`` (the response's ``chunk`` is returned, or the
    error body) and compact ``stream`` (``common`` + one ``chunks`` entry per call). The
    caller threads its own stream_state from call to call."""
    out: list[tuple[dict[str, Any], int, Any]] = []
    if "calls" in case:
        for call in case["calls"]:
            req = {k: v for k, v in call["request"].items() if k != "stream_state"}
            resp = call["response"]
            if call["status"] == 200 and isinstance(resp, dict) and "chunk" in resp:
                resp = resp["chunk"]
            out.append((req, call["status"], resp))
        return out
    stream = case["stream"]
    for chunk, status, resp in zip(stream["chunks"], stream["statuses"], stream["responses"]):
        out.append((dict(stream["common"], generate_chunk=chunk), status, resp))
    return out


def scrub(value: Any) -> Any:
    """A copy with volatile values replaced by placeholders, for equality checks:
    ``created`` -> 0, tool-call ids of the ``chatcmpl-tool-<16 hex>`` shape (and Mistral's
    9 alphanumerics) -> that shape's name. Apply it to both sides of a comparison."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in VOLATILE_KEYS:
                out[k] = 0
            elif k == "id" and isinstance(v, str) and TOOL_CALL_ID.match(v):
                out[k] = "chatcmpl-tool-<16hex>"
            elif k == "id" and isinstance(v, str) and MISTRAL_TOOL_CALL_ID.match(v):
                out[k] = "<9 alphanumerics>"
            else:
                out[k] = scrub(v)
        return out
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value
