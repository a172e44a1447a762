"""The drop-in front door: `POST /v1/chat/completions` and `POST /v1/completions`.

One hop: validate the OpenAI request once (pydantic), render it (`core.render`), send the
GenerateRequest to a tokens-only engine from the pool, and derender each engine chunk in-process
(`core.frontdoor`: detokenizer, stop strings, logprobs, parsers), writing `vllm serve`'s exact
chunks as SSE. No per-chunk HTTP, no per-chunk pydantic; chunks are plain dicts through orjson.

* `stop` never reaches the engine (a tokens-only engine answers 400 to it, spec 0.3): stop strings
  are matched here, and when every choice has stopped the engine request is aborted.
* A client that goes away (handler cancelled) aborts the engine request at once: the stream is
  closed and `/inference/v1/abort_requests` is posted.
* Failures before the first token are JSON error bodies (engine unreachable 503, engine 4xx passed
  on, 5xx as 502, timeouts 504); after the stream started, a `data: {"error":...}` event and
  `data: [DONE]`, so a client never hangs.
* Non-streamed answers without stop strings use the engine's non-streaming generate; with stop
  strings they read the engine stream so the request can be cut short.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from core.errors import RequestError, error_json
from core.frontdoor import (
    ChatChoiceStream, CompletionChoiceStream, DecodeOptions, chat_chunk, chat_continuous_usage,
    chat_echo_chunk, chat_response, chat_role_chunk, completion_response, usage_chunk,
)
from core.model import ModelInfo
from core.parsers.pipeline import ChatOutputParser
from core.protocol.chat import ChatCompletionRequest
from core.protocol.common import VLLMValidationError
from core.protocol.completion import CompletionRequest
from core.render import RenderOptions, effective_chat_kwargs, render_chat, render_completion, request_size
from proxy import lifecycle
from proxy.app import STATE
from proxy.engine import pool as engine_pool
from proxy.engine.client import Engine, EngineError, EngineStream, invalid_response
from proxy.engine.pool import EnginePool, pool_of
from proxy.http import json_response, read_json_object, validate
from proxy.metrics import ARRIVAL_KEY, METRICS

log = logging.getLogger("derender_proxy.openai")

SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}


class SSEResponse(web.StreamResponse):
    """An event stream whose headers leave with its first events, in one send.

    aiohttp's StreamResponse sends its headers as soon as it is prepared; we prepare once the
    engine's first token is in, so they would be a send of their own just before the first events.
    A send costs tens of microseconds of system time (more on virtual machines), and two of them
    sit on the time to first token; `web.Response` buffers its headers the same way."""

    _send_headers_immediately = False


DONE = b"data: [DONE]\n\n"
SHUTDOWN_MESSAGE = "The server is shutting down."


@dataclass
class FrontDoor:
    """Per-app settings resolved once at start-up."""

    render: RenderOptions
    reasoning_field: str


FRONT_DOOR: web.AppKey[FrontDoor] = web.AppKey("front_door", FrontDoor)


def _sse(chunk: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _error_event(exc: EngineError | RequestError) -> bytes:
    return b"data: " + error_json(exc.message, exc.type, exc.status, getattr(exc, "param", None)) + b"\n\n"


def _client_error(exc: EngineError) -> RequestError:
    return RequestError(exc.message, exc.status, exc.type, retry_after=exc.retry_after)


def engine_body(gen: dict[str, Any], stream: bool) -> dict[str, Any]:
    """The GenerateRequest for the engine: no stop strings (we enforce them), no usage events (we
    count), no model alias (the engine may serve another name), and always an explicit max_tokens."""
    body = dict(gen)
    # The engine aborts by id, and clients may send the same X-Request-Id twice: a suffix keeps
    # every engine request distinct (vLLM does the same internally), so one client's disconnect
    # or stop string can never abort another's generation. The client-visible id is unchanged.
    body["request_id"] = f"{gen['request_id']}-{secrets.token_hex(4)}"
    params = dict(gen["sampling_params"])
    # vLLM's JSON form omits max_tokens when it equals SamplingParams' default 16, and an engine
    # that does not see the key generates up to max_model_len (spec 2.3): say 16 explicitly
    params.setdefault("max_tokens", 16)
    if params.get("stop"):
        params["stop"] = []
    params.pop("output_text_buffer_length", None)
    params["output_kind"] = 1 if stream else 2
    body["sampling_params"] = params
    body["stream"] = stream
    body["stream_options"] = None
    body["model"] = None
    return body


class EngineRun:
    """The engine side of one request: its streams (one per prompt), aborts, metrics."""

    def __init__(self, request: web.Request, pool: EnginePool) -> None:
        self.request = request
        self.pool = pool
        self.metrics = request.app.get(METRICS)
        self.streams: list[EngineStream] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.prompt_logprobs: list[Any] = []  # per prompt, from non-streamed engine answers
        self._t0 = time.monotonic()
        # the proxy's own share of the time to first token (perf_counter): arrival -> first engine call,
        # last engine stream's first token -> first events written
        self._arrival: float | None = request.get(ARRIVAL_KEY)
        self._engine_called: float | None = None
        self._first_token: float | None = None

    def calling_engine(self) -> None:
        if self._engine_called is None:
            self._engine_called = time.perf_counter()

    def first_events_written(self) -> None:
        """Record the proxy's own share of this stream's time to first token (once)."""
        if self._first_token is None or self._arrival is None or self._engine_called is None:
            return
        if self.metrics is not None:
            self.metrics.observe_overhead(self._engine_called - self._arrival + time.perf_counter() - self._first_token)
        self._first_token = None

    async def open(self, body: dict[str, Any], prompt_ids: Sequence[int], prefer: Engine | None = None
                   ) -> tuple[EngineStream, dict | None]:
        self.calling_engine()
        try:
            # one group: the engine requests of one client request (several prompts) are admitted
            # together, so a request never holds slots while it queues for its own other prompts
            stream, first = await self.pool.open_stream(body, prompt_ids, group=self, prefer=prefer)
        except EngineError as exc:
            raise _client_error(exc) from None
        self.streams.append(stream)
        self._first_token = time.perf_counter()
        if self.metrics is not None:
            self.metrics.observe_ttft(time.monotonic() - self._t0)
        return stream, first

    def abort_all(self, cause: str) -> None:
        aborted = False
        for stream in self.streams:
            aborted |= stream.abort()
        if aborted and self.metrics is not None and cause != "shutdown":
            self.metrics.abort(cause)

    def failed(self, exc: EngineError) -> None:
        """An engine stream broke after it started: count it and make sure nothing keeps generating."""
        if self.metrics is not None:
            for stream in self.streams:
                if not stream.finished:
                    self.metrics.engine_error(stream.engine.url, exc.kind)
                    break
            if exc.kind == "timeout":
                self.metrics.abort("timeout")
        self.abort_all("error")

    def count(self, prompt: int, completion: int) -> None:
        self.prompt_tokens += prompt
        self.completion_tokens += completion

    def report_tokens(self) -> None:
        if self.metrics is not None:
            self.metrics.add_tokens(self.prompt_tokens, self.completion_tokens, request=self.request)


BATCH_LIMIT = 32  # engine events derendered per write; then other requests get the loop



def _shutdown_event() -> bytes:
    return _error_event(RequestError(SHUTDOWN_MESSAGE, 503, "ServiceUnavailableError"))


def _stream_failure(run: EngineRun, tracked: Any, exc: EngineError | None) -> bytes:
    """The error event that ends a started stream: shutdown, an engine failure, or our own bug (None)."""
    if exc is not None and tracked.aborted is not None:  # we closed the engine stream ourselves
        return _shutdown_event()
    if exc is None:
        log.exception("derendering the engine stream failed")
        exc = invalid_response(started=True)
    run.failed(exc)
    return _error_event(exc)


async def _end_stream(resp: web.StreamResponse, error: bytes | None, usage: dict[str, Any] | None,
                      unsent: Sequence[bytes] = ()) -> None:
    """The last events of a started stream: the events not sent yet (role chunks of a stream that
    brought no token), the error event, else the usage chunk if asked; then [DONE]."""
    tail = [*unsent, error] if error is not None else [*unsent, *([_sse(usage)] if usage is not None else [])]
    tail.append(DONE)
    await resp.write_eof(b"".join(tail))  # one send: the last events and the end of the body


def _client_gone() -> asyncio.CancelledError:
    """The client went away while we wrote to it: the same as a cancelled handler (a 499 in the
    access log, no traceback), not a server error."""
    return asyncio.CancelledError()

async def _batches(stream: EngineStream, first: dict | None, metrics: Any):
    """The engine events of one stream in batches (what one network read brought), first one
    included; the gap between reads feeds the inter-token latency histogram."""
    if first is None:
        return
    batch: list[dict] | None = [first]
    last = time.monotonic()
    while batch is not None:
        yield batch
        if len(batch) >= BATCH_LIMIT:
            await asyncio.sleep(0)  # a zero-delay engine must not starve new requests' first tokens
        batch = await stream.next_batch(BATCH_LIMIT)
        if metrics is not None and batch is not None:
            now = time.monotonic()
            metrics.observe_itl(now - last)
            last = now


async def _merged(sources: list[tuple[EngineStream, dict | None]], metrics: Any):
    """Several engine streams (multi-prompt completions) as one sequence of (prompt index, batch)."""
    if len(sources) == 1:
        stream, first = sources[0]
        async for batch in _batches(stream, first, metrics):
            yield 0, batch
        return
    # bounded: a slow client slows the pumps, which stop reading, which slows the engines (backpressure)
    queue: asyncio.Queue = asyncio.Queue(maxsize=4 * len(sources))
    end = object()

    async def pump(i: int, stream: EngineStream, first: dict | None) -> None:
        try:
            async for batch in _batches(stream, first, metrics):
                await queue.put((i, batch))
            await queue.put((i, end))
        except asyncio.CancelledError:
            raise  # the consumer is gone: nothing to tell it
        except Exception as exc:  # the consumer re-raises it (and cancels the other pumps)
            await queue.put((i, exc))

    tasks = [asyncio.get_running_loop().create_task(pump(i, s, f)) for i, (s, f) in enumerate(sources)]
    remaining = len(tasks)
    try:
        while remaining:
            i, item = await queue.get()
            if item is end:
                remaining -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield i, item
    finally:
        for task in tasks:
            task.cancel()


GENERATION_FAILED = "Internal server error"


def engine_choices(event: dict[str, Any], started: bool) -> list[dict[str, Any]]:
    """The choices of an engine answer or event, checked: a list of objects with int indexes.

    A choice that finished with "error" is a generation failure the engine should have reported
    itself (vLLM turns it into a 500): relayed as a 502 with vLLM's message (an error event once
    streaming)."""
    choices = event.get("choices")
    if choices is None:
        return []
    if not isinstance(choices, list):
        raise invalid_response(started)
    for choice in choices:
        if not isinstance(choice, dict) or not isinstance(choice.get("index", 0), int):
            raise invalid_response(started)
        ids = choice.get("token_ids")
        if ids is not None and (not isinstance(ids, list) or not all(type(t) is int for t in ids)):
            raise invalid_response(started)
        if choice.get("finish_reason") == "error":
            raise EngineError(GENERATION_FAILED, 502, "BadGatewayError", kind="stream", started=started)
    return choices


async def _all_or_none(run: EngineRun, coros: list[Any]) -> list[Any]:
    """Run one engine call per prompt concurrently; on the first failure (or a cancellation),
    cancel the others and abort every engine request already started, then re-raise."""
    if len(coros) == 1:
        return [await coros[0]]
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        failed = next((t for t in done if not t.cancelled() and t.exception() is not None), None)
        if failed is None:
            return [t.result() for t in tasks]
        raise failed.exception()  # type: ignore[misc]
    except BaseException as exc:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        run.abort_all("client_disconnect" if isinstance(exc, asyncio.CancelledError) else "error")
        raise


# -- chat -------------------------------------------------------------------------------------------

def _chat_role(req: ChatCompletionRequest) -> str:
    if req.add_generation_prompt:
        return "assistant"
    return str(req.messages[-1].get("role") or "assistant")


def _chat_echo_prefix(req: ChatCompletionRequest, role: str) -> str | None:
    if not req.echo or not req.messages:
        return None
    last = req.messages[-1]
    if last.get("role") != role:
        return None
    content = last.get("content")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or None


async def chat_completions(request: web.Request) -> web.StreamResponse:
    app = request.app
    state, door = app[STATE], app[FRONT_DOOR]
    model = state.model
    data = await read_json_object(request)
    req = validate(ChatCompletionRequest, data)
    gen = await state.run_cpu(request_size(req), render_chat, model, door.render, req,
                              request.headers.get("X-Request-Id"))
    pool = pool_of(app)
    parser = ChatOutputParser.for_request(
        model=model, reasoning_parser=state.config.reasoning_parser,
        tool_call_parser=state.config.tool_call_parser,
        enable_auto_tool_choice=state.config.enable_auto_tool_choice, request=req,
        chat_template_kwargs=effective_chat_kwargs(req, door.render))
    sampling = gen["sampling_params"]
    opts = DecodeOptions.from_sampling(sampling, stop=sampling.get("stop"), chat=True, request=req)
    prompt_ids: list[int] = gen["token_ids"]
    n = int(sampling.get("n") or 1)
    choices = [ChatChoiceStream(i, model, opts, prompt_ids, parser, reasoning_field=door.reasoning_field,
                                return_token_ids=bool(req.return_token_ids),
                                include_reasoning=req.include_reasoning is not False) for i in range(n)]
    run = EngineRun(request, pool)
    run.count(len(prompt_ids), 0)
    created = int(time.time())
    if req.stream:
        return await _chat_stream(request, run, req, gen, choices, created, model)
    # stop strings read the engine stream to cut it short; prompt logprobs exist only in the full answer
    use_stream = bool(opts.stop) and sampling.get("prompt_logprobs") is None
    return await _chat_full(run, req, gen, choices, created, model, use_stream)


async def _engine_answer(run: EngineRun, body: dict[str, Any], prompt_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]], list[Any] | None, Engine]:
    """One non-streamed engine answer: its checked choices, its prompt_logprobs (None when absent)
    and the engine that gave it.

    Engine failures become the client's JSON error (nothing has been sent to the client yet)."""
    run.calling_engine()
    try:
        engine, response = await run.pool.generate(body, prompt_ids)
        choices = engine_choices(response, started=False)
    except EngineError as exc:
        raise _client_error(exc) from None
    prompt_logprobs = response.get("prompt_logprobs")
    return choices, prompt_logprobs if isinstance(prompt_logprobs, list) else None, engine


