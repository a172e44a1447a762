"""POST /v1/responses/render (vLLM 0.33 wire format): a Responses request -> one GenerateRequest.

vLLM's render server is stateless, so `previous_response_id` is refused here (the front door's
`POST /v1/responses` resolves it from its store and passes the stored items to the same
`core.render_responses.render_responses`). Like vLLM's route, this one ignores `X-Request-Id`:
the engine request id is the body's `request_id` (default `resp_<16 hex>`).
"""

from __future__ import annotations

from aiohttp import web

from pydantic import ValidationError

from core.errors import RequestError, validation_error
from core.protocol.responses import ResponsesRequest
from core.render import check_model
from core.render_responses import render_responses, request_size
from proxy.app import STATE
from proxy.http import json_response, read_json_object

STATELESS = "previous_response_id is not supported by the stateless render endpoint."


def validate_request(body: dict) -> ResponsesRequest:
    """Validate once, as FastAPI validates vLLM's body (`from_attributes`: a scalar where an object
    is expected reads "a valid dictionary or object to extract fields from")."""
    try:
        return ResponsesRequest.model_validate(body, from_attributes=True)
    except ValidationError as exc:
        raise validation_error(exc.errors(include_url=False)) from None


async def responses_render(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await read_json_object(request)
    responses = validate_request(body)
    check_model(state.model, responses.model)
    if responses.previous_response_id is not None:
        raise RequestError(STATELESS, 400, "invalid_request_error", "previous_response_id")
    result = await state.run_cpu(request_size(responses), render_responses, state.model, state.render,
                                 responses)
    return json_response(result.generate_request)


def setup(app: web.Application) -> None:
    app.router.add_post("/v1/responses/render", responses_render)
