"""Non-streaming derender: a whole GenerateTokensResponse -> chat / completion response (spec 2.4, 2.5).

Follows vLLM 0.33's checks and rules in order; the response dicts carry every field (nulls
included) in vLLM's order. With a parser, the decoded text goes through
`ChatOutputParser.parse_complete` (reasoning / content / tool calls, request semantics applied).
"""

from __future__ import annotations

import time
from typing import Any

from core.derender import output
from core.derender.checks import CHAT_REQUEST_REQUIRED, check_bounds, check_model, check_prompt_ids
from core.derender.choice import DecodeOptions, decode_complete
from core.derender.settings import DerenderSettings
from core.derender.stream import ChatStreamDerenderer
from core.errors import bad_request
from core.logprobs import TokenTexts, chat_top_limit, completion_logprobs, completion_top_limit, resolve_chat_logprobs
from core.protocol.chat import ChatCompletionNamedToolChoiceParam
from core.protocol.generate import dump_metrics, dump_prompt_logprobs


def resolve_finish_reason(finish_reason: str | None, chat_request: Any, tool_calls_made: bool) -> str:
    """vLLM: null -> "stop"; "stop" with tool calls -> "tool_calls" unless a named tool was forced."""
    reason = finish_reason or "stop"
    named = chat_request is not None and isinstance(chat_request.tool_choice, ChatCompletionNamedToolChoiceParam)
    if tool_calls_made and reason == "stop" and not named:
        return "tool_calls"
    return reason


def derender_chat(settings: DerenderSettings, req: Any, created: int | None = None) -> dict[str, Any]:
    """POST /v1/chat/completions/derender (non-streaming) -> ChatCompletionResponse dict."""
    try:
        return _derender_chat(settings, req, created)
    except OverflowError as exc:  # an id past u32 reached the tokenizer: vLLM answers 400 with its message
        raise bad_request(str(exc)) from None


def _derender_chat(settings: DerenderSettings, req: Any, created: int | None) -> dict[str, Any]:
    model = settings.model
    check_model(model, req.model)
    gen = req.generate_response
    check_bounds([gen], max_model_len=model.max_model_len, max_logprobs=settings.max_logprobs,
                 max_n=settings.max_n_sequences)
    check_prompt_ids([req.prompt_token_ids], model.max_model_len)
    chat_request = req.chat_request
    if settings.parser_configured and chat_request is None:
        raise bad_request(CHAT_REQUEST_REQUIRED)
    for choice in gen.choices:
        if not choice.token_ids:
            raise bad_request(f"choice {choice.index} has empty or null token_ids")

    parser = ChatStreamDerenderer.build_parser(settings, chat_request)
    opts = DecodeOptions.from_request(chat_request, preserve_special=parser is not None)
    seed = req.prompt_token_ids if req.prompt_token_ids is not None else gen.prompt_token_ids
    hide = parser is not None and chat_request.include_reasoning is False
    return_ids = bool(chat_request is not None and chat_request.return_token_ids) and not hide
    top_limit = (chat_top_limit(chat_request.logprobs, chat_request.top_logprobs, chat_request.logprob_token_ids)
                 if chat_request is not None else None)
    texts = TokenTexts.of(model.tokenizer)
    field = settings.reasoning_field

    choices = []
    for choice in gen.choices:
        logprobs = None
        if choice.logprobs is not None and not hide:
            logprobs = resolve_chat_logprobs(texts, choice.logprobs.content_dicts(), top_limit)
        text, stop_reason = decode_complete(model, opts, choice.token_ids, choice.finish_reason,
                                            choice.stop_reason, seed)
        if parser is not None:
            reasoning, content, tool_calls = parser.parse_complete(text, choice.token_ids, gen.prompt_token_ids)
            msg = output.message(content, reasoning, tool_calls, field)
        else:
            tool_calls = []
            msg = output.message(text, None, None, field)
        choices.append(output.chat_choice(
            choice.index, msg, logprobs, resolve_finish_reason(choice.finish_reason, chat_request, bool(tool_calls)),
            stop_reason, list(choice.token_ids) if return_ids else None))

    prompt_tokens = req.prompt_tokens if req.prompt_tokens is not None else 0
    completion_tokens = sum(len(c.token_ids) for c in gen.choices if c.token_ids)
    return output.chat_response(
        gen.request_id, created if created is not None else int(time.time()), req.model or model.name, choices,
        output.usage(prompt_tokens, completion_tokens), dump_prompt_logprobs(gen.prompt_logprobs),
        gen.prompt_token_ids if chat_request is not None and chat_request.return_token_ids else None,
        gen.kv_transfer_params, dump_metrics(gen.metrics))


def derender_completion(settings: DerenderSettings, req: Any, created: int | None = None) -> dict[str, Any]:
    """POST /v1/completions/derender (non-streaming) -> CompletionResponse dict."""
    try:
        return _derender_completion(settings, req, created)
    except OverflowError as exc:
        raise bad_request(str(exc)) from None


def _derender_completion(settings: DerenderSettings, req: Any, created: int | None) -> dict[str, Any]:
    model = settings.model
    check_model(model, req.model)
    responses = req.generate_responses
    if not responses:
        raise bad_request("generate_responses must not be empty")
    check_bounds(responses, max_model_len=model.max_model_len, max_logprobs=settings.max_logprobs,
                 max_n=settings.max_n_sequences)
    if req.prompt_token_ids is not None:
        check_prompt_ids(req.prompt_token_ids, model.max_model_len)
    for gen in responses:
        for choice in gen.choices:
            if not choice.token_ids:
                raise bad_request(f"choice {choice.index} in response {gen.request_id} has empty or null token_ids")

    request = req.completion_request
    opts = DecodeOptions.from_request(request)
    n = len(responses)
    prompt_tokens = req.prompt_tokens if req.prompt_tokens is not None else [0] * n
    seeds = req.prompt_token_ids if req.prompt_token_ids is not None else [None] * n
    top_limit = completion_top_limit(request.logprobs, request.logprob_token_ids) if request is not None else None
    return_ids = bool(request is not None and request.return_token_ids)
    texts = TokenTexts.of(model.tokenizer)

    choices = []
    total_completion = 0
    for gen, seed_override in zip(responses, seeds):
        seed = seed_override if seed_override is not None else gen.prompt_token_ids
        for choice in gen.choices:
            text, stop_reason = decode_complete(model, opts, choice.token_ids, choice.finish_reason,
                                                choice.stop_reason, seed)
            logprobs = None
            if choice.logprobs is not None:
                content = choice.logprobs.content_dicts()
                logprobs = completion_logprobs(resolve_chat_logprobs(texts, content, top_limit), content)
            choices.append(output.completion_choice(
                len(choices), text, logprobs, choice.finish_reason, stop_reason,
                list(choice.token_ids) if return_ids else None,
                gen.prompt_token_ids if return_ids else None))
            total_completion += len(choice.token_ids)

    first = responses[0]
    kv = first.kv_transfer_params
    if any(r.kv_transfer_params != kv for r in responses[1:]):
        kv = None
    return output.completion_response(
        first.request_id, created if created is not None else int(time.time()), req.model or model.name, choices,
        output.usage(sum(prompt_tokens), total_completion), kv,
        dump_metrics(first.metrics) if n == 1 else None)
