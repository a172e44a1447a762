"""POST /v1/responses in front of the real `vllm serve --tokens-only` (vLLM 0.32, tiny-qwen3, random
weights), with the official `openai` client.

Skipped unless the oracle engine answers on 127.0.0.1:8201 (`cd ~/vllm-oracle && ./start-engine.sh
tiny-qwen3 8201`). The weights are random, so the text is noise; at temperature 0 it is the same
noise every time, which lets the tests check that `responses.create`, the raw event stream and the
`responses.stream` helper agree, that the prompt the engine was sent is the one our own
`/v1/responses/render` gives for the same input (a continuation by `previous_response_id` included),
and that an engine 400 (structured outputs on a tokens-only engine) reaches the client in OpenAI's
shape, streamed or not.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.proxy.frontdoor_stack import PARSERS, post_raw
from tests.proxy.test_openai_oracle import OracleStack, alone_on_the_engine, oracle_marks  # noqa: F401 (autouse)

ORACLE_ENGINE = "http://127.0.0.1:8201"
MODEL = "tiny-qwen3"
GREEDY = {"model": MODEL, "temperature": 0}
TOOLS = [{"type": "function", "name": "set_unit", "description": "Pick a unit", "parameters": {
    "type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["unit"]}}]

pytestmark = oracle_marks(ORACLE_ENGINE)


@pytest.fixture(scope="module")
def stack(qwen3, tmp_path_factory):
    store = tmp_path_factory.mktemp("store") / "responses.db"
    s = OracleStack(qwen3, ORACLE_ENGINE, response_store=f"sqlite:///{store}", **PARSERS)
    yield s
    s.close()


def client(stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=stack.base_url, api_key="unused", max_retries=0, timeout=120)


def comparable(response: openai.types.responses.Response) -> dict[str, Any]:
    """The response without what is random or timed per request: ids and timestamps."""
    out = response.model_dump(exclude_none=True, warnings=False)
    for key in ("id", "created_at", "completed_at"):
        out.pop(key, None)
    for item in out["output"]:
        item.pop("id", None)
        if item["type"] == "reasoning":  # vLLM 0.33: null when not streamed, the closing status when streamed
            item.pop("status", None)
        if item["type"] == "function_call":
            assert item.pop("call_id").startswith("chatcmpl-tool-")  # vLLM's id rule (hermes)
    return out


def rendered_length(stack, **request: Any) -> int:
    status, _, body = post_raw(stack.base_url + "/responses/render", {"model": MODEL, **request})
    assert status == 200, body
    return len(json.loads(body)["token_ids"])


def all_three(stack, **request: Any) -> openai.types.responses.Response:
    """`create`, the raw event stream and the `stream` helper: one answer, and the deltas add up to it."""
    c = client(stack)
    created = c.responses.create(**GREEDY, **request)
    events = list(c.responses.create(**GREEDY, **request, stream=True))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    streamed = events[-1].response
    assert events[-1].type == f"response.{streamed.status}"
    assert comparable(streamed) == comparable(created)
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == created.output_text
    reasoning = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert reasoning == "".join(part.text for item in created.output if item.type == "reasoning"
                                for part in item.content or ())
    with c.responses.stream(**GREEDY, **request) as stream:
        helper_events = list(stream)
        assert comparable(helper_events[-1].response) == comparable(created)
        if created.status == "completed":
            # (openai 3.x's get_final_response() knows only response.completed: an incomplete
            # answer, which OpenAI ends with response.incomplete as we do, raises there)
            assert comparable(stream.get_final_response()) == comparable(created)
    return created


def test_a_length_cut_thinking_answer(stack):
    r = all_three(stack, input="Say something.", max_output_tokens=24)
    assert (r.status, r.incomplete_details.reason) == ("incomplete", "max_output_tokens")
    assert r.output[0].type == "reasoning"  # qwen3: no `</think>` yet, all of it is reasoning
    assert r.usage.output_tokens == 24
    assert r.usage.input_tokens == rendered_length(stack, input="Say something.")


def test_instructions_and_tools(stack):
    request = dict(input=[{"role": "user", "content": "Which unit?"}], instructions="Be brief.", tools=TOOLS,
                   max_output_tokens=40)
    r = all_three(stack, **request)
    assert r.status in ("completed", "incomplete") and r.instructions == "Be brief."
    assert r.tools[0].name == "set_unit"
    assert r.usage.input_tokens == rendered_length(stack, **request)


def test_a_continuation_is_rendered_as_its_whole_history(stack):
    c = client(stack)
    first = c.responses.create(**GREEDY, input="Say something.", max_output_tokens=16)
    assert c.responses.retrieve(first.id).output == first.output
    second = c.responses.create(**GREEDY, input="More.", previous_response_id=first.id, max_output_tokens=16)
    history = ([{"role": "user", "content": "Say something."}]
               + [item.model_dump(exclude_none=True) for item in first.output]
               + [{"role": "user", "content": "More."}])
    assert second.usage.input_tokens == rendered_length(stack, input=history)
    c.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        c.responses.create(**GREEDY, input="Again.", previous_response_id=first.id, max_output_tokens=4)


@pytest.mark.parametrize("stream", [False, True])
def test_structured_output_on_a_tokens_only_engine_is_its_400(stack, stream):
    """`text.format` json_schema becomes the engine's structured output, which a tokens-only vLLM
    0.32 engine refuses (it has no tokenizer): its 400 reaches the client as an OpenAI error."""
    text = {"format": {"type": "json_schema", "name": "thing", "schema": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as err:
        answer = client(stack).responses.create(**GREEDY, input="json", text=text, stream=stream)
        list(answer) if stream else answer
    assert "Structured outputs requires a tokenizer" in err.value.body["message"]
