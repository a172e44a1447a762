"""vLLM's POST /tokenize and POST /detokenize: same bodies, same answers.

/tokenize takes either `{"prompt": ...}` (completion-style, special tokens added by default)
or `{"messages": ...}` (chat-style, rendered through the chat template exactly like chat
render, without the context-length limit). Large inputs run in the bounded thread pool.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel, ValidationError

from core.errors import bad_request, validation_error
from core.model import ModelInfo
from core.protocol.tokenize import DetokenizeRequest, TokenizeChatRequest, TokenizeCompletionRequest
from core.render import (UNTRUSTED_TEMPLATE, RenderOptions, TokenBudget, check_model, merge_kwargs, render_chat_ids,
                         request_size)
from proxy.app import STATE
from proxy.http import json_response, read_json_object, validate


def _parse_tokenize(body: dict[str, Any]) -> BaseModel:
    """The completion form first, then the chat form (pydantic's union order in vLLM)."""
    errors: dict[str, list[dict[str, Any]]] = {}
    for name, model in (("prompt", TokenizeCompletionRequest), ("messages", TokenizeChatRequest)):
        try:
            return model.model_validate(body)
        except ValidationError as exc:
            errors[name] = exc.errors(include_url=False)
    if "messages" in body:
        raise validation_error(errors["messages"])
    if "prompt" in body:
        raise validation_error(errors["prompt"])
    raise validation_error([*errors["prompt"], *errors["messages"]])


def tokenize(model: ModelInfo, options: RenderOptions, request: Any) -> dict[str, Any]:
    check_model(model, request.model)
    budget = TokenBudget(None, 0, None, None, request.add_special_tokens)
    if isinstance(request, TokenizeChatRequest):
        kwargs = request.chat_template_kwargs or {}
        if not options.trust_request_chat_template and (
                request.chat_template is not None or kwargs.get("chat_template") is not None):
            raise bad_request(UNTRUSTED_TEMPLATE)
        chat_kwargs = merge_kwargs(request.chat_template_kwargs,
                                   {"add_generation_prompt": request.add_generation_prompt,
                                    "continue_final_message": request.continue_final_message})
        tool_dicts = None if request.tools is None else [t.to_template() for t in request.tools]
        ids, _ = render_chat_ids(model, options, request.messages, tool_dicts=tool_dicts,
                                 request_template=request.chat_template, chat_kwargs=chat_kwargs, budget=budget)
    else:
        ids, _ = budget.encode(model.tokenizer, request.prompt, False)
    token_strs = model.tokenizer.convert_ids_to_tokens(ids) if request.return_token_strs else None
    return {"count": len(ids), "max_model_len": model.max_model_len, "tokens": ids, "token_strs": token_strs}


async def tokenize_handler(request: web.Request) -> web.Response:
    state = request.app[STATE]
    parsed = _parse_tokenize(await read_json_object(request))
    size = len(parsed.prompt) if isinstance(parsed, TokenizeCompletionRequest) else request_size(parsed)
    result = await state.run_cpu(size, tokenize, state.model, state.render, parsed)
    return json_response(result)


def detokenize(model: ModelInfo, request: DetokenizeRequest) -> dict[str, Any]:
    check_model(model, request.model)
    if any(i >= 2**32 for i in request.tokens):
        # vLLM hands the ids to the Rust decoder, whose u32 conversion fails with this message
        raise bad_request("number too large to fit in target type")
    top = model.tokenizer.max_token_id
    ids = [i for i in request.tokens if i <= top]  # the Rust decoder skips unknown ids; so does vLLM
    return {"prompt": model.tokenizer.decode(ids)}


async def detokenize_handler(request: web.Request) -> web.Response:
    state = request.app[STATE]
    parsed = validate(DetokenizeRequest, await read_json_object(request))
    result = await state.run_cpu(len(parsed.tokens) * 4, detokenize, state.model, parsed)
    return json_response(result)


def setup(app: web.Application) -> None:
    app.router.add_post("/tokenize", tokenize_handler)
    app.router.add_post("/detokenize", detokenize_handler)
