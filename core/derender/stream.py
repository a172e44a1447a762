"""Streaming derender: per-choice state machines and the raw `/derender` stream calls (spec 5).

`ChatStreamDerenderer` / `CompletionStreamDerenderer` turn one choice's engine chunks into
the choice objects of `chat.completion.chunk` / `text_completion` chunks. They hold live
objects (detokenizer, stop matcher, parser state) and can be driven in-process, one
`step(...)` per engine chunk, with no serialization. `to_state()` / `from_state()` are only
used at the raw endpoint, where the state travels inside the client-carried `stream_state`.

Per step the work is O(new tokens) (plus, with a parser, the current tool call): the
detokenizer window, the stop-string tail and the parser state are all bounded.

Where we differ from vLLM (spec 0.3): stop strings are supported while streaming (the
matched chunk says `finish_reason:"stop"` and `stop_reason` the string; later chunks of that
choice produce no choice object), and the parser path keeps its state instead of replaying the
output on every call.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from core.derender import output
from core.derender.checks import CHAT_REQUEST_REQUIRED, PROMPT_IDS_REQUIRED, check_model, check_prompt_ids
from core.derender.choice import ChoiceDecoder, DecodeOptions
from core.derender.settings import DerenderSettings
from core.derender.state import StateCodec, StreamState, invalid, request_fingerprint, server_fingerprint
from core.errors import RequestError, bad_request
from core.logprobs import (TokenTexts, chat_top_limit, completion_logprobs, completion_top_limit, context_tail,
                           normalize_content, resolve_chat_logprobs)

_EMPTY: tuple[int, ...] = ()


def _merge_deltas(first: dict[str, Any] | None, second: dict[str, Any] | None) -> dict[str, Any] | None:
    """Join a parser's feed delta and its finish delta into one chunk delta."""
    if first is None:
        return second
    if second is None:
        return first
    merged = {"reasoning": _join(first.get("reasoning"), second.get("reasoning")),
              "content": _join(first.get("content"), second.get("content")),
              "tool_calls": [dict(c) for c in first.get("tool_calls") or ()]}
    for call in second.get("tool_calls") or ():
        last = merged["tool_calls"][-1] if merged["tool_calls"] else None
        if (last is not None and last["index"] == call["index"] and "id" not in call and "type" not in call
                and last.get("function") is not None and call.get("function") is not None
                and set(call["function"]) <= {"arguments"}):
            fn = dict(last["function"])
            fn["arguments"] = (fn.get("arguments") or "") + (call["function"].get("arguments") or "")
            last["function"] = fn
        else:
            merged["tool_calls"].append(call)
    return merged


def _join(a: str | None, b: str | None) -> str | None:
    if a and b:
        return a + b
    return a or b or None


