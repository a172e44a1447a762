"""POST /v1/responses (and GET / DELETE / cancel) through the proxy in front of a reference engine,
with the official `openai` client: items, streams, the store (real SQLite files and a real Redis
server, shared by two replicas, across a restart), background mode and cancellation."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from dataclasses import replace

import openai
import pytest

from core.reference_engine import ReplyBook
from proxy.app import create_app
from proxy.reference_engine import REFERENCE
from tests.proxy.frontdoor_stack import PARSERS, Stack, post_raw, wait_for
from tests.proxy.loopback import LoopbackServer
from tests.proxy.serve_process import ServeProcess
from tests.services.redis_server import redis_server

CALL_REPLY = ('<think>\nI should look up the weather.\n</think>\n\nLet me check.\n<tool_call>\n'
              '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
FINAL_REPLY = "<think>\nThe tool said sunny.\n</think>\n\nIt is sunny in Paris."
TEXT_REPLY = "<think>\nShort.\n</think>\n\nHello there, friend."
TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]


def script(stack: Stack, *replies: tuple[str, str | None], token_delay_ms: float = 0.0) -> None:
    """Replies picked by what the prompt holds (the first whose text is in it), else in turn."""
    for server in stack.engines:
        engine = server.app[REFERENCE]
        engine.replies = ReplyBook(stack.model, list(replies))
        engine.token_delay = token_delay_ms / 1000.0
        engine.aborted.clear()


def tool_loop(stack: Stack, token_delay_ms: float = 0.0) -> None:
    script(stack, (FINAL_REPLY, "sunny"), (CALL_REPLY, "weather"), token_delay_ms=token_delay_ms)


class Replica:
    """A second proxy on the same engines and store (another replica behind a load balancer)."""

    def __init__(self, stack: Stack, **changes) -> None:
        config = replace(stack.config, **changes)
        self.server = LoopbackServer(lambda: create_app(config, stack.model)).start()
        self.base_url = self.server.url + "/v1"

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key="unused", max_retries=0)

    def close(self) -> None:
        self.server.stop()


@pytest.fixture(scope="module")
def stack(qwen3, tmp_path_factory):
    store = tmp_path_factory.mktemp("store") / "responses.db"
    stack = Stack(qwen3, response_store=f"sqlite:///{store}", **PARSERS)
    yield stack
    stack.close()


def kinds(response) -> list[str]:
    return [item.type for item in response.output]


def test_create_non_streaming_with_reasoning_text_and_a_call(stack):
    tool_loop(stack)
    client = stack.client()
    r = client.responses.create(model="tiny-qwen3", input="What is the weather in Paris?", tools=TOOLS,
                                instructions="Be brief.", metadata={"k": "v"}, temperature=0.3)
    assert r.status == "completed" and r.object == "response" and r.id.startswith("resp_")
    assert kinds(r) == ["reasoning", "message", "function_call"]
    assert r.output[0].content[0].text == "\nI should look up the weather.\n"
    assert r.output_text.strip() == "Let me check."
    call = r.output[2]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id.startswith("chatcmpl-tool-") and call.id.startswith("fc_")
    assert (r.instructions, r.metadata, r.temperature) == ("Be brief.", {"k": "v"}, 0.3)
    assert r.tools[0].name == "get_weather" and r.tool_choice == "auto"
    usage = r.usage
    assert usage.output_tokens_details.reasoning_tokens == len(stack.model.tokenizer.encode(
        "\nI should look up the weather.\n"))
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens == len(stack.last_engine_request()["token_ids"])


def test_a_length_cut_is_incomplete(stack):
    script(stack, (TEXT_REPLY, None))
    r = stack.client().responses.create(model="tiny-qwen3", input="hi", max_output_tokens=6)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 6 and r.max_output_tokens == 6
    assert stack.last_engine_request()["sampling_params"]["max_tokens"] == 6


def test_stream_events_and_the_stream_helper_equal_the_non_streamed_answer(stack):
    tool_loop(stack)
    client = stack.client()
    whole = client.responses.create(model="tiny-qwen3", input="Weather in Paris?", tools=TOOLS)
    events = list(client.responses.create(model="tiny-qwen3", input="Weather in Paris?", tools=TOOLS, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    for kind in ("response.reasoning_text.delta", "response.output_text.delta",
                 "response.function_call_arguments.delta", "response.function_call_arguments.done"):
        assert kind in types
    final = events[-1].response
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert args == final.output[2].arguments == whole.output[2].arguments
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == final.output_text == whole.output_text
    with client.responses.stream(model="tiny-qwen3", input="Weather in Paris?", tools=TOOLS) as stream:
        helper = stream.get_final_response()
    assert kinds(helper) == kinds(whole) and helper.output_text == whole.output_text
    assert helper.usage.output_tokens == whole.usage.output_tokens
    # the streamed response was stored like a non-streamed one
    assert client.responses.retrieve(final.id).output_text == final.output_text


def test_logprobs_of_a_plain_answer(stack):
    script(stack, ("<think>\n</think>\n\nHello world, 你好!", None))
    client = stack.client()
    include = ["message.output_text.logprobs"]
    r = client.responses.create(model="tiny-qwen3", input="hi", include=include, top_logprobs=2)
    part = r.output[-1].content[0]
    assert part.logprobs and all(len(lp.top_logprobs) == 2 for lp in part.logprobs)
    assert r.top_logprobs == 2
    events = list(client.responses.create(model="tiny-qwen3", input="hi", include=include, top_logprobs=2,
                                          stream=True))
    deltas = [lp.token for e in events if e.type == "response.output_text.delta" for lp in e.logprobs]
    streamed_part = events[-1].response.output[-1].content[0]
    assert deltas == [lp.token for lp in streamed_part.logprobs] and deltas


def test_text_format_becomes_the_engines_structured_output(stack):
    script(stack, ('<think>\n</think>\n\n{"a": 1}', None))
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    r = stack.client().responses.create(model="tiny-qwen3", input="json please", text={
        "format": {"type": "json_schema", "name": "thing", "schema": schema}})
    assert json.loads(r.output_text) == {"a": 1}
    assert stack.last_engine_request()["sampling_params"]["structured_outputs"]["json"] == schema


def test_a_client_that_leaves_a_stream_aborts_the_engine_request(stack):
    script(stack, ("<think>\nhm\n</think>\n\n" + "word " * 400, None), token_delay_ms=20)
    req = urllib.request.Request(stack.url + "/v1/responses", method="POST",
                                 data=json.dumps({"input": "talk", "stream": True}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.readline().startswith(b"event: response.created")
    assert stack.wait_aborted(5.0)


def test_store_retrieve_continue_delete(stack):
    tool_loop(stack)
    client = stack.client()
    first = client.responses.create(model="tiny-qwen3", input="What is the weather in Paris?", tools=TOOLS)
    assert client.responses.retrieve(first.id).model_dump() == first.model_dump()
    call = first.output[-1]
    second = client.responses.create(model="tiny-qwen3", previous_response_id=first.id, tools=TOOLS,
                                     input=[{"type": "function_call_output", "call_id": call.call_id,
                                             "output": "sunny"}])
    assert second.output_text == "\n\nIt is sunny in Paris." and second.previous_response_id == first.id
    prompt = stack.model.tokenizer.decode(stack.last_engine_request()["token_ids"])
    assert "What is the weather in Paris?" in prompt and '"city": "Paris"' in prompt and "sunny" in prompt
    # a third turn continues the second, which carries the first
    script(stack, (TEXT_REPLY, None))
    third = client.responses.create(model="tiny-qwen3", previous_response_id=second.id, input="thanks")
    prompt = stack.model.tokenizer.decode(stack.last_engine_request()["token_ids"])
    assert "What is the weather in Paris?" in prompt and "It is sunny in Paris." in prompt and "thanks" in prompt
    assert third.status == "completed"
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError, match=f"Response with id '{first.id}' not found"):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(first.id)
    unstored = client.responses.create(model="tiny-qwen3", input="hi", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_an_unknown_previous_response_id_is_a_404(stack):
    status, _, body = post_raw(stack.url + "/v1/responses", {"input": "hi", "previous_response_id": "resp_nope"})
    assert status == 404
    assert json.loads(body)["error"] == {"message": "Response with id 'resp_nope' not found.",
                                         "type": "invalid_request_error", "param": "response_id", "code": 404}


@pytest.mark.parametrize("body,param", [
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": [{"type": "no_such_item"}]}, "body.input"),
    ({"input": "hi", "max_output_tokens": 10**9}, None),
])
def test_bad_input_is_a_400_and_nothing_is_stored(stack, body, param):
    import sqlite3

    path = stack.config.response_store[len("sqlite:///"):]

    def rows() -> int:
        with sqlite3.connect(path) as db:
            return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    stack.client().responses.create(model="tiny-qwen3", input="make sure the store exists", store=True)
    before = rows()
    for background in (False, True):
        status, _, text = post_raw(stack.url + "/v1/responses", {**body, "background": background})
        error = json.loads(text)["error"]
        assert status == 400 and error["code"] == 400
        if param is not None:
            assert error["param"] == param
    assert rows() == before


def test_store_off(qwen3):
    stack = Stack(qwen3, response_store="none", **PARSERS)
    try:
        script(stack, (TEXT_REPLY, None))
        client = stack.client()
        r = client.responses.create(model="tiny-qwen3", input="hi")  # store: true is ignored
        assert r.status == "completed"
        for call in (lambda: client.responses.create(model="tiny-qwen3", input="hi", previous_response_id=r.id),
                     lambda: client.responses.retrieve(r.id),
                     lambda: client.responses.create(model="tiny-qwen3", input="hi", background=True)):
            with pytest.raises(openai.BadRequestError, match="store"):
                call()
    finally:
        stack.close()


def test_background_poll_and_cancel(stack):
    script(stack, (TEXT_REPLY, None))
    client = stack.client()
    queued = client.responses.create(model="tiny-qwen3", input="hi", background=True)
    assert queued.status == "queued" and queued.background and queued.output == []
    wait_for(lambda: client.responses.retrieve(queued.id).status == "completed", 20)
    assert "Hello there" in client.responses.retrieve(queued.id).output_text

    script(stack, ("<think>\nhm\n</think>\n\n" + "word " * 500, None), token_delay_ms=20)
    slow = client.responses.create(model="tiny-qwen3", input="talk", background=True)
    wait_for(lambda: client.responses.retrieve(slow.id).status == "in_progress", 10)
    # its output is not there yet: continuing it is a 400 that says so, not a prompt without the answer
    with pytest.raises(openai.BadRequestError, match="is still in_progress") as err:
        client.responses.create(model="tiny-qwen3", input="and then?", previous_response_id=slow.id)
    assert err.value.body["param"] == "previous_response_id"
    cancelled = client.responses.cancel(slow.id)
    assert cancelled.status == "cancelled" and client.responses.retrieve(slow.id).status == "cancelled"
    assert stack.wait_aborted(5.0)
    with pytest.raises(openai.BadRequestError, match="Cannot cancel a synchronous response"):
        client.responses.cancel(queued.id)


def test_a_background_stream_goes_on_without_its_client_and_resumes(stack):
    script(stack, ("<think>\nhm\n</think>\n\n" + "word " * 60, None), token_delay_ms=5)
    client = stack.client()
    stream = client.responses.create(model="tiny-qwen3", input="talk", background=True, stream=True)
    first = []
    for event in stream:
        first.append(event)
        if len(first) == 8:
            break
    stream.close()  # the client leaves; the generation goes on
    response_id = first[0].response.id
    wait_for(lambda: client.responses.retrieve(response_id).status == "completed", 20)
    assert not stack.engine_state.aborted
    rest = list(client.responses.retrieve(response_id, stream=True, starting_after=first[-1].sequence_number))
    assert [e.sequence_number for e in first + rest] == list(range(len(first) + len(rest)))
    final = rest[-1].response
    assert rest[-1].type == "response.completed" and final.output_text.strip() == ("word " * 60).strip()
    assert client.responses.retrieve(response_id).output_text == final.output_text


@pytest.mark.slow
def test_two_processes_share_the_sqlite_store(stack, tmp_path):
    """A `derender-proxy serve` process on the same engine and store file continues what this one stored."""
    tool_loop(stack)
    first = stack.client().responses.create(model="tiny-qwen3", input="What is the weather in Paris?", tools=TOOLS)
    other = ServeProcess(str(_model_dir(stack)), "--served-model-name", "tiny-qwen3",
                         "--engine-url", stack.engines[0].url, "--response-store", stack.config.response_store,
                         *_parser_flags(), tmp_path=tmp_path).start()
    try:
        client = openai.OpenAI(base_url=other.url + "/v1", api_key="unused", max_retries=0)
        assert client.responses.retrieve(first.id).output_text == first.output_text
        second = client.responses.create(model="tiny-qwen3", previous_response_id=first.id, tools=TOOLS,
                                         input=[{"type": "function_call_output", "call_id": first.output[-1].call_id,
                                                 "output": "sunny"}])
        assert "sunny" in second.output_text
        assert stack.client().responses.retrieve(second.id).output_text == second.output_text
    finally:
        other.stop()


@pytest.mark.slow
def test_a_streamed_response_is_stored_before_its_last_event(stack, tmp_path):
    """A client may continue on another replica the moment it reads `response.completed`: the
    stream's record must be in the shared store by then (it was written after the end, and half
    of such continuations got a 404)."""
    script(stack, (TEXT_REPLY, None))
    other = ServeProcess(str(_model_dir(stack)), "--served-model-name", "tiny-qwen3",
                         "--engine-url", stack.engines[0].url, "--response-store", stack.config.response_store,
                         *_parser_flags(), tmp_path=tmp_path).start()
    try:
        here = stack.client()
        there = openai.OpenAI(base_url=other.url + "/v1", api_key="unused", max_retries=0)
        for _ in range(24):
            with here.responses.create(model="tiny-qwen3", input="hi", stream=True) as events:
                done = next(e for e in events if e.type == "response.completed")
                # asked before the rest of the body (the end of the chunked stream) is even read
                follow = there.responses.create(model="tiny-qwen3", input="more",
                                                previous_response_id=done.response.id)
            assert follow.status == "completed" and follow.usage.input_tokens > done.response.usage.input_tokens
        # a background stream too: its answer is stored before its terminal event is logged
        for _ in range(12):
            with here.responses.create(model="tiny-qwen3", input="hi", stream=True, background=True) as events:
                done = next(e for e in events if e.type == "response.completed")
                stored_there = there.responses.retrieve(done.response.id)
            assert (stored_there.status, stored_there.output_text) == ("completed", done.response.output_text)
    finally:
        other.stop()


def _model_dir(stack: Stack):
    from tests.models import write_model
    import tempfile
    from pathlib import Path

    return write_model("qwen3", Path(tempfile.mkdtemp()) / "qwen3")


def _parser_flags() -> list[str]:
    return ["--tool-call-parser", "hermes", "--reasoning-parser", "qwen3", "--enable-auto-tool-choice"]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


def test_replicas_share_a_redis_store_across_a_restart_and_cancel_each_others_responses(qwen3, redis_url):
    stack = Stack(qwen3, response_store=redis_url, **PARSERS)
    replica = Replica(stack)
    try:
        tool_loop(stack)
        first = stack.client().responses.create(model="tiny-qwen3", input="What is the weather in Paris?",
                                                tools=TOOLS)
        second = replica.client().responses.create(
            model="tiny-qwen3", previous_response_id=first.id, tools=TOOLS,
            input=[{"type": "function_call_output", "call_id": first.output[-1].call_id, "output": "sunny"}])
        assert "sunny" in second.output_text
        replica.close()
        replica = Replica(stack)  # a restarted replica still finds both
        assert replica.client().responses.retrieve(second.id).output_text == second.output_text
        # a background response running on the first replica, cancelled through the second
        script(stack, ("<think>\nhm\n</think>\n\n" + "word " * 500, None), token_delay_ms=20)
        slow = stack.client().responses.create(model="tiny-qwen3", input="talk", background=True)
        wait_for(lambda: stack.client().responses.retrieve(slow.id).status == "in_progress", 10)
        assert replica.client().responses.cancel(slow.id).status == "cancelled"
        assert stack.wait_aborted(10.0)  # the running replica noticed and stopped the engine
    finally:
        replica.close()
        stack.close()


def test_a_store_that_is_down_fails_only_what_needs_it(qwen3, tmp_path):
    with redis_server(tmp_path) as server:
        stack = Stack(qwen3, response_store=server.url, **PARSERS)
        script(stack, (TEXT_REPLY, None))
        stored = stack.client().responses.create(model="tiny-qwen3", input="hi")
    try:  # redis-server has stopped
        client = stack.client()
        for call in (lambda: client.responses.retrieve(stored.id),
                     lambda: client.responses.create(model="tiny-qwen3", input="hi", previous_response_id=stored.id),
                     lambda: client.responses.create(model="tiny-qwen3", input="hi", background=True)):
            with pytest.raises(openai.InternalServerError, match="response store .* is unavailable") as info:
                call()
            assert info.value.status_code == 503
        assert client.responses.create(model="tiny-qwen3", input="hi", store=False).status == "completed"
        assert client.responses.create(model="tiny-qwen3", input="hi").status == "completed"  # stored at best
        assert client.chat.completions.create(model="tiny-qwen3", messages=[{"role": "user", "content": "hi"}])
    finally:
        stack.close()
