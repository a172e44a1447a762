"""GET /v1/models/{model} through the official client, and the Kubernetes probes
(/health/ready, /health/live) over real HTTP against real reference engines."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest

from proxy.app import create_app
from proxy.config import ServerConfig
from proxy.lifecycle import drain
from proxy.model_loader import load_model
from tests.proxy.frontdoor_stack import PARSERS, Stack

SLASHED = "Qwen/Qwen3-0.6B"


@pytest.fixture(scope="module")
def slashed_model(model_dirs):
    return load_model(str(model_dirs["qwen3"]), served_model_names=[SLASHED, "qwen3-alias"])


@pytest.fixture(scope="module")
def stack(slashed_model):
    stack = Stack(slashed_model, **PARSERS)
    yield stack
    stack.close()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


# -- /v1/models/{model} ---------------------------------------------------------------------------

def test_models_retrieve_with_a_slash_in_the_name(stack):
    client = stack.client()
    model = client.models.retrieve(SLASHED)  # the SDK sends /v1/models/Qwen%2FQwen3-0.6B
    assert (model.id, model.object, model.owned_by) == (SLASHED, "model", "vllm")
    listed = {m.id: m for m in client.models.list()}
    assert set(listed) == {SLASHED, "qwen3-alias"}
    assert listed[SLASHED].created == model.created
    assert client.models.retrieve("qwen3-alias").id == "qwen3-alias"


def test_models_retrieve_with_a_raw_slash_in_the_path(stack):
    status, body = get(f"{stack.url}/v1/models/{SLASHED}")
    assert status == 200
    card = json.loads(body)
    assert card["id"] == SLASHED and card["max_model_len"] > 0
    (permission,) = card["permission"]  # as vLLM's ModelCard
    assert permission["object"] == "model_permission" and permission["allow_sampling"] is True


def test_unknown_model_is_a_404_that_names_it_unmangled(stack):
    with pytest.raises(openai.NotFoundError) as caught:
        stack.client().models.retrieve("org/sub/Qwen3-0.6B")
    message = caught.value.body["message"]
    assert "`org/sub/Qwen3-0.6B`" in message and SLASHED in message and "<path>" not in message
    # an unknown route under the models path is the 404 message with the path as it was sent
    status, body = get(f"{stack.url}/v2/models/{SLASHED}")
    assert status == 404
    assert json.loads(body)["error"]["message"] == f"Not Found: GET /v2/models/{SLASHED}"


# -- probes ---------------------------------------------------------------------------------------

def test_ready_with_a_healthy_engine_and_live_always(stack):
    status, body = get(stack.url + "/health/ready")
    assert status == 200
    assert json.loads(body) == {"status": "ready", "model": SLASHED, "engines": {"healthy": 1, "total": 1}}
    assert get(stack.url + "/health/live") == (200, "OK")


def test_not_ready_while_no_engine_answers(qwen3):
    stack = Stack(qwen3, engines=0, dead_engines=2)
    try:
        status, body = get(stack.url + "/health/ready")
        assert status == 503
        assert json.loads(body) == {"status": "not ready", "reason": "no healthy engine",
                                    "engines": {"healthy": 0, "total": 2}}
        assert get(stack.url + "/health/live")[0] == 200  # a dead engine tier is no reason to restart us
        assert get(stack.url + "/health")[0] == 200
    finally:
        stack.close()


def test_readiness_follows_the_engines_circuits(qwen3):
    stack = Stack(qwen3, engines=1)
    try:
        assert get(stack.url + "/health/ready")[0] == 200
        stack.engines[0].stop()  # the only engine goes away
        with pytest.raises(openai.APIStatusError):  # a refused connection opens its circuit at once
            stack.client().completions.create(model="tiny-qwen3", prompt="hi", max_tokens=2)
        status, body = get(stack.url + "/health/ready")
        assert status == 503 and json.loads(body)["reason"] == "no healthy engine"
    finally:
        stack.close()


async def test_probes_need_no_api_key_and_ready_fails_while_draining(aiohttp_client, qwen3):
    app = create_app(ServerConfig(api_key="secret"), qwen3)
    client = await aiohttp_client(app)
    assert (await client.get("/v1/models")).status == 401
    ready = await client.get("/health/ready")  # no --engine-url: the loaded model makes it ready
    assert ready.status == 200 and (await ready.json())["engines"] == {"healthy": 0, "total": 0}
    assert (await client.get("/health/live")).status == 200
    await drain(app, 0)  # what SIGTERM starts: nothing in flight, so it returns at once
    assert (await client.get("/health/ready")).status == 503
    assert (await client.get("/health")).status == 503
    live = await client.get("/health/live")
    assert live.status == 200 and await live.text() == "OK"