async def _collect(run: EngineRun, gens: list[dict[str, Any]], groups: list[list[Any]], use_stream: bool) -> None:
    """Read every engine answer into its choices (non-streamed client answers)."""
    if not use_stream:
        async def one(gen: dict[str, Any], group: list[Any]) -> None:
            choices, prompt_logprobs, _ = await _engine_answer(run, engine_body(gen, stream=False), gen["token_ids"])
            run.prompt_logprobs.append(prompt_logprobs)
            for c in group:
                if hasattr(c, "prompt_logprobs"):
                    c.prompt_logprobs = prompt_logprobs
            try:
                for choice in choices:
                    index = choice.get("index", 0)
                    if 0 <= index < len(group):
                        group[index].collect(choice)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                log.exception("derendering the engine answer failed")
                raise _client_error(invalid_response()) from None
        await _all_or_none(run, [one(g, grp) for g, grp in zip(gens, groups)])
        return
    sources = await _all_or_none(run, [run.open(engine_body(g, stream=True), g["token_ids"]) for g in gens])
    live = set(range(len(gens)))
    try:
        async for i, batch in _merged(sources, run.metrics):
            group = groups[i]
            for event in batch:
                for choice in engine_choices(event, started=True):
                    index = choice.get("index", 0)
                    if 0 <= index < len(group):
                        group[index].collect(choice)
            if i in live and all(c.finished for c in group) and not all(c.engine_done for c in group):
                live.discard(i)  # cut by a stop string: stop the engine (else its [DONE] ends the stream)
                if sources[i][0].abort() and run.metrics is not None:
                    run.metrics.abort("stop_string")
            if not live:
                break
    except EngineError as exc:
        run.failed(exc)
        raise _client_error(exc) from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        log.exception("derendering the engine stream failed")
        exc = invalid_response(started=True)
        run.failed(exc)
        raise _client_error(exc) from None


