"""The raw derender endpoints (docs/vllm-wire-spec.md §2.4, 2.5, 5): vLLM 0.33's checks in order, then the one
per-choice machine (`ChoiceDerender`), written in vLLM's derender shapes (`adapters.raw`).

* non-streaming: a whole GenerateTokensResponse by vLLM's non-streaming rules (`ChoiceDerender.whole`);
* streaming: one engine chunk per call; the choice's state travels in the client-carried
  `stream_state` (our compact, signed format, docs/vllm-wire-spec.md §0.3), so a call costs O(new tokens).

Where we differ from vLLM (docs/vllm-wire-spec.md §0.3): stop strings are supported while streaming (the matched
chunk says `finish_reason:"stop"` and `stop_reason` the string; later chunks of that choice carry
no choice object), and the parser path keeps its state instead of replaying the output.
"""

from __future__ import annotations

import time
from typing import Any

from core.derender.adapters import raw as shape
from core.derender.checks import (CHAT_REQUEST_REQUIRED, PROMPT_IDS_REQUIRED, check_bounds, check_model,
                                  check_prompt_ids)
from core.derender.choice import ChoiceDerender, ChoiceEvent
from core.derender.settings import DerenderSettings
from core.derender.spec import OutputSpec
from core.derender.state import StreamState, invalid, request_fingerprint
from core.derender.text import TextDecoder
from core.errors import RequestError, bad_request
from core.protocol.generate import dump_metrics, dump_prompt_logprobs


def _now(created: int | None) -> int:
    return created if created is not None else int(time.time())


def _parser(settings: DerenderSettings, chat_request: Any) -> Any:
    try:
        return settings.parser_for(chat_request)
    except (ValueError, KeyError) as exc:
        raise bad_request(f"invalid chat_request for the configured parser: {exc}") from None


# -- non-streaming -------------------------------------------------------------------------------

def derender_chat(settings: DerenderSettings, req: Any, created: int | None = None) -> dict[str, Any]:
    """POST /v1/chat/completions/derender (non-streaming) -> ChatCompletionResponse dict."""
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
    spec = OutputSpec.for_raw_chat(settings, chat_request, _parser(settings, chat_request))
    seed = req.prompt_token_ids if req.prompt_token_ids is not None else gen.prompt_token_ids
    choices = []
    try:
        for choice in gen.choices:
            lp = choice.logprobs
            # vLLM's quirk (docs/vllm-wire-spec.md §2.4 step 6): the parser sees the response's prompt
            # ids, not the request's
            result = ChoiceDerender.whole(spec, choice.index, seed, choice.token_ids, choice.finish_reason,
                                          choice.stop_reason, lp.content_dicts() if lp is not None else None,
                                          lp is not None, gen.prompt_token_ids)
            choices.append(shape.chat_choice(
                result.index, shape.message(result.content, result.reasoning, result.tool_calls,
                                            settings.reasoning_field),
                result.logprobs, result.finish_reason, result.stop_reason,
                result.token_ids if spec.return_token_ids else None))
    except OverflowError as exc:  # an id past u32 reached the tokenizer: vLLM answers 400 with its message
        raise bad_request(str(exc)) from None
    prompt_tokens = req.prompt_tokens if req.prompt_tokens is not None else 0
    completion_tokens = sum(len(c.token_ids) for c in gen.choices if c.token_ids)
    return shape.chat_response(
        gen.request_id, _now(created), req.model or model.name, choices,
        shape.usage(prompt_tokens, completion_tokens), dump_prompt_logprobs(gen.prompt_logprobs),
        gen.prompt_token_ids if chat_request is not None and chat_request.return_token_ids else None,
        gen.kv_transfer_params, dump_metrics(gen.metrics))


