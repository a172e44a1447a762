"""DeepSeek V3.2 / V4 (DSML) derender over HTTP against vLLM 0.33's render servers.

Fixtures: tests/fixtures/oracle/parsers_deepseek_{v32,v4,v41}.json (tests/oracle/record_deepseek.py);
the checks are tests/proxy/frontier_derender.py's.
"""

from __future__ import annotations

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig
from tests.frontier_models import deepseek_model
from tests.oracle_fixtures import load_fixture
from tests.proxy.frontier_derender import check_nonstream, check_stream
from tests.proxy.test_deepseek_render import SERVERS

CASES = load_fixture("parsers_deepseek_v32") + load_fixture("parsers_deepseek_v4") + load_fixture("parsers_deepseek_v41")
NONSTREAM = [c for c in CASES if "stream" not in c]
BY_NAME = {(c["server"], c["name"]): c for c in NONSTREAM}
STREAMS = [c for c in CASES if "stream" in c]


@pytest.fixture
def make_client(aiohttp_client):
    async def make(server):
        version, flags = SERVERS[server]
        model = deepseek_model(version)
        return await aiohttp_client(create_app(ServerConfig(served_model_name=[model.name], **flags), model))
    return make


@pytest.mark.parametrize("case", NONSTREAM, ids=[f"{c['server']}:{c['name']}" for c in NONSTREAM])
async def test_nonstream_equals_vllm(make_client, case):
    await check_nonstream(await make_client(case["server"]), case)


@pytest.mark.parametrize("case", STREAMS, ids=[f"{c['server']}:{c['name']}" for c in STREAMS])
async def test_stream_aggregates_to_the_nonstream_answer(make_client, case):
    base = BY_NAME[(case["server"], case["name"].rsplit("__stream_", 1)[0])]
    await check_stream(await make_client(case["server"]), case, base)