async def _chat_full(run: EngineRun, req: ChatCompletionRequest, gen: dict[str, Any],
                     choices: list[ChatChoiceStream], created: int, model: ModelInfo, has_stop: bool
                     ) -> web.Response:
    try:
        await _collect(run, [gen], [choices], use_stream=has_stop)
    except asyncio.CancelledError:
        run.abort_all("client_disconnect")
        raise
    role = _chat_role(req)
    echo = _chat_echo_prefix(req, role)
    out = [c.response_choice(role, gen["token_ids"], echo) for c in choices]
    completion = sum(c.decoder.num_tokens for c in choices)
    run.count(0, completion)
    run.report_tokens()
    return json_response(chat_response(gen["request_id"], created, model.name, out, len(gen["token_ids"]),
                                       completion, gen["token_ids"] if req.return_token_ids else None,
                                       run.prompt_logprobs[0] if run.prompt_logprobs else None))


async def _chat_stream(request: web.Request, run: EngineRun, req: ChatCompletionRequest, gen: dict[str, Any],
                       choices: list[ChatChoiceStream], created: int, model: ModelInfo) -> web.StreamResponse:
    options = req.stream_options
    include_usage = bool(options and options.include_usage)
    continuous = include_usage and bool(options and options.continuous_usage_stats)
    rid, name = gen["request_id"], model.name
    prompt_tokens = len(gen["token_ids"])
    # the first events are made before the engine is called, not on the way to the first token
    role = _chat_role(req)
    usage0 = chat_continuous_usage(prompt_tokens, 0) if continuous else None
    prompt_ids = gen["token_ids"] if req.return_token_ids else None
    head = [_sse(chat_role_chunk(rid, created, name, c.index, role, prompt_ids, usage0)) for c in choices]
    echo = _chat_echo_prefix(req, role)
    if echo:  # vLLM's echo chunk sets no kv_transfer_params
        head += [_sse(chat_echo_chunk(rid, created, name, c.index, echo, usage0)) for c in choices]
    resp = SSEResponse(headers=SSE_HEADERS)
    stream, first = await run.open(engine_body(gen, stream=True), gen["token_ids"])
    try:
        await resp.prepare(request)
    except BaseException as exc:
        run.abort_all("client_disconnect")
        if isinstance(exc, ConnectionResetError):
            raise asyncio.CancelledError() from None
        raise

    def on_abort(cause: str) -> None:
        run.abort_all(cause)

    try:
        with lifecycle.track(request, on_abort) as tracked:
            error: bytes | None = None
            try:
                async for batch in _batches(stream, first, run.metrics):
                    out, head = head, []  # the role chunks leave with the first token, in one send
                    for event in batch:
                        for choice in engine_choices(event, started=True):
                            index = choice.get("index", 0)
                            if not 0 <= index < len(choices):
                                continue
                            state = choices[index]
                            delta = state.step(choice)
                            if delta is not None:
                                usage = (chat_continuous_usage(prompt_tokens, state.decoder.num_tokens)
                                         if continuous else None)
                                out.append(_sse(chat_chunk(rid, created, name, delta, usage)))
                    if out:
                        await resp.write(b"".join(out))
                        run.first_events_written()
                    if all(c.finished for c in choices) and not all(c.engine_done for c in choices):
                        run.abort_all("stop_string")  # cut by a stop string (else [DONE] ends the stream)
                        break
                if tracked.aborted is not None:
                    error = _shutdown_event()
            except EngineError as exc:
                error = _stream_failure(run, tracked, exc)
            except Exception:  # the response has started: never let a bug corrupt it, end it properly
                error = _stream_failure(run, tracked, None)
            completion = sum(c.decoder.num_tokens for c in choices)
            run.count(0, completion)
            usage = usage_chunk(rid, created, name, "chat.completion.chunk", prompt_tokens, completion)
            await _end_stream(resp, error, usage if include_usage else None, head)
    except (asyncio.CancelledError, ConnectionResetError) as exc:
        run.abort_all("client_disconnect")
        if isinstance(exc, ConnectionResetError):
            raise _client_gone() from None
        raise
    finally:
        run.report_tokens()
    return resp