class ChatStreamDerenderer:
    """One chat choice: engine chunks -> `chat.completion.chunk` choice dicts."""

    def __init__(self, settings: DerenderSettings, chat_request: Any, decoder: ChoiceDecoder, *,
                 parser: Any = None, parser_state: dict[str, Any] | None = None, role_sent: bool = False,
                 logprob_context: Sequence[int] = (), index: int | None = None, output_tokens: int = 0) -> None:
        self.settings = settings
        self.chat_request = chat_request
        self.decoder = decoder
        self.parser = parser
        self.parser_state = parser_state
        self.role_sent = role_sent
        self.logprob_context = list(logprob_context)
        self.index = index
        self.output_tokens = output_tokens
        self.texts = TokenTexts.of(settings.model.tokenizer)
        hide = parser is not None and chat_request is not None and chat_request.include_reasoning is False
        self.hide_metadata = hide
        self.return_token_ids = bool(chat_request is not None and chat_request.return_token_ids) and not hide
        self.top_limit = (chat_top_limit(chat_request.logprobs, chat_request.top_logprobs,
                                         chat_request.logprob_token_ids) if chat_request is not None else None)
        self.reasoning_field = settings.reasoning_field

    # -- construction -------------------------------------------------------------------

    @staticmethod
    def build_parser(settings: DerenderSettings, chat_request: Any) -> Any:
        if not settings.parser_configured or chat_request is None:
            return None
        from core.parsers.pipeline import ChatOutputParser

        return ChatOutputParser.for_request(
            model=settings.model, reasoning_parser=settings.reasoning_parser,
            tool_call_parser=settings.tool_call_parser, enable_auto_tool_choice=settings.enable_auto_tool_choice,
            request=chat_request, chat_template_kwargs=settings.chat_template_kwargs(chat_request))

    @classmethod
    def decode_options(cls, chat_request: Any, parser: Any) -> DecodeOptions:
        return DecodeOptions.from_request(chat_request, preserve_special=parser is not None)

    @classmethod
    def start(cls, settings: DerenderSettings, chat_request: Any, prompt_token_ids: Sequence[int] | None,
              parser: Any = None) -> ChatStreamDerenderer:
        """A fresh stream; `parser` from `build_parser` (None: plain detokenization)."""
        opts = cls.decode_options(chat_request, parser)
        decoder = ChoiceDecoder.start(settings.model, opts, prompt_token_ids)
        parser_state = parser.start(prompt_token_ids) if parser is not None else None
        return cls(settings, chat_request, decoder, parser=parser, parser_state=parser_state)

    # -- the state machine --------------------------------------------------------------

    def step(self, index: int, token_ids: Sequence[int] | None, finish_reason: str | None,
             stop_reason: int | str | None, logprobs: list[dict[str, Any]] | None = None,
             has_logprobs: bool = False) -> dict[str, Any] | None:
        """One engine chunk of this choice -> its chunk choice dict (None once the choice ended).

        `logprobs` is the chunk's normalized `logprobs.content` (see `core.logprobs`);
        `has_logprobs` says whether the engine chunk had a `logprobs` object at all.
        """
        if self.decoder.done:
            return None
        self.index = index
        ids = token_ids or _EMPTY
        step = self.decoder.step(ids, finish_reason, stop_reason)
        used = step.used_ids
        self.output_tokens += len(used)
        parser = self.parser
        if parser is not None:
            finish = step.finish_reason
            parsed = None
            if ids or finish_reason is not None:
                if step.text or used:
                    parsed = parser.feed(self.parser_state, step.text, used)
                if step.finished:
                    parsed = _merge_deltas(parsed, parser.finish(self.parser_state))
                    finish = parser.finish_reason(self.parser_state, step.finish_reason)
            if parsed is None:
                delta = output.delta(None, None, None, None, self.reasoning_field)
            else:
                delta = output.delta(None, parsed.get("content"), parsed.get("reasoning"),
                                     parsed.get("tool_calls"), self.reasoning_field)
        else:
            finish = step.finish_reason
            delta = output.delta(None, step.text or None, None, None, self.reasoning_field)
        if not self.role_sent:
            delta["role"] = "assistant"
            self.role_sent = True
        resolved = None
        if has_logprobs and not self.hide_metadata:
            content = logprobs if logprobs is None or len(used) == len(ids) else logprobs[:len(used)]
            resolved = resolve_chat_logprobs(self.texts, content, self.top_limit, self.logprob_context)
        self.logprob_context = context_tail(self.logprob_context, used)
        token_echo = (list(used) if token_ids is not None else None) if self.return_token_ids else None
        return output.chat_stream_choice(index, delta, resolved, finish, step.stop_reason, token_echo)

    def step_engine_choice(self, choice: dict[str, Any]) -> dict[str, Any] | None:
        """`step` for one choice of an engine SSE payload, as a plain dict (either logprob shape)."""
        logprobs = choice.get("logprobs")
        return self.step(choice["index"], choice.get("token_ids"), choice.get("finish_reason"),
                         choice.get("stop_reason"),
                         normalize_content(logprobs.get("content")) if logprobs is not None else None,
                         logprobs is not None)

    # -- state --------------------------------------------------------------------------

    def to_state(self, server: str, request: str) -> StreamState:
        return StreamState(kind="chat", server=server, request=request, index=self.index,
                           decoder=self.decoder.to_state(), role_sent=self.role_sent,
                           logprob_context=self.logprob_context, output_tokens=self.output_tokens,
                           parser=self.parser_state)

    @classmethod
    def from_state(cls, settings: DerenderSettings, chat_request: Any, state: StreamState,
                   parser: Any = None) -> ChatStreamDerenderer:
        if (parser is None) != (state.parser is None):
            raise invalid("the parser configuration of this stream changed")
        opts = cls.decode_options(chat_request, parser)
        try:
            decoder = ChoiceDecoder.from_state(settings.model, opts, state.decoder)
        except ValueError as exc:
            raise invalid(f"malformed ({exc})") from None
        return cls(settings, chat_request, decoder, parser=parser, parser_state=state.parser,
                   role_sent=state.role_sent, logprob_context=state.logprob_context or (),
                   index=state.index, output_tokens=state.output_tokens)


