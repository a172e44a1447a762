"""/v1/completions through the proxy in front of a reference engine, with the official client."""

from __future__ import annotations

import json
import time

import openai
import orjson
import pytest

from proxy.reference_engine import REFERENCE, Faults
from tests.proxy.frontdoor_stack import Stack, post_raw

REPLY = "The quick brown fox jumps over the lazy dog. 東京 🙂"


@pytest.fixture(scope="module")
def stack(qwen3):
    s = Stack(qwen3)
    yield s
    s.close()



def aggregate(chunks) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            agg = out.setdefault(choice.index, {"text": "", "finish_reason": None, "stop_reason": None,
                                                "tokens": [], "offsets": []})
            agg["text"] += choice.text
            if choice.logprobs:
                agg["tokens"] += choice.logprobs.tokens
                agg["offsets"] += choice.logprobs.text_offset
            if choice.finish_reason:
                agg["finish_reason"] = choice.finish_reason
                agg["stop_reason"] = choice.model_extra.get("stop_reason")
    return out


def test_completion_non_stream_and_stream_agree(stack, qwen3):
    stack.set_replies([REPLY])
    c = stack.client()
    full = c.completions.create(model="tiny-qwen3", prompt="Say something", max_tokens=200)
    (choice,) = full.choices
    assert choice.text == REPLY and choice.finish_reason == "stop"
    assert full.object == "text_completion" and full.id.startswith("cmpl-")
    assert full.usage.prompt_tokens == len(qwen3.tokenizer.encode("Say something"))
    assert full.usage.completion_tokens == len(qwen3.tokenizer.encode(REPLY)) + 1
    chunks = list(c.completions.create(model="tiny-qwen3", prompt="Say something", max_tokens=200, stream=True,
                                       stream_options={"include_usage": True}))
    agg = aggregate(chunks)[0]
    assert agg["text"] == choice.text and agg["finish_reason"] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens


def test_completion_length_finish(stack, qwen3):
    stack.set_replies([REPLY])
    r = stack.client().completions.create(model="tiny-qwen3", prompt="x", max_tokens=4)
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].text == qwen3.tokenizer.decode(qwen3.tokenizer.encode(REPLY)[:4])
    assert stack.last_engine_request()["sampling_params"]["max_tokens"] == 4


def test_completion_wire_format(stack):
    stack.set_replies(["Hi there"])
    status, _, text = post_raw(stack.url + "/v1/completions", {"prompt": "x", "stream": True,
                                                               "stream_options": {"include_usage": True}})
    assert status == 200
    parts = text.split("\n\n")
    assert parts[-2:] == ["data: [DONE]", ""]
    *events, usage = [orjson.loads(p[6:]) for p in parts[:-2]]
    for event in events:
        assert list(event) == ["id", "object", "created", "model", "choices", "kv_transfer_params"]
        assert list(event["choices"][0]) == ["index", "text", "logprobs", "finish_reason", "stop_reason",
                                             "prompt_token_ids", "token_ids", "weight_versions"]
    assert list(usage) == ["id", "object", "created", "model", "choices", "usage"]
    assert list(usage["usage"]) == ["prompt_tokens", "total_tokens", "completion_tokens"]
    full = json.loads(post_raw(stack.url + "/v1/completions", {"prompt": "x"})[2])
    assert list(full) == ["id", "object", "created", "model", "choices", "service_tier", "system_fingerprint",
                          "usage", "kv_transfer_params", "ec_transfer_params", "metrics"]
    assert list(full["choices"][0]) == ["index", "text", "logprobs", "finish_reason", "stop_reason", "token_ids",
                                        "prompt_logprobs", "prompt_token_ids", "routed_experts", "weight_versions"]