# -- completions -----------------------------------------------------------------------------------

def check_vocabulary(model: ModelInfo, gens: list[dict[str, Any]]) -> None:
    """Prompt ids the client sent as ids must exist: a tokens-only engine has no tokenizer to check
    them (vLLM 0.32's engine process dies on one), so answer vllm serve's 400 here."""
    # vLLM's renderer: max(tokenizer's max id, config vocab_size - 1) (embedding padding rows count)
    vocab_size = model.hf_config.get("vocab_size") if isinstance(model.hf_config, dict) else None
    top = max(model.tokenizer.max_token_id, vocab_size - 1 if isinstance(vocab_size, int) else 0)
    for gen in gens:
        highest = max(gen["token_ids"], default=0)
        if highest > top:
            raise RequestError(f"Token id {highest} is out of vocabulary", 400, "BadRequestError")


def _prompt_text(model: ModelInfo, req: CompletionRequest, i: int, prompt_ids: list[int]) -> str:
    prompt = req.prompt
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[i] if i < len(prompt) else None, str):
        return prompt[i]  # type: ignore[return-value]
    return model.tokenizer.decode(prompt_ids)


async def completions(request: web.Request) -> web.StreamResponse:
    app = request.app
    state, door = app[STATE], app[FRONT_DOOR]
    model = state.model
    data = await read_json_object(request)
    req = validate(CompletionRequest, data)
    gens = await state.run_cpu(request_size(req), render_completion, model, door.render, req,
                               request.headers.get("X-Request-Id"))
    if not gens:
        raise VLLMValidationError("You must pass at least one prompt", parameter="prompt")
    check_vocabulary(model, gens)
    pool = pool_of(app)
    sampling = gens[0]["sampling_params"]
    opts = DecodeOptions.from_sampling(sampling, stop=sampling.get("stop"), chat=False, request=req)
    n = int(sampling.get("n") or 1)
    groups: list[list[CompletionChoiceStream]] = []
    for p, gen in enumerate(gens):
        echo = _prompt_text(model, req, p, gen["token_ids"]) if req.echo else None
        groups.append([CompletionChoiceStream(p * n + i, model, opts, gen["token_ids"],
                                              return_token_ids=bool(req.return_token_ids), echo_text=echo,
                                              echo_only=bool(req.echo) and req.max_tokens == 0)
                       for i in range(n)])
    run = EngineRun(request, pool)
    prompt_tokens = sum(len(g["token_ids"]) for g in gens)
    run.count(prompt_tokens, 0)
    created = int(time.time())
    base_id = gens[0]["request_id"] if len(gens) == 1 else gens[0]["request_id"].rsplit("-", 1)[0]
    if req.stream:
        if req.echo and req.max_tokens == 0:
            return await _echo_only_stream(request, run, req, gens, groups, created, model, base_id)
        return await _completion_stream(request, run, req, gens, groups, created, model, base_id)
    try:
        await _collect(run, gens, groups, use_stream=bool(opts.stop) and sampling.get("prompt_logprobs") is None)
    except asyncio.CancelledError:
        run.abort_all("client_disconnect")
        raise
    out = [c.response_choice() for group in groups for c in group]
    completion = sum(c.decoder.num_tokens for group in groups for c in group)
    run.count(0, completion)
    run.report_tokens()
    return json_response(completion_response(base_id, created, model.name, out, prompt_tokens, completion))


