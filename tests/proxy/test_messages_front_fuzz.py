"""Hostile-client fuzzing of POST /v1/messages over real HTTP (streamed and not), in front of the
reference engine: the mutations of tests/proxy/test_fuzz_endpoints.py applied to a rich Messages
request. Never a 5xx; errors are Anthropic's `{"type": "error", ...}`; a 200 is a message, or an
event stream that starts with `message_start` and ends with `message_stop` (or an `error` event).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from tests.proxy.test_fuzz_endpoints import Http, Response, encode, mutated, stack  # noqa: F401
from tests.proxy.test_messages_render_fuzz import BODY, HEADERS, http  # noqa: F401


def check_answer(resp: Response, stream: bool) -> None:
    assert resp.status_code < 500, (resp.status_code, resp.text[:600])
    if resp.status_code >= 300:
        data = resp.json()
        assert list(data) == ["type", "error"] and data["type"] == "error", data
        assert list(data["error"]) == ["type", "message"] and data["error"]["message"], data
        return
    if not stream:
        message = resp.json()
        assert message["type"] == "message" and message["content"] and message["usage"]["input_tokens"] > 0
        return
    assert resp.headers["content-type"].startswith("text/event-stream")
    names = [frame.split("\n")[0] for frame in resp.text.split("\n\n") if frame]
    assert names[0] == "event: message_start", names
    assert names[-1] in ("event: message_stop", "event: error"), names


@pytest.mark.parametrize("stream", [False, True])
def test_the_base_body_is_answered(http, stream):  # noqa: F811
    resp = http.post("/v1/messages", encode({**BODY, "stream": stream}), HEADERS)
    assert resp.status_code == 200, resp.text[:500]
    check_answer(resp, stream)
    if not stream:
        assert [b["type"] for b in json.loads(resp.content)["content"]] == ["thinking", "text", "tool_use"]


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=mutated(BODY))
def test_messages_never_fail_badly(http, stream, body):  # noqa: F811
    check_answer(http.post("/v1/messages", encode({**body, "stream": stream}), HEADERS), stream)
