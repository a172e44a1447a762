"""Special-token text dropped like vLLM 0.33's parser engine (core/parsers/special.py).

The end-to-end answers are goldens (`golden/vllm033_special.json`, recorded in-process from vLLM
0.33's parsers: see `golden_cases.extra_cases`); here: the drop set, chunking invariance of the
streaming dropper, and where the pipeline applies it.
"""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from core.parsers.special import SpecialTokenDropper, dropper_for, special_token_texts
from tests.core.parsers.golden_cases import TOOLS
from tests.core.parsers.helpers import make_parser
from tests.core.parsers.test_properties import SETTINGS

# vLLM 0.33's `get_tokenizer(tiny-qwen3).all_special_tokens` (printed from the oracle's venv)
VLLM_QWEN3_SPECIAL = {"<|im_end|>", "<|endoftext|>", "<|im_start|>", "<|object_ref_start|>", "<|object_ref_end|>",
                      "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                      "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"}


def test_drop_set_is_vllms_all_special_tokens_minus_markers(qwen3):
    assert special_token_texts(qwen3.tokenizer) == VLLM_QWEN3_SPECIAL
    parser = make_parser(qwen3, "qwen3", "hermes", {"tools": TOOLS})
    assert parser.drop_stage == "r" and set(parser.dropper.tokens) == VLLM_QWEN3_SPECIAL
    assert set(dropper_for(qwen3.tokenizer, frozenset({"<|box_start|>"})).tokens) == VLLM_QWEN3_SPECIAL - {"<|box_start|>"}


def test_where_the_pipeline_drops(qwen3):
    assert make_parser(qwen3, "qwen3", "hermes", {"tools": TOOLS}).drop_stage == "r"
    assert make_parser(qwen3, "qwen3", "hermes", {"tools": TOOLS}, {"enable_thinking": False}).drop_stage is None
    assert make_parser(qwen3, "qwen3", "qwen3_xml", {"tools": TOOLS}, {"enable_thinking": False}).drop_stage == "t"
    assert make_parser(qwen3, "deepseek_r1", "qwen3_xml", {"tools": TOOLS}).drop_stage == "t"
    for reasoning, tool in ((None, "hermes"), ("deepseek_r1", "hermes"), ("deepseek_r1", None), ("granite", None)):
        assert make_parser(qwen3, reasoning, tool, {"tools": TOOLS}).drop_stage is None


PIECES = ["<|endoftext|>", "<|box_start|>", "<|im_end|>", "<|", "|>", "<|im_", "end|>", "<|box", "_start|>", "<",
          "|", "a", " ", "\n", "é", "<think>", "</think>"]


def _split(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted({c % (len(text) + 1) for c in cuts}), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


@SETTINGS
@given(text=st.lists(st.sampled_from(PIECES), max_size=30).map("".join), cuts=st.lists(st.integers(0, 10**6), max_size=10))
def test_any_chunking_drops_exactly_like_the_whole_text(text, cuts):
    dropper = SpecialTokenDropper(VLLM_QWEN3_SPECIAL)
    state: dict = {}
    streamed = "".join(dropper.feed(state, chunk) for chunk in _split(text, cuts)) + dropper.finish(state)
    assert streamed == dropper.apply(text)
    assert len(state["sp"]) == 0


def test_held_text_is_only_a_partial_token():
    dropper = SpecialTokenDropper(VLLM_QWEN3_SPECIAL)
    state: dict = {}
    assert dropper.feed(state, "a<|endoftext|>b<|im") == "ab"
    assert state["sp"] == "<|im"
    assert dropper.feed(state, "_end|>c") == "c"
    assert dropper.feed(state, "<|im_x") == "<|im_x"  # no token starts like that: released at once
    assert dropper.feed(state, "<") == "" and dropper.finish(state) == "<"


def test_per_chunk_cost_does_not_grow_with_the_output(qwen3):
    """O(delta): the 2000th chunk costs what the 10th does (the dropper keeps only a partial token)."""
    parser = make_parser(qwen3, "qwen3", "hermes", {"tools": TOOLS})
    state = parser.start(None)
    chunks = ["word <|box_start|>", "<|endoftext|> more <|", "im_end|>x"] * 700

    def timed(items):
        start = time.perf_counter()
        for chunk in items:
            parser.feed(state, chunk, [])
        return time.perf_counter() - start

    early = min(timed(chunks[i:i + 30]) for i in range(0, 300, 30))
    for chunk in chunks[300:1800]:
        parser.feed(state, chunk, [])
    late = min(timed(chunks[i:i + 30]) for i in range(1800, 2100, 30))
    assert late < early * 5 + 0.002
    assert len(state.get("sp", "")) < 16