def derender_completion(settings: DerenderSettings, req: Any, created: int | None = None) -> dict[str, Any]:
    """POST /v1/completions/derender (non-streaming) -> CompletionResponse dict."""
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
    spec = OutputSpec.for_raw_completion(settings, req.completion_request)
    n = len(responses)
    prompt_tokens = req.prompt_tokens if req.prompt_tokens is not None else [0] * n
    seeds = req.prompt_token_ids if req.prompt_token_ids is not None else [None] * n
    choices = []
    total_completion = 0
    try:
        for gen, seed_override in zip(responses, seeds):
            seed = seed_override if seed_override is not None else gen.prompt_token_ids
            for choice in gen.choices:
                lp = choice.logprobs
                result = ChoiceDerender.whole(spec, len(choices), seed, choice.token_ids, choice.finish_reason,
                                              choice.stop_reason, lp.content_dicts() if lp is not None else None,
                                              lp is not None, None)
                choices.append(shape.completion_choice(
                    result.index, result.text, result.logprobs, result.finish_reason, result.stop_reason,
                    result.token_ids if spec.return_token_ids else None,
                    gen.prompt_token_ids if spec.return_token_ids else None))
                total_completion += len(choice.token_ids)
    except OverflowError as exc:
        raise bad_request(str(exc)) from None
    first = responses[0]
    kv = first.kv_transfer_params
    if any(r.kv_transfer_params != kv for r in responses[1:]):
        kv = None
    return shape.completion_response(
        first.request_id, _now(created), req.model or model.name, choices,
        shape.usage(sum(prompt_tokens), total_completion), kv, dump_metrics(first.metrics) if n == 1 else None)


# -- streaming -----------------------------------------------------------------------------------

def _only_choice(chunk: Any, endpoint: str, with_count: bool) -> Any:
    n = len(chunk.choices)
    if n > 1:
        suffix = f" (got {n})." if with_count else ""
        raise bad_request(f"{endpoint} expects at most one choice per chunk{suffix}")
    return chunk.choices[0] if n else None


def _check_index(state: StreamState, choice: Any) -> None:
    if choice is not None and state.index is not None and choice.index != state.index:
        raise invalid(f"belongs to choice {state.index}, not {choice.index} (keep one state per index)")


def _carried_state(settings: DerenderSettings, req: Any, kind: str) -> tuple[StreamState | None, str]:
    """The request's `stream_state` decoded (signature, server and engine request checked), and the
    engine request's key: the chunk's own, else the one the state carried."""
    chunk = req.generate_chunk
    request_key = request_fingerprint(chunk.request_id if "request_id" in chunk.model_fields_set else None)
    if req.stream_state is None:
        return None, request_key
    state = settings.codec.decode(req.stream_state, kind=kind, server=settings.fingerprint, request=request_key)
    return state, request_key or state.request


def _resume(spec: OutputSpec, state: StreamState | None, seed: Any) -> ChoiceDerender:
    """A fresh choice, or the one `stream_state` carried."""
    if state is None:
        return ChoiceDerender.start(spec, None, seed)  # type: ignore[arg-type]  # the index comes with a choice
    if (spec.parser is None) != (state.parser is None):
        raise invalid("the parser configuration of this stream changed")
    try:
        text = TextDecoder.from_state(spec.settings.model, spec.text, state.decoder)
    except ValueError as exc:
        raise invalid(f"malformed ({exc})") from None
    choice = ChoiceDerender(spec, state.index, text, state.parser)  # type: ignore[arg-type]
    choice.restore_counters(started=state.role_sent, logprob_context=state.logprob_context or (),
                            logprob_offset=state.text_offset, output_tokens=state.output_tokens)
    return choice


def _step(choice: ChoiceDerender, chunk_choice: Any) -> ChoiceEvent | None:
    choice.index = chunk_choice.index
    lp = chunk_choice.logprobs
    return choice.step(chunk_choice.token_ids, chunk_choice.finish_reason, chunk_choice.stop_reason,
                       lp.content_dicts() if lp is not None else None, lp is not None)


def _state(choice: ChoiceDerender, kind: str, settings: DerenderSettings, request_key: str) -> str:
    return settings.codec.encode(StreamState(
        kind=kind, server=settings.fingerprint, request=request_key, index=choice.index,
        decoder=choice.text.to_state(), role_sent=choice.started and kind == "chat",
        logprob_context=choice.logprob_context, text_offset=choice.logprob_offset,
        output_tokens=choice.output_tokens, parser=choice.parser_state))


