"""Kimi K3's renderer mode `kimi_k3` (core/renderers/kimi_k3.py) over HTTP, field for field
against vLLM 0.33.

Fixture: tests/fixtures/oracle/render_kimi_k3.json (tests/oracle/record_kimi_k3_render.py): chat
render (thinking, efforts, tools and tool_choice, tool and reasoning history, response formats,
sampling, length limits), completions render, /tokenize, Responses and Messages render, all on
`tiny-kimi-k3-render`: Qwen3's tokenizer with K3's `<|open|>`, `<|close|>`, `<|sep|>`,
`<|end_of_msg|>` as special tokens (ids 151669-151672), served with `--tokenizer-mode kimi_k3
--tool-call-parser kimi_k3 --reasoning-parser kimi_k3 --enable-auto-tool-choice`. The directory is
built here the same way (nothing is downloaded). Every case is replayed through one real HTTP
server (module-scoped) and its status and body must equal vLLM's, render request ids aside.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.model_loader import load_model
from tests.core.parsers.parser_models import KIMI_K3_TOKENS, with_added_tokens
from tests.oracle_fixtures import load_fixture
from tests.proxy.frontdoor_stack import Stack
from tests.proxy.test_fuzz_endpoints import Http

NAME = "tiny-kimi-k3-render"
# K3's four structural tokens, in the ids the recorded model gave them (151669-151672)
KIMI_K3_RENDER_TOKENS = [*KIMI_K3_TOKENS, "<|end_of_msg|>"]
FLAGS = {"tool_call_parser": "kimi_k3", "reasoning_parser": "kimi_k3", "enable_auto_tool_choice": True,
         "tokenizer_mode": "kimi_k3"}
CASES = load_fixture("render_kimi_k3")
HEADERS = {"Content-Type": "application/json"}


def k3_render_dir(model_dirs: dict[str, Path], root: Path) -> Path:
    """tiny-kimi-k3-render's tokenizer: tiny-qwen3's with the four K3 tokens (special)."""
    return with_added_tokens(model_dirs["qwen3"], root / NAME, KIMI_K3_RENDER_TOKENS)


@pytest.fixture(scope="module")
def k3_model(model_dirs, tmp_path_factory) -> ModelInfo:
    path = k3_render_dir(model_dirs, tmp_path_factory.mktemp("k3render"))
    model = load_model(str(path), served_model_names=[NAME], tokenizer_mode="kimi_k3")
    assert [model.tokenizer.token_to_id(t) for t in KIMI_K3_RENDER_TOKENS] == [151669, 151670, 151671, 151672]
    return model


@pytest.fixture(scope="module")
def stack(k3_model):
    s = Stack(k3_model, served_model_name=[NAME], **FLAGS)
    yield s
    s.close()


@pytest.fixture(scope="module")
def http(stack):
    client = Http(stack.url)
    yield client
    client.close()


def _scrub_id(body):
    for item in body if isinstance(body, list) else [body]:
        if isinstance(item, dict) and isinstance(item.get("request_id"), str):
            item["request_id"] = re.sub(r"([-_])[0-9a-f]{16}(-\d+)?$", r"\1<random>\2", item["request_id"])
    return body


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_render_matches_vllm(case, http):
    resp = http.post(case["path"], json.dumps(case["request"]).encode(), HEADERS)
    body = resp.json()
    assert resp.status_code == case["status"], body
    assert _scrub_id(body) == _scrub_id(case["response"])


def test_every_endpoint_is_replayed():
    paths = {c["path"] for c in CASES}
    assert paths == {"/v1/chat/completions/render", "/v1/completions/render", "/tokenize", "/v1/responses/render",
                     "/v1/messages/render"}
    assert len(CASES) == 99


def test_architecture_implies_the_mode():
    """`KimiK3ForConditionalGeneration` renders with kimi_k3 unless the mode says otherwise (vLLM's
    ModelConfig); `hf` keeps the chat-template path."""
    from core.renderers import renderer_for

    k3 = {"architectures": ["KimiK3ForConditionalGeneration"]}
    assert renderer_for(k3) == renderer_for(k3, "auto") == renderer_for({}, "kimi_k3") == "kimi_k3"
    assert renderer_for(k3, "hf") == "hf"
    with pytest.raises(ValueError, match="unknown tokenizer mode"):
        renderer_for(k3, "kimi_k4")


def test_no_chat_template_needed(k3_model):
    """K3 ships no Jinja template: the renderer never reads one."""
    from core.render import RenderOptions, TokenBudget, render_chat_ids

    tokenizer = copy.copy(k3_model.tokenizer)
    tokenizer.chat_template = None
    bare = dataclasses.replace(k3_model, tokenizer=tokenizer)
    budget = TokenBudget(None, None, None, None, False)
    messages = [{"role": "user", "content": "hi"}]
    kwargs = {"add_generation_prompt": True}
    ids = [render_chat_ids(model, RenderOptions(), messages, tool_dicts=None, request_template=None,
                           chat_kwargs=kwargs, budget=budget)[0] for model in (bare, k3_model)]
    assert ids[0] == ids[1] and ids[0][-3:] == [151669, k3_model.tokenizer.token_to_id("think"), 151671]
