"""`--tokenizer-mode mistral` with the newer Mistral tokenizers, over HTTP against vLLM 0.33.

Fixtures (tests/oracle/record_mistral_mode.py VARIANT; model directories by tests/mistral_models.py
from the mistral-common package, byte for byte the ones the oracle served):
* render_mistral_mode_v11.json: Tekken v11 with the mistral tool parser. vLLM builds
  mistral-common's grammar for every chat request and, through a call mistral-common 1.13.1 no
  longer accepts, refuses almost all of them with a 400; tool_choice none with a JSON schema
  gets the JSON-only grammar; other constraints, the Responses API, completions and /tokenize
  are unaffected; derender reads `[TOOL_CALLS]name[ARGS]{...}`;
* render_mistral_mode_v11_reasoning.json: the same with `--reasoning-parser mistral` too: a v11
  Tekken has no [THINK], vLLM reads plain-text `<think>...</think>` as reasoning;
* render_mistral_mode_v13.json: Tekken v13 with the tool and reasoning parsers (`[THINK]`);
* render_mistral_mode_sp.json: SentencePiece v7 (pre-v11 tool calls, no grammar): SentencePiece
  pieces as token strings, windows decoded by SentencePiece.
Render answers equal vLLM's field for field; non-streaming derender answers equal vLLM's and
streams (1 and 5 tokens per call) aggregate to them (tests/proxy/frontier_derender.py).
"""

from __future__ import annotations

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig
from proxy.model_loader import load_model
from tests.mistral_models import write_mistral_model
from tests.oracle_fixtures import ORACLE_FIXTURES, load_fixture
from tests.proxy.frontier_derender import check_nonstream, check_stream
from tests.proxy.test_mistral_mode import _scrub_id

FLAGS = {"tool_call_parser": "mistral", "enable_auto_tool_choice": True, "tokenizer_mode": "mistral"}
# server key -> (model, flags), as recorded
SERVERS = {
    "mistral-tekken-v11": ("tiny-mistral-v11", FLAGS),
    "mistral-tekken-v11-reasoning": ("tiny-mistral-v11", {**FLAGS, "reasoning_parser": "mistral"}),
    "mistral-tekken-v13": ("tiny-mistral-v13", {**FLAGS, "reasoning_parser": "mistral"}),
    "mistral-sp": ("tiny-mistral-sp", FLAGS),
}
FIXTURES = [name for name in ("render_mistral_mode_v11", "render_mistral_mode_v11_reasoning",
                                         "render_mistral_mode_v13", "render_mistral_mode_sp")
            if (ORACLE_FIXTURES / f"{name}.json").exists()]
CASES = [c for name in FIXTURES for c in load_fixture(name)]
RENDER = [c for c in CASES if c["path"].endswith("/render")]
OTHERS = [c for c in CASES if not c["path"].endswith("/render")]
NONSTREAM = [c for c in OTHERS if "stream" not in c]
BY_NAME = {(c["server"], c["name"]): c for c in NONSTREAM}
STREAMS = [c for c in OTHERS if "stream" in c]
# pre-v11 (SentencePiece v7): as in test_mistral_mode, a marker with text on both sides is read
# whole without streaming (vLLM's own streams differ from it too): those streams are checked chunk
# by chunk only
STREAM_CANNOT_MATCH = {("mistral-sp", "derender_tool_calls_token_kept")}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    built = {}

    def get(name: str):
        if name not in built:
            path = write_mistral_model(tmp_path_factory.mktemp("mistral") / name, name)
            built[name] = load_model(str(path), served_model_names=[name], tokenizer_mode="mistral")
        return built[name]
    return get


@pytest.fixture
def client(aiohttp_client, models):
    async def make(server: str):
        name, flags = SERVERS[server]
        return await aiohttp_client(create_app(ServerConfig(served_model_name=[name], **flags), models(name)))
    return make


def ids(cases):
    return [f"{c['server']}:{c['name']}" for c in cases]


def test_every_fixture_server_is_known():
    assert FIXTURES and {c["server"] for c in CASES} <= SERVERS.keys()


@pytest.mark.parametrize("case", RENDER, ids=ids(RENDER))
async def test_render_matches_vllm(case, client):
    resp = await (await client(case["server"])).post(case["path"], json=case["request"])
    body = await resp.json()
    assert resp.status == case["status"], body
    assert _scrub_id(body) == _scrub_id(case["response"])


@pytest.mark.parametrize("case", NONSTREAM, ids=ids(NONSTREAM))
async def test_answer_equals_vllm(case, client):
    await check_nonstream(await client(case["server"]), case)


@pytest.mark.parametrize("case", STREAMS, ids=ids(STREAMS))
async def test_stream_aggregates_to_the_nonstream_answer(case, client):
    base_name = case["name"].rsplit("__stream_", 1)[0]
    await check_stream(await client(case["server"]), case, BY_NAME[(case["server"], base_name)],
                       compare_message=(case["server"], base_name) not in STREAM_CANNOT_MATCH)
