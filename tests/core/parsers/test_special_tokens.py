"""Special-token text dropped like vLLM 0.33's parser engine (core/parsers/engine.py).

The end-to-end answers are goldens (`golden/vllm033_special.json`, recorded in-process from vLLM
0.33's parsers: see `golden_cases.extra_cases`) and the differential fuzz; here: the drop set,
a special token never joins the text around it into a marker, chunking invariance, and that the
engine holds back only a possible partial literal.
"""

from __future__ import annotations

import time

import orjson
from hypothesis import given
from hypothesis import strategies as st

from core.parsers.engine import DROP, Engine, Ev, lexer_for
from core.parsers.families.qwen3 import QWEN3
from core.parsers.special import special_token_texts
from tests.core.parsers.golden_cases import TOOLS
from tests.core.parsers.helpers import make_parser
from tests.core.parsers.test_properties import SETTINGS

# vLLM 0.33's `get_tokenizer(tiny-qwen3).all_special_tokens` (printed from the oracle's venv)
VLLM_QWEN3_SPECIAL = {"<|im_end|>", "<|endoftext|>", "<|im_start|>", "<|object_ref_start|>", "<|object_ref_end|>",
                      "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                      "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"}


def test_drop_set_is_vllms_all_special_tokens_minus_the_grammars_literals(qwen3):
    assert special_token_texts(qwen3.tokenizer) == VLLM_QWEN3_SPECIAL
    lexer = lexer_for(QWEN3, qwen3.tokenizer)
    assert {text for text, name in lexer.literals.items() if name == DROP} == VLLM_QWEN3_SPECIAL
    assert lexer.literals["<tool_call>"] == "TOOL_START"


def test_where_special_tokens_are_dropped(qwen3):
    text = "<think>r<|endoftext|></think>A<|box_start|>B"

    def answer(reasoning, tool, kwargs=None):
        return make_parser(qwen3, reasoning, tool, {"tools": TOOLS}, kwargs).parse_complete(text, [], None)[:2]

    assert answer("qwen3", "hermes") == ("r", "AB")  # the qwen3 engine drops, hermes keeps what it gets
    assert answer("qwen3", "hermes", {"enable_thinking": False}) == (None, text)  # no engine pass at all
    assert answer("deepseek_r1", "hermes") == ("r<|endoftext|>", "A<|box_start|>B")  # classic parsers keep it
    # behind a classic reasoning parser, an engine tool parser's output without a call is content
    # as written (vLLM's composition is not engine-based: test_vllm_rules.py)
    assert answer("deepseek_r1", "qwen3_xml") == ("r<|endoftext|>", "A<|box_start|>B")
    assert answer(None, "qwen3_xml") == (None, "<think>r</think>AB")  # the tool engine drops


def test_a_dropped_token_never_joins_its_neighbours_into_a_marker(qwen3):
    # vLLM lexes `<` and `/think>` apart: the text keeps "</think>" and reasoning goes on
    parser = make_parser(qwen3, "qwen3", None, {})
    assert parser.parse_complete("a<<|box_start|>/think>b", [], None)[:2] == ("a</think>b", None)


PIECES = ["<|endoftext|>", "<|box_start|>", "<|im_end|>", "<|", "|>", "<|im_", "end|>", "<|box", "_start|>", "<",
          "|", "a", " ", "\n", "é", "<think>", "</think>", "<tool_call>", "</", "think>"]


def _split(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted({c % (len(text) + 1) for c in cuts}), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def _run(engine: Engine, chunks: list[str]) -> list[tuple[str, str]]:
    state = engine.start()
    events = []
    for chunk in chunks:
        events += engine.feed(state, chunk, skip_tools=True)
        state = orjson.loads(orjson.dumps(state))
        assert len(state["h"]) < max(len(t) for t in engine.lexer.literals)  # only a partial literal is held
    events += engine.feed(state, "", final=True, skip_tools=True)
    return [(kind, value) for kind, value in events if kind in (Ev.TEXT, Ev.REASONING)]


def _joined(events: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for kind, value in events:
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + value)
        else:
            out.append((kind, value))
    return out


@SETTINGS
@given(text=st.lists(st.sampled_from(PIECES), max_size=30).map("".join), cuts=st.lists(st.integers(0, 10**6), max_size=10))
def test_any_chunking_lexes_like_the_whole_text(qwen3, text, cuts):
    engine = Engine(QWEN3, qwen3.tokenizer)
    assert _joined(_run(engine, _split(text, cuts))) == _joined(_run(engine, [text]))


def test_per_chunk_cost_does_not_grow_with_the_output(qwen3):
    """O(delta): the 2000th chunk costs what the 10th does (the engine keeps only a partial literal)."""
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
    assert len(orjson.dumps(state)) < 300