# Sampling keys that only shape the generated tokens: the prompt-logprobs side request (one token,
# nobody reads it) leaves them out, so it is never rejected for them (min_tokens > max_tokens 1)
# and never pays for them (a structured-output grammar, output logprobs, n sequences).
_GENERATION_ONLY = ("n", "logprobs", "logprob_token_ids", "min_tokens", "structured_outputs")


def prompt_logprobs_body(gen: dict[str, Any]) -> dict[str, Any]:
    """The non-streamed engine request that only fetches one prompt's logprobs (streamed echo).

    `max_tokens: 1` because the engine must generate at least one token (spec 2.2 does the same for
    echo with max_tokens 0); its own id, so an abort of it never touches the streamed request."""
    params = {k: v for k, v in gen["sampling_params"].items() if k not in _GENERATION_ONLY}
    params["max_tokens"] = 1
    return engine_body({**gen, "request_id": f"{gen['request_id']}-prompt-logprobs", "sampling_params": params},
                       stream=False)


def completion_stream_body(gen: dict[str, Any]) -> dict[str, Any]:
    """The streamed engine request of a completion: without `prompt_logprobs`, which a tokens-only
    engine never puts in stream events (spec 2.3) and completion chunks never carry; computing them
    would be wasted work, and their `skip_reading_prefix_cache` would bypass the prefix cache."""
    body = engine_body(gen, stream=True)
    params = body["sampling_params"]  # engine_body's own copy
    if params.pop("prompt_logprobs", None) is not None:
        params["skip_reading_prefix_cache"] = False
    return body