def test_several_prompts_and_n(stack):
    stack.set_replies(["alpha beta", "gamma delta epsilon"])
    c = stack.client()
    full = c.completions.create(model="tiny-qwen3", prompt=["first prompt", "second prompt"], n=2,
                                temperature=1.0, max_tokens=50)
    assert [ch.index for ch in full.choices] == [0, 1, 2, 3]
    chunks = list(c.completions.create(model="tiny-qwen3", prompt=["first prompt", "second prompt"], n=2,
                                       temperature=1.0, max_tokens=50, stream=True))
    agg = aggregate(chunks)
    assert {i: agg[i]["text"] for i in agg} == {ch.index: ch.text for ch in full.choices}
    # one engine request per prompt, named like vLLM's render names them (plus the suffix that
    # keeps engine ids unique when clients reuse an X-Request-Id)
    ids = [r["request_id"].rsplit("-", 1)[0] for r in list(stack.engine_state.received)[-2:]]
    assert sorted(ids) == [f"{chunks[0].id}-0", f"{chunks[0].id}-1"]


def test_echo(stack):
    stack.set_replies([" and more"])
    r = stack.client().completions.create(model="tiny-qwen3", prompt="Start", echo=True, max_tokens=20)
    assert r.choices[0].text == "Start and more"
    chunks = list(stack.client().completions.create(model="tiny-qwen3", prompt="Start", echo=True, max_tokens=20,
                                                   stream=True))
    assert aggregate(chunks)[0]["text"] == "Start and more"


def test_logprobs_text_offsets(stack):
    stack.set_replies([REPLY])
    c = stack.client()
    full = c.completions.create(model="tiny-qwen3", prompt="x", logprobs=2, max_tokens=200)
    lp = full.choices[0].logprobs
    assert lp.text_offset[0] == 0
    for a, b, tok in zip(lp.text_offset, lp.text_offset[1:], lp.tokens):
        assert b == a + len(tok)
    assert all(t is None or len(t) <= 3 for t in lp.top_logprobs)  # logprobs + 1 candidates
    agg = aggregate(c.completions.create(model="tiny-qwen3", prompt="x", logprobs=2, max_tokens=200, stream=True))[0]
    assert agg["tokens"] == lp.tokens and agg["offsets"] == lp.text_offset


def test_stop_string_cuts_and_aborts(stack):
    stack.set_replies([" ".join(f"n{i}" for i in range(80))], token_delay_ms=5)
    chunks = list(stack.client().completions.create(model="tiny-qwen3", prompt="count", stream=True, stop=["n5"],
                                                   max_tokens=500))
    agg = aggregate(chunks)[0]
    assert agg["text"] == "n0 n1 n2 n3 n4 " and (agg["finish_reason"], agg["stop_reason"]) == ("stop", "n5")
    assert stack.wait_aborted()
    stack.set_replies(["one two three four"])
    r = stack.client().completions.create(model="tiny-qwen3", prompt="count", stop=["three"],
                                         extra_body={"include_stop_str_in_output": True})
    assert r.choices[0].text == "one two three"


@pytest.mark.slow  # over a second: CI runs it, the fast loop does not
def test_a_stop_string_in_one_prompt_ends_only_that_prompts_stream(stack):
    """Several prompts: one prompt's stop string aborts its engine stream while the stream's reader
    waits for the next token; the other prompt streams on to its end, and no error is sent."""
    from core.reference_engine import ReplyBook

    stack.set_replies(["unused"], token_delay_ms=20)
    long_reply = " ".join(f"b{i}" for i in range(30))
    stack.engine_state.replies = ReplyBook(stack.model, [(" a0 a1 STOP a3 a4 a5 a6 a7 a8 a9", "alpha"),
                                                         (long_reply, "beta")])
    chunks = list(stack.client().completions.create(model="tiny-qwen3", prompt=["alpha", "beta"], stream=True,
                                                   stop=["STOP"], max_tokens=100))
    agg = aggregate(chunks)
    assert agg[0]["text"] == " a0 a1 " and (agg[0]["finish_reason"], agg[0]["stop_reason"]) == ("stop", "STOP")
    assert agg[1]["text"] == long_reply and agg[1]["finish_reason"] == "stop"
    assert len(stack.wait_aborted()) >= 1  # the first prompt's engine request was stopped


