"""gpt-oss (Harmony) derender over HTTP against vLLM 0.33's render server.

Fixture: tests/fixtures/oracle/parsers_gptoss.json (tests/oracle/record_harmony.py); the checks are
tests/proxy/frontier_derender.py's. Where we deliberately differ from vLLM's stream: it concatenates
messages without the "\\n" its non-streaming answer puts between them and sends arguments raw
instead of re-serialized; ours aggregates to the non-streaming answer.
"""

from __future__ import annotations

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig
from tests.frontier_models import gptoss_model
from tests.oracle_fixtures import load_fixture
from tests.proxy.frontier_derender import check_nonstream, check_stream

SERVERS = {
    "gptoss-parsers": {"tool_call_parser": "openai", "reasoning_parser": "openai_gptoss",
                       "enable_auto_tool_choice": True},
    "gptoss-plain": {"reasoning_parser": "openai_gptoss"},  # vLLM's default for gpt_oss models
}
CASES = load_fixture("parsers_gptoss")
NONSTREAM = [c for c in CASES if "stream" not in c]
BY_NAME = {c["name"]: c for c in NONSTREAM}
STREAMS = [c for c in CASES if "stream" in c]


@pytest.fixture
def make_client(aiohttp_client):
    async def make(server):
        return await aiohttp_client(create_app(ServerConfig(**SERVERS[server]), gptoss_model()))
    return make


@pytest.mark.parametrize("case", NONSTREAM, ids=[c["name"] for c in NONSTREAM])
async def test_nonstream_equals_vllm(make_client, case):
    await check_nonstream(await make_client(case["server"]), case)


@pytest.mark.parametrize("case", STREAMS, ids=[c["name"] for c in STREAMS])
async def test_stream_aggregates_to_the_nonstream_answer(make_client, case):
    await check_stream(await make_client(case["server"]), case, BY_NAME[case["name"].rsplit("__stream_", 1)[0]])
