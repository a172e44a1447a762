"""The recorded vLLM fixtures stay loadable and keep the schema tests rely on."""

from __future__ import annotations

import pytest

from tests.oracle_fixtures import (ORACLE_FIXTURES, load_document, load_fixture, scrub,
                                  stream_calls)

FILES = sorted(p.stem for p in ORACLE_FIXTURES.glob("*.json"))


@pytest.mark.parametrize("name", FILES)
def test_fixture_schema(name: str) -> None:
    doc = load_document(name)
    assert doc["vllm_versions"] and doc["servers"]
    names = set()
    for case in load_fixture(name):
        assert case["name"] not in names
        names.add(case["name"])
        assert case["server_info"]["vllm_version"] in doc["vllm_versions"]
        if "calls" in case:
            assert case["calls"] and all({"request", "status", "response"} <= c.keys()
                                         for c in case["calls"])
        elif "stream" in case:
            calls = stream_calls(case)
            assert calls and len(calls) == len(case["stream"]["statuses"])
            assert all(req["stream"] is True and "generate_chunk" in req for req, _, _ in calls)
        else:
            assert {"request", "status", "response", "path"} <= case.keys()


def test_scrub_normalizes_volatile_values() -> None:
    a = {"created": 1, "choices": [{"message": {"tool_calls": [
        {"id": "chatcmpl-tool-0123456789abcdef", "type": "function"}]}}]}
    b = {"created": 2, "choices": [{"message": {"tool_calls": [
        {"id": "chatcmpl-tool-fedcba9876543210", "type": "function"}]}}]}
    assert scrub(a) == scrub(b)
    assert scrub({"id": "chatcmpl-tool-x"}) != scrub({"id": "chatcmpl-tool-y"})
    assert scrub({"id": "v0iSqgo2X"}) == scrub({"id": "kiVz3mzTL"})