class CompletionStreamDerenderer:
    """One completion choice: engine chunks -> `text_completion` chunk choice dicts."""

    def __init__(self, settings: DerenderSettings, completion_request: Any, decoder: ChoiceDecoder, *,
                 logprob_context: Sequence[int] = (), text_offset: int = 0, index: int | None = None,
                 output_tokens: int = 0) -> None:
        self.settings = settings
        self.request = completion_request
        self.decoder = decoder
        self.logprob_context = list(logprob_context)
        self.text_offset = text_offset
        self.index = index
        self.output_tokens = output_tokens
        self.texts = TokenTexts.of(settings.model.tokenizer)
        self.return_token_ids = bool(completion_request is not None and completion_request.return_token_ids)
        self.top_limit = (completion_top_limit(completion_request.logprobs, completion_request.logprob_token_ids)
                          if completion_request is not None else None)

    @classmethod
    def start(cls, settings: DerenderSettings, completion_request: Any,
              prompt_token_ids: Sequence[int] | None) -> CompletionStreamDerenderer:
        opts = DecodeOptions.from_request(completion_request)
        return cls(settings, completion_request, ChoiceDecoder.start(settings.model, opts, prompt_token_ids))

    def step(self, index: int, token_ids: Sequence[int] | None, finish_reason: str | None,
             stop_reason: int | str | None, logprobs: list[dict[str, Any]] | None = None,
             has_logprobs: bool = False, prompt_token_ids: list[int] | None = None) -> dict[str, Any] | None:
        if self.decoder.done:
            return None
        self.index = index
        ids = token_ids or _EMPTY
        step = self.decoder.step(ids, finish_reason, stop_reason)
        used = step.used_ids
        self.output_tokens += len(used)
        comp = None
        next_offset = self.text_offset + len(step.text)
        if has_logprobs:
            content = logprobs if logprobs is None or len(used) == len(ids) else logprobs[:len(used)]
            resolved = resolve_chat_logprobs(self.texts, content, self.top_limit, self.logprob_context)
            comp = completion_logprobs(resolved, content, self.text_offset)
            if comp["tokens"]:
                next_offset = comp["text_offset"][-1] + len(comp["tokens"][-1])
        self.text_offset = next_offset
        self.logprob_context = context_tail(self.logprob_context, used)
        echo = self.return_token_ids
        return output.completion_stream_choice(
            index, step.text, comp, step.finish_reason, step.stop_reason,
            prompt_token_ids if echo else None,
            (list(used) if token_ids is not None else None) if echo else None)

    def step_engine_choice(self, choice: dict[str, Any],
                           prompt_token_ids: list[int] | None = None) -> dict[str, Any] | None:
        """`step` for one choice of an engine SSE payload, as a plain dict (either logprob shape)."""
        logprobs = choice.get("logprobs")
        return self.step(choice["index"], choice.get("token_ids"), choice.get("finish_reason"),
                         choice.get("stop_reason"),
                         normalize_content(logprobs.get("content")) if logprobs is not None else None,
                         logprobs is not None, prompt_token_ids)

    def to_state(self, server: str, request: str) -> StreamState:
        return StreamState(kind="cmpl", server=server, request=request, index=self.index,
                           decoder=self.decoder.to_state(), logprob_context=self.logprob_context,
                           text_offset=self.text_offset, output_tokens=self.output_tokens)

    @classmethod
    def from_state(cls, settings: DerenderSettings, completion_request: Any,
                   state: StreamState) -> CompletionStreamDerenderer:
        if state.parser is not None or state.role_sent:
            raise invalid("malformed (chat fields in a completions state)")
        opts = DecodeOptions.from_request(completion_request)
        try:
            decoder = ChoiceDecoder.from_state(settings.model, opts, state.decoder)
        except ValueError as exc:
            raise invalid(f"malformed ({exc})") from None
        return cls(settings, completion_request, decoder, logprob_context=state.logprob_context or (),
                   text_offset=state.text_offset, index=state.index, output_tokens=state.output_tokens)


# -- the raw endpoint calls -------------------------------------------------------------

def _server_fingerprint(settings: DerenderSettings) -> str:
    cached = settings.extras.get("state_fingerprint")
    if cached is None:
        model = settings.model
        cached = server_fingerprint(model.served_model_names, len(model.tokenizer), model.eos_token_ids,
                                    settings.reasoning_parser, settings.tool_call_parser,
                                    settings.enable_auto_tool_choice)
        settings.extras["state_fingerprint"] = cached
    return cached


def _codec(settings: DerenderSettings) -> StateCodec:
    codec = settings.extras.get("state_codec")
    if codec is None:
        codec = settings.extras["state_codec"] = StateCodec(settings.stream_state_secret)
    return codec


def _only_choice(chunk: Any, endpoint: str, with_count: bool) -> Any:
    n = len(chunk.choices)
    if n > 1:
        suffix = f" (got {n})." if with_count else ""
        raise bad_request(f"{endpoint} expects at most one choice per chunk{suffix}")
    return chunk.choices[0] if n else None