def derender_chat_stream(settings: DerenderSettings, req: Any, created: int | None = None) -> dict[str, Any]:
    """POST /v1/chat/completions/derender with `stream: true` -> {"chunk", "stream_state"}."""
    model = settings.model
    check_model(model, req.model)
    chat_request = req.chat_request
    parser_configured = settings.parser_configured
    if parser_configured and chat_request is None:
        raise bad_request(CHAT_REQUEST_REQUIRED)
    if parser_configured and req.prompt_token_ids is None and req.stream_state is None:
        raise bad_request(PROMPT_IDS_REQUIRED)
    chunk = req.generate_chunk
    chunk_choice = _only_choice(chunk, "derender_chat_stream", with_count=True)
    state, request_key = _carried_state(settings, req, "chat")
    prompt_len = len(req.prompt_token_ids) if req.prompt_token_ids is not None else 0
    prior = state.output_tokens if state is not None else 0
    delta_len = len(chunk_choice.token_ids) if chunk_choice is not None and chunk_choice.token_ids else 0
    if prompt_len + prior + delta_len > model.max_model_len:
        raise bad_request(f"prompt_token_ids length ({prompt_len}) plus output_token_ids length ({prior}) "
                          f"plus delta ({delta_len}) exceeds max_model_len ({model.max_model_len}).")
    spec = OutputSpec.for_raw_chat(settings, chat_request, _parser(settings, chat_request))
    if state is not None:
        _check_index(state, chunk_choice)
    choices = []
    try:
        seed = req.prompt_token_ids if req.prompt_token_ids is not None else chunk.prompt_token_ids
        choice = _resume(spec, state, seed)
        if chunk_choice is not None:
            event = _step(choice, chunk_choice)
            if event is not None:
                choices.append(shape.chat_event_choice(event, settings.reasoning_field, spec.return_token_ids))
    except RequestError:
        raise
    except Exception:  # vLLM: anything failing in here is the client's (ids, state) -> 400
        raise invalid("derender failed") from None
    prompt_echo = chunk.prompt_token_ids if chat_request is not None and chat_request.return_token_ids else None
    body = shape.chat_chunk(chunk.request_id, _now(created), req.model or model.name, choices,
                            shape.stream_usage(chunk.usage, req.prompt_tokens), prompt_echo,
                            chunk.metrics.model_dump() if chunk.metrics is not None else None)
    return {"chunk": body, "stream_state": _state(choice, "chat", settings, request_key)}


def derender_completion_stream(settings: DerenderSettings, req: Any, created: int | None = None) -> dict[str, Any]:
    """POST /v1/completions/derender with `stream: true` -> {"chunk", "stream_state"}."""
    model = settings.model
    check_model(model, req.model)
    check_prompt_ids([req.prompt_token_ids], model.max_model_len)
    chunk = req.generate_chunk
    chunk_choice = _only_choice(chunk, "derender_completion_stream", with_count=False)
    state, request_key = _carried_state(settings, req, "cmpl")
    if state is not None:
        if state.parser is not None or state.role_sent:
            raise invalid("malformed (chat fields in a completions state)")
        _check_index(state, chunk_choice)
    spec = OutputSpec.for_raw_completion(settings, req.completion_request)
    choices = []
    try:
        seed = req.prompt_token_ids if req.prompt_token_ids is not None else chunk.prompt_token_ids
        choice = _resume(spec, state, seed)
        if chunk_choice is not None:
            event = _step(choice, chunk_choice)
            if event is not None:
                echo = spec.return_token_ids
                choices.append(shape.completion_stream_choice(
                    event.index, event.text, event.logprobs, event.finish_reason, event.stop_reason,
                    chunk.prompt_token_ids if echo else None, event.token_ids if echo else None))
    except (OverflowError, ValueError) as exc:  # ids past u32 (vLLM: the tokenizer's message, 400)
        raise bad_request(str(exc)) from None
    body = shape.completion_chunk(chunk.request_id, _now(created), req.model or model.name, choices,
                                  shape.stream_usage(chunk.usage, req.prompt_tokens),
                                  chunk.metrics.model_dump() if chunk.metrics is not None else None)
    return {"chunk": body, "stream_state": _state(choice, "cmpl", settings, request_key)}