def test_engine_errors(stack):
    stack.set_replies(["x"], faults=Faults(fail_status=400))
    with pytest.raises(openai.BadRequestError):
        stack.client().completions.create(model="tiny-qwen3", prompt="x")
    stack.set_replies(["a b c d e f"], faults=Faults(drop_after=2))
    with pytest.raises(openai.APIError):
        list(stack.client().completions.create(model="tiny-qwen3", prompt="x", stream=True))


async def test_async_client(stack):
    stack.set_replies([REPLY])
    c = stack.async_client()
    r = await c.completions.create(model="tiny-qwen3", prompt="hello", max_tokens=200)
    assert r.choices[0].text == REPLY
    await c.close()


def test_default_max_tokens_16_reaches_the_engine(stack, qwen3):
    """vLLM's sampling-params JSON drops max_tokens == 16 (its default); the engine must still get it."""
    stack.set_replies([" ".join(["word"] * 100)])
    r = stack.client().completions.create(model="tiny-qwen3", prompt="x")  # completions default: 16
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 16
    assert stack.last_engine_request()["sampling_params"]["max_tokens"] == 16
    r = stack.client().chat.completions.create(model="tiny-qwen3", messages=[{"role": "user", "content": "x"}],
                                              max_tokens=16)
    assert r.usage.completion_tokens == 16


def test_one_prompt_failing_aborts_the_others(qwen3):
    two = Stack(qwen3, engines=2)
    try:
        two.set_replies([" ".join(["slow"] * 100)], token_delay_ms=20)
        two.engines[0].app[REFERENCE].faults = Faults(fail_status=400)  # type: ignore[index]
        for stream in (True, False):
            with pytest.raises(openai.BadRequestError):
                r = two.client().completions.create(model="tiny-qwen3", prompt=["one", "two"], max_tokens=80,
                                                   stream=stream)
                list(r) if stream else None
            healthy = two.engines[1].app[REFERENCE]  # type: ignore[index]
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline and not healthy.aborted:
                time.sleep(0.01)
            assert healthy.aborted, "the other prompt's engine request kept running"
            healthy.aborted.clear()
    finally:
        two.close()


def test_prompt_logprobs_and_echo_logprobs_cover_the_prompt(stack, qwen3):
    stack.set_replies([" and more"])
    prompt = "Hello there"
    n_prompt = len(qwen3.tokenizer.encode(prompt))
    c = stack.client()
    r = c.completions.create(model="tiny-qwen3", prompt=prompt, max_tokens=5, extra_body={"prompt_logprobs": 1})
    got = r.choices[0].model_extra["prompt_logprobs"]
    assert isinstance(got, list) and len(got) == n_prompt and got[0] is None  # passed on from the engine
    for stream in (False, True):
        r = c.completions.create(model="tiny-qwen3", prompt=prompt, echo=True, logprobs=1, max_tokens=5,
                                 stream=stream)
        choices = [ch.choices[0] for ch in r if ch.choices] if stream else [r.choices[0]]
        text = "".join(ch.text for ch in choices)
        tokens = [t for ch in choices if ch.logprobs for t in ch.logprobs.tokens]
        offsets = [o for ch in choices if ch.logprobs for o in ch.logprobs.text_offset]
        assert text == prompt + " and more"
        assert "".join(tokens) == text + "<|im_end|>"  # echoed prompt, generated text, then the EOS token
        assert all(text[o:o + len(t)] == t for t, o in zip(tokens, offsets) if o < len(text))
        first = choices[0].logprobs
        assert first.token_logprobs[0] is None  # nothing predicts the first prompt token


def test_prompt_ids_are_checked_against_the_model_vocab(stack, qwen3):
    stack.set_replies(["x"])
    padding_row = qwen3.hf_config["vocab_size"] - 1  # past the tokenizer, inside the embedding: vLLM accepts
    r = stack.client().completions.create(model="tiny-qwen3", prompt=[9707, padding_row], max_tokens=2)
    assert r.choices[0].text
    with pytest.raises(openai.BadRequestError) as err:
        stack.client().completions.create(model="tiny-qwen3", prompt=[9707, padding_row + 1], max_tokens=2)
    assert err.value.body["message"] == f"Token id {padding_row + 1} is out of vocabulary"