def _check_index(state: StreamState, choice: Any) -> None:
    if choice is not None and state.index is not None and choice.index != state.index:
        raise invalid(f"belongs to choice {state.index}, not {choice.index} (keep one state per index)")


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
    choice = _only_choice(chunk, "derender_chat_stream", with_count=True)
    codec, server = _codec(settings), _server_fingerprint(settings)
    request_key = request_fingerprint(chunk.request_id if "request_id" in chunk.model_fields_set else None)
    state = None
    if req.stream_state is not None:
        state = codec.decode(req.stream_state, kind="chat", server=server, request=request_key)
        request_key = request_key or state.request
    prompt_len = len(req.prompt_token_ids) if req.prompt_token_ids is not None else 0
    prior = state.output_tokens if state is not None else 0
    delta_len = len(choice.token_ids) if choice is not None and choice.token_ids else 0
    if prompt_len + prior + delta_len > model.max_model_len:
        raise bad_request(f"prompt_token_ids length ({prompt_len}) plus output_token_ids length ({prior}) "
                          f"plus delta ({delta_len}) exceeds max_model_len ({model.max_model_len}).")
    try:
        parser = ChatStreamDerenderer.build_parser(settings, chat_request)
    except (ValueError, KeyError) as exc:
        raise bad_request(f"invalid chat_request for the configured parser: {exc}") from None
    if state is not None:
        _check_index(state, choice)
    choices = []
    try:
        if state is None:
            seed = req.prompt_token_ids if req.prompt_token_ids is not None else chunk.prompt_token_ids
            derenderer = ChatStreamDerenderer.start(settings, chat_request, seed, parser)
        else:
            derenderer = ChatStreamDerenderer.from_state(settings, chat_request, state, parser)
        if choice is not None:
            out = derenderer.step(choice.index, choice.token_ids, choice.finish_reason, choice.stop_reason,
                                  choice.logprobs.content_dicts() if choice.logprobs is not None else None,
                                  choice.logprobs is not None)
            if out is not None:
                choices.append(out)
    except RequestError:
        raise
    except Exception:  # vLLM: anything failing in here is the client's (ids, state) -> 400
        raise invalid("derender failed") from None
    prompt_echo = chunk.prompt_token_ids if chat_request is not None and chat_request.return_token_ids else None
    body = output.chat_chunk(chunk.request_id, created if created is not None else int(time.time()),
                             req.model or model.name, choices, output.stream_usage(chunk.usage, req.prompt_tokens),
                             prompt_echo, chunk.metrics.model_dump() if chunk.metrics is not None else None)
    return {"chunk": body, "stream_state": codec.encode(derenderer.to_state(server, request_key))}


def derender_completion_stream(settings: DerenderSettings, req: Any, created: int | None = None) -> dict[str, Any]:
    """POST /v1/completions/derender with `stream: true` -> {"chunk", "stream_state"}."""
    model = settings.model
    check_model(model, req.model)
    check_prompt_ids([req.prompt_token_ids], model.max_model_len)
    chunk = req.generate_chunk
    choice = _only_choice(chunk, "derender_completion_stream", with_count=False)
    codec, server = _codec(settings), _server_fingerprint(settings)
    request_key = request_fingerprint(chunk.request_id if "request_id" in chunk.model_fields_set else None)
    completion_request = req.completion_request
    state = None
    if req.stream_state is not None:
        state = codec.decode(req.stream_state, kind="cmpl", server=server, request=request_key)
        request_key = request_key or state.request
        _check_index(state, choice)
    choices = []
    try:
        if state is None:
            seed = req.prompt_token_ids if req.prompt_token_ids is not None else chunk.prompt_token_ids
            derenderer = CompletionStreamDerenderer.start(settings, completion_request, seed)
        else:
            derenderer = CompletionStreamDerenderer.from_state(settings, completion_request, state)
        if choice is not None:
            out = derenderer.step(choice.index, choice.token_ids, choice.finish_reason, choice.stop_reason,
                                  choice.logprobs.content_dicts() if choice.logprobs is not None else None,
                                  choice.logprobs is not None, chunk.prompt_token_ids)
            if out is not None:
                choices.append(out)
    except (OverflowError, ValueError) as exc:  # ids past u32 (vLLM: the tokenizer's message, 400)
        raise bad_request(str(exc)) from None
    body = output.completion_chunk(chunk.request_id, created if created is not None else int(time.time()),
                                   req.model or model.name, choices,
                                   output.stream_usage(chunk.usage, req.prompt_tokens),
                                   chunk.metrics.model_dump() if chunk.metrics is not None else None)
    return {"chunk": body, "stream_state": codec.encode(derenderer.to_state(server, request_key))}