async def _open_completion_stream(run: EngineRun, gen: dict[str, Any], group: list[CompletionChoiceStream]
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
    if group and group[0].wants_prompt_logprobs:
        _, prompt_logprobs, engine = await _engine_answer(run, prompt_logprobs_body(gen), gen["token_ids"])
        for choice in group:
            choice.prompt_logprobs = prompt_logprobs
    return await run.open(completion_stream_body(gen), gen["token_ids"], prefer=engine)


async def _echo_only_stream(request: web.Request, run: EngineRun, req: CompletionRequest,
                            gens: list[dict[str, Any]], groups: list[list[CompletionChoiceStream]], created: int,
                            model: ModelInfo, rid: str) -> web.StreamResponse:
    """Streamed echo with max_tokens 0 (scoring): the only output is the prompt, which is known
    before the engine runs, and its logprobs come only in a non-streamed answer. So: one
    non-streamed engine request per prompt (max_tokens 1 as rendered, with prompt_logprobs),
    written as the SSE that `vllm serve` streams for it: per choice one chunk with the prompt, its
    logprobs and the finish; the usage chunk when asked; [DONE]. Engine failures are JSON errors."""
    try:
        answers = await _all_or_none(run, [_engine_answer(run, engine_body(g, stream=False), g["token_ids"])
                                           for g in gens])
    except asyncio.CancelledError:
        run.abort_all("client_disconnect")
        raise
    options = req.stream_options
    include_usage = bool(options and options.include_usage)
    continuous = include_usage and bool(options and options.continuous_usage_stats)
    prompt_lens = [len(g["token_ids"]) for g in gens]
    events: list[bytes] = []
    try:
        for p, (choices, prompt_logprobs, _) in enumerate(answers):
            group = groups[p]
            for choice_state in group:
                choice_state.prompt_logprobs = prompt_logprobs
            for choice in sorted(choices, key=lambda c: c.get("index", 0)):
                index = choice.get("index", 0)
                if 0 <= index < len(group):
                    chunk = group[index].chunk(choice, rid, created, model.name,
                                               prompt_lens[p] if continuous else None)
                    if chunk is not None:
                        events.append(_sse(chunk))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        log.exception("derendering the engine answer failed")
        raise _client_error(invalid_response()) from None
    completion = sum(c.decoder.num_tokens for group in groups for c in group)
    run.count(0, completion)
    if include_usage:
        events.append(_sse(usage_chunk(rid, created, model.name, "text_completion", sum(prompt_lens), completion)))
    events.append(DONE)
    resp = SSEResponse(headers=SSE_HEADERS)
    try:
        await resp.prepare(request)
        await resp.write_eof(b"".join(events))  # headers, events and end of body in one send
    except ConnectionResetError:
        raise _client_gone() from None
    finally:
        run.report_tokens()
    return resp


async def _completion_stream(request: web.Request, run: EngineRun, req: CompletionRequest,
                             gens: list[dict[str, Any]], groups: list[list[CompletionChoiceStream]], created: int,
                             model: ModelInfo, rid: str) -> web.StreamResponse:
    options = req.stream_options
    include_usage = bool(options and options.include_usage)
    continuous = include_usage and bool(options and options.continuous_usage_stats)
    name = model.name
    prompt_lens = [len(g["token_ids"]) for g in gens]
    resp = SSEResponse(headers=SSE_HEADERS)
    sources = await _all_or_none(run, [_open_completion_stream(run, g, grp) for g, grp in zip(gens, groups)])
    try:
        await resp.prepare(request)
    except BaseException as exc:
        run.abort_all("client_disconnect")
        if isinstance(exc, ConnectionResetError):
            raise asyncio.CancelledError() from None
        raise
    live = set(range(len(gens)))
    try:
        with lifecycle.track(request, lambda cause: run.abort_all(cause)) as tracked:
            error: bytes | None = None
            try:
                async for p, batch in _merged(sources, run.metrics):  # type: ignore[arg-type]
                    group = groups[p]
                    out = []
                    for event in batch:
                        for choice in engine_choices(event, started=True):
                            index = choice.get("index", 0)
                            if not 0 <= index < len(group):
                                continue
                            chunk = group[index].chunk(choice, rid, created, name,
                                                       prompt_lens[p] if continuous else None)
                            if chunk is not None:
                                out.append(_sse(chunk))
                    if out:
                        await resp.write(b"".join(out))
                        run.first_events_written()
                    if p in live and all(c.finished for c in group) and not all(c.engine_done for c in group):
                        live.discard(p)  # cut by a stop string
                        if sources[p][0].abort() and run.metrics is not None:  # type: ignore[index]
                            run.metrics.abort("stop_string")
                    if not live:
                        break
                if tracked.aborted is not None:
                    error = _shutdown_event()
            except EngineError as exc:
                error = _stream_failure(run, tracked, exc)
            except Exception:  # the response has started: never let a bug corrupt it, end it properly
                error = _stream_failure(run, tracked, None)
            completion = sum(c.decoder.num_tokens for group in groups for c in group)
            run.count(0, completion)
            usage = usage_chunk(rid, created, name, "text_completion", sum(prompt_lens), completion)
            await _end_stream(resp, error, usage if include_usage else None)
    except (asyncio.CancelledError, ConnectionResetError) as exc:
        run.abort_all("client_disconnect")
        if isinstance(exc, ConnectionResetError):
            raise _client_gone() from None
        raise
    finally:
        run.report_tokens()
    return resp


def setup(app: web.Application) -> None:
    config = app[STATE].config
    app[FRONT_DOOR] = FrontDoor(render=RenderOptions.from_config(config), reasoning_field=config.reasoning_field)
    engine_pool.install(app)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/completions", completions)
