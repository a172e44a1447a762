"""Fixtures for the engine client and pool tests: reference engines on real loopback ports."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestServer

from core.reference_engine import ReplyBook
from proxy.engine.connections import HTTPClient
from proxy.reference_engine import create_reference_app

ENGINE_REPLY = "Hello from the engine, with some words to stream."


@pytest.fixture
async def engine_http():
    """The engines' shared HTTP client, as the app makes it at start-up."""
    client = HTTPClient()
    yield client
    await client.close()


@pytest.fixture
async def start_engine(qwen3):
    """start(**create_reference_app kwargs) -> a running reference engine answering ENGINE_REPLY."""
    servers: list[TestServer] = []

    async def start(**kwargs) -> TestServer:
        app = create_reference_app(qwen3, replies=ReplyBook(qwen3, [(ENGINE_REPLY, None)]), **kwargs)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()
