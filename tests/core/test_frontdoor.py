"""The front door's per-choice derender: any chunking of the engine output gives the same answer.

Property: for random texts (CJK, emoji, newlines), random stop strings and random engine chunk
sizes, the streamed text equals the non-streamed text, which equals the one-shot decode cut at the
stop string (vLLM's non-streaming rule), with the same finish_reason and stop_reason.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.frontdoor import ChatChoiceStream, ChoiceDecoder, CompletionChoiceStream, DecodeOptions
from core.stop import cut_at_stop_string

IM_END = 151645
ALPHABET = "ab c\n東京🙂é"


def engine_chunks(ids: list[int], cuts: list[int], finish: str, stop_reason):
    """The engine's stream for these ids: chunks at the cut points, the last one finishing."""
    bounds = sorted({c for c in cuts if 0 < c < len(ids)}) + [len(ids)]
    out, start = [], 0
    for end in bounds:
        out.append({"index": 0, "token_ids": ids[start:end], "finish_reason": None, "stop_reason": None,
                    "logprobs": None})
        start = end
    out[-1]["finish_reason"], out[-1]["stop_reason"] = finish, stop_reason
    return out


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=ALPHABET, min_size=1, max_size=40),
       stop_from=st.integers(0, 39), stop_len=st.integers(1, 4), use_stop=st.booleans(),
       include=st.booleans(), cuts=st.lists(st.integers(0, 60), max_size=8))
def test_streamed_equals_non_streamed_equals_one_shot(qwen3, text, stop_from, stop_len, use_stop, include, cuts):
    tok = qwen3.tokenizer
    ids = tok.encode(text) + [IM_END]
    stop = [text[stop_from:stop_from + stop_len]] if use_stop and text[stop_from:stop_from + stop_len] else []
    opts = DecodeOptions(stop=stop, include_stop_str_in_output=include)

    streamed = ChoiceDecoder(qwen3, opts, None)
    pieces, finish, reason = [], None, None
    for chunk in engine_chunks(ids, cuts, "stop", IM_END):
        step = streamed.step(chunk["token_ids"], chunk["finish_reason"], chunk["stop_reason"])
        if step is None:
            break
        pieces.append(step.text)
        if step.finish_reason:
            finish, reason = step.finish_reason, step.stop_reason

    whole = ChoiceDecoder(qwen3, opts, None).step(ids, "stop", IM_END)
    assert "".join(pieces) == whole.text
    assert (finish, reason) == (whole.finish_reason, whole.stop_reason)

    expected_text, matched = cut_at_stop_string(tok.decode(ids[:-1]), len(tok.decode(ids[:-1])), stop, include)
    assert whole.text == expected_text
    assert whole.stop_reason == (matched if matched is not None else None)  # the EOS reason is null
    assert whole.finish_reason == "stop"


def test_chat_choice_plain_path_sends_every_chunk(qwen3):
    ids = qwen3.tokenizer.encode("東京") + [IM_END]
    stream = ChatChoiceStream(0, qwen3, DecodeOptions(), None, None)
    out = [stream.step(c) for c in engine_chunks(ids, list(range(len(ids))), "stop", IM_END)]
    assert all(o is not None for o in out)  # partial characters still give {"content": ""} chunks
    assert "".join(o["delta"]["content"] for o in out) == "東京"
    assert out[-1]["finish_reason"] == "stop" and out[-1]["stop_reason"] is None
    assert list(out[0]) == ["index", "delta", "logprobs", "finish_reason", "token_ids"]


def test_completion_choice_stop_string_across_chunks(qwen3):
    ids = qwen3.tokenizer.encode("one two three four") + [IM_END]
    choice = CompletionChoiceStream(3, qwen3, DecodeOptions(stop=["three"]), [1, 2])
    texts = []
    for c in engine_chunks(ids, list(range(len(ids))), "stop", IM_END):
        chunk = choice.chunk(c, "cmpl-x", 1, "m", None)
        if chunk is not None:
            texts.append(chunk["choices"][0])
        if choice.finished:
            break
    assert "".join(t["text"] for t in texts) == "one two "
    assert (texts[-1]["finish_reason"], texts[-1]["stop_reason"], texts[-1]["index"]) == ("stop", "three", 3)
    assert choice.finished and not choice.engine_done  # the caller must abort the engine request
