"""The drop-in front door: `POST /v1/chat/completions` and `POST /v1/completions`.

One hop: validate the OpenAI request once (pydantic), render it (`core.render`), send the engine
requests (`core.engine_request`) through the pool, derender the engine's output in-process on the
one machine (`core.derender`) and write `vllm serve`'s exact shapes (`core.derender.adapters`),
streamed by the one SSE loop (`proxy.streaming`). No per-chunk HTTP, no per-chunk pydantic.

Non-streamed answers without stop strings use the engine's non-streaming generate; with stop
strings they read the engine stream so the request can be cut short.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from core.derender.adapters.chat import ChatStream, chat_response
from core.derender.adapters.completion import CompletionPrompts, CompletionStream, completion_response
from core.derender.session import DerenderSession, EngineOutputError
from core.derender.spec import OutputSpec
from core.engine_request import (check_prompt_vocabulary, completion_stream_body, engine_body, max_tokens,
                                 prompt_logprobs_body)
from core.protocol.chat import ChatCompletionRequest
from core.protocol.common import VLLMValidationError
from core.protocol.completion import CompletionRequest
from core.render import precheck_messages, render_chat, render_completion, request_size
from proxy.app import STATE
from proxy.engine.client import EngineStream
from proxy.engine.pool import pool_of
from proxy.engine.run import EngineRun, all_or_none, client_error, output_error
from proxy.http import json_response, read_json_object, validate
from proxy.streaming import SSE_HEADERS, SSEResponse, client_gone, collect, stream_one, write_stream


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    model, settings = state.model, state.derender
    body = await read_json_object(request)
    precheck_messages(body, model.max_model_len)
    req = validate(ChatCompletionRequest, body)
    gen = await state.run_cpu(request_size(req), render_chat, model, state.render, req,
                              request.headers.get("X-Request-Id"))
    pool = pool_of(request.app)
    sampling = gen["sampling_params"]
    prompt_ids: list[int] = gen["token_ids"]
    run = EngineRun(request, pool)
    run.count(len(prompt_ids), 0)
    shape = {"request_id": gen["request_id"], "created": int(time.time()), "model": model.name}

    def new_session() -> DerenderSession:
        return DerenderSession.for_chat(settings, req, gen, settings.parser_for(req), int(sampling.get("n") or 1))

    if req.stream:  # the session is made while the engine computes the first token
        return await stream_one(request, run, gen, lambda: ChatStream(
            new_session(), req, prompt_token_ids=prompt_ids, reasoning_field=settings.reasoning_field, **shape))
    session = new_session()
    spec = session.spec
    # stop strings read the engine stream to cut it short; prompt logprobs exist only in the full answer
    use_stream = bool(spec.text.stop) and sampling.get("prompt_logprobs") is None
    try:
        prompt_logprobs = await collect(request, run, [gen], session, use_stream)
        run.count(0, session.completion_tokens)
    finally:
        run.report_tokens()
    return json_response(chat_response(session, req, prompt_token_ids=prompt_ids,
                                       reasoning_field=settings.reasoning_field, prompt_logprobs=prompt_logprobs[0],
                                       **shape))


def _prompt_text(state: Any, req: CompletionRequest, i: int, prompt_ids: list[int]) -> str:
    prompt = req.prompt
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[i] if i < len(prompt) else None, str):
        return prompt[i]  # type: ignore[return-value]
    return state.model.tokenizer.decode(prompt_ids)


async def completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    model = state.model
    req = validate(CompletionRequest, await read_json_object(request))
    gens = await state.run_cpu(request_size(req), render_completion, model, state.render, req,
                               request.headers.get("X-Request-Id"))
    if not gens:
        raise VLLMValidationError("You must pass at least one prompt", parameter="prompt")
    check_prompt_vocabulary(model.max_token_id, gens)
    pool = pool_of(request.app)
    sampling = gens[0]["sampling_params"]
    spec = OutputSpec.for_completion(state.derender, req, sampling, max_tokens(gens[0]))
    prompt_ids = [g["token_ids"] for g in gens]
    echo_only = bool(req.echo) and req.max_tokens == 0
    prompts = CompletionPrompts(model, prompt_ids,
                                [_prompt_text(state, req, p, ids) for p, ids in enumerate(prompt_ids)]
                                if req.echo else None,
                                echo_logprobs=bool(spec.logprobs), top_limit=spec.top_limit, echo_only=echo_only)
    session = DerenderSession(spec, prompt_ids, int(sampling.get("n") or 1), prompts.logprob_offsets())
    run = EngineRun(request, pool)
    run.count(sum(map(len, prompt_ids)), 0)
    base_id = gens[0]["request_id"] if len(gens) == 1 else gens[0]["request_id"].rsplit("-", 1)[0]
    shape = {"request_id": base_id, "created": int(time.time()), "model": model.name}
    if req.stream:
        writer = CompletionStream(session, req, prompts=prompts, **shape)
        if echo_only:
            return await _echo_only_stream(request, run, gens, writer)
        sources = await all_or_none(run, [_open_completion_stream(run, g, p, prompts) for p, g in enumerate(gens)])
        return await write_stream(request, run, sources, writer)
    use_stream = bool(spec.text.stop) and sampling.get("prompt_logprobs") is None
    try:
        prompts.prompt_logprobs = await collect(request, run, gens, session, use_stream)
        run.count(0, session.completion_tokens)
    finally:
        run.report_tokens()
    return json_response(completion_response(session, prompts=prompts, **shape))


async def _open_completion_stream(run: EngineRun, gen: dict[str, Any], prompt: int, prompts: CompletionPrompts
                                  ) -> tuple[EngineStream, dict | None]:
    """Open one prompt's engine stream; with echo + logprobs, first fetch its prompt logprobs.

    vLLM's coupled server puts the prompt logprobs in the first echoed chunk, but a tokens-only
    engine sends them only in non-streamed answers. So a non-streamed side request (max_tokens 1)
    runs first and the stream is opened when it has answered, rather than both at once:
    * the engine's prefix cache then holds the prompt (the side request writes it), so the
      streamed request's prefill is mostly a cache hit instead of a second full prefill running
      in parallel: echo + logprobs is a scoring workload, engine time matters more than the
      extra time to first token (one prefill of the prompt);
    * a failing side request (engine down, 4xx, protocol break) is still a JSON error with the
      right status, before any SSE, and no streamed request was started for nothing;
    * a client that goes away while it runs cancels it, which aborts it on the engine (the
      pool's non-streamed generate posts the abort), and the stream is never opened.
    With several engines the stream goes to the engine that answered the side request (its
    prefix cache holds the prompt) whenever that engine can take it."""
    engine = None
    if prompts.echo_logprobs:
        answer, engine = await run.answer(prompt_logprobs_body(gen), gen["token_ids"])
        found = answer.get("prompt_logprobs")
        prompts.prompt_logprobs[prompt] = found if isinstance(found, list) else None
    return await run.open(completion_stream_body(gen), gen["token_ids"], prefer=engine)


async def _echo_only_stream(request: web.Request, run: EngineRun, gens: list[dict[str, Any]],
                            writer: CompletionStream) -> web.StreamResponse:
    """Streamed echo with max_tokens 0 (scoring): the only output is the prompt, which is known
    before the engine runs, and its logprobs come only in a non-streamed answer. So: one
    non-streamed engine request per prompt (max_tokens 1 as rendered, with prompt_logprobs),
    written as the SSE that `vllm serve` streams for it: per choice one chunk with the prompt, its
    logprobs and the finish; the usage chunk when asked; [DONE]. Engine failures are JSON errors."""
    try:
        answers = await all_or_none(run, [run.answer(engine_body(g, stream=False), g["token_ids"]) for g in gens])
    except BaseException:
        run.report_tokens()
        raise
    events: list[bytes] = []
    try:
        for p, (answer, engine) in enumerate(answers):
            found = answer.get("prompt_logprobs")
            writer.prompts.prompt_logprobs[p] = found if isinstance(found, list) else None
            choices = answer.get("choices")
            if isinstance(choices, list):  # one chunk per choice, in index order
                answer = {**answer, "choices": sorted(choices, key=_index)}
            try:
                events += writer.feed(p, [answer])
            except EngineOutputError as exc:
                raise client_error(output_error(exc, engine, started=False)) from None
        run.count(0, writer.session.completion_tokens)
        events += writer.close(None)
        resp = SSEResponse(headers=SSE_HEADERS)
        try:
            await resp.prepare(request)
            await resp.write_eof(b"".join(events))  # headers, events and end of body in one send
        except ConnectionResetError:
            raise client_gone() from None
    finally:
        run.report_tokens()
    return resp


def _index(choice: Any) -> int:
    index = choice.get("index", 0) if isinstance(choice, dict) else 0
    return index if type(index) is int else 0


def setup(app: web.Application) -> None:
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/completions", completions)
