"""The one per-choice derender machine: engine chunks of one choice -> neutral events.

Every output goes through `ChoiceDerender`: the front door's chat and completion streams and
non-streamed answers, the raw `/derender` endpoints (its state rides in `stream_state`), and the
Responses and Messages APIs. It owns every rule that decides what a choice says:

* text: stop token, incremental detokenizer, stop strings held back and cut, min_tokens
  (`core.derender.text`);
* parsing: reasoning / content / tool-call deltas, the parser's finish flush merged into the
  finishing chunk (`merge_deltas`, the one merge), the `tool_calls` finish rule;
* metadata: logprobs sliced to the ids kept (a stop-string cut drops later positions), resolved
  in the chat or completion shape with the byte-fallback context and text offsets carried;
  the ids kept; output token counts;
* the cap: past the engine's `max_tokens` the choice ends with "length" whatever the engine does.

`step` emits a `ChoiceEvent` per engine chunk (streams); `collect` + `result` build the
non-streamed answer by vLLM's non-streaming parse, so a stream and its non-streamed answer share
every rule but the parse (whose agreement is property-tested per parser family). The output
shapes are the adapters' business (`core.derender.adapters`). Per step the work is O(new tokens)
(plus, with a parser, the current tool call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from core.derender.spec import OutputSpec
from core.derender.text import TextDecoder, TextStep, decode_complete
from core.logprobs import (CONTEXT_WINDOW, TokenTexts, completion_logprobs, normalize_content,
                           resolve_chat_logprobs)

_NO_IDS: tuple[int, ...] = ()
_NO_CALLS: list[dict[str, Any]] = []  # shared and never mutated: most events carry no call


def merge_deltas(first: dict[str, Any] | None, second: dict[str, Any] | None) -> dict[str, Any] | None:
    """Join two parser deltas of one chunk (a feed and the finish flush): texts concatenated, an
    argument fragment of the call the first ended with appended to it."""
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


def merge_logprobs(parts: Sequence[dict[str, Any] | None], completion: bool) -> dict[str, Any] | None:
    """Concatenate per-chunk logprobs of one shape (None when no part has any)."""
    present = [p for p in parts if p is not None]
    if not present:
        return None
    if completion:
        merged: dict[str, list] = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
        for part in present:
            for key in merged:
                merged[key].extend(part[key])
        return merged
    content: list[Any] = []
    for part in present:
        content.extend(part.get("content") or [])
    return {"content": content}


class ChoiceEvent(NamedTuple):
    """What one engine chunk of one choice says, before any API's shape (a tuple: one is built
    per chunk and choice, on the hot path).

    `content` is the plain text without a parser (possibly "": the chunk completed no character),
    the parser's content delta (or None) with one. `stop_reason` is the engine's (or the matched
    stop string); `eos_stop` says it is the tokenizer's own EOS, which `vllm serve` reports as null."""

    index: int
    first: bool                       # the choice's first event (role, echo, prompt ids go here)
    text: str                         # the decoded text of this chunk
    reasoning: str | None
    content: str | None
    tool_calls: list[dict[str, Any]]  # tool-call deltas: the first of a call has id, type and name
    parsed: bool                      # a parser produced reasoning / content / tool_calls
    token_ids: Sequence[int] | None   # the chunk's ids kept (None: the engine chunk had none)
    logprobs: dict[str, Any] | None   # in the spec's shape; None when not asked for or hidden
    finish_reason: str | None
    stop_reason: int | str | None
    eos_stop: bool
    num_tokens: int                   # output tokens of the choice so far

    @property
    def serve_stop_reason(self) -> int | str | None:
        """`vllm serve` stops on the tokenizer's EOS with stop_reason null (a tokens-only engine
        reports it as a stop token id: docs/vllm-wire-spec.md §2.3)."""
        return None if self.eos_stop else self.stop_reason


# NamedTuple's own constructor is a Python function; building the tuple directly costs a third
_event = tuple.__new__


class ChoiceResult:
    """A whole choice: the non-streamed answer's parts, before any API's shape."""

    __slots__ = ("index", "text", "reasoning", "content", "tool_calls", "token_ids", "logprobs", "finish_reason",
                 "stop_reason", "eos_stop", "num_tokens")

    def __init__(self, index: int, text: str, reasoning: str | None, content: str | None,
                 tool_calls: list[dict[str, Any]], token_ids: list[int], logprobs: dict[str, Any] | None,
                 finish_reason: str | None, stop_reason: int | str | None, eos_stop: bool, num_tokens: int) -> None:
        self.index = index
        self.text = text                # the decoded text (completions; chat without a parser)
        self.reasoning = reasoning
        self.content = content
        self.tool_calls = tool_calls    # complete calls: {"id", "type": "function", "function": {name, arguments}}
        self.token_ids = token_ids
        self.logprobs = logprobs
        self.finish_reason = finish_reason
        self.stop_reason = stop_reason
        self.eos_stop = eos_stop
        self.num_tokens = num_tokens

    @property
    def serve_stop_reason(self) -> int | str | None:
        return None if self.eos_stop else self.stop_reason


class ChoiceDerender:
    """One choice's derender: live objects (decoder, parser state), driven one engine chunk at a
    time. Cheap to build; `state()` / `restore()` carry it through `stream_state`."""

    __slots__ = ("spec", "index", "text", "parser_state", "started", "logprob_context", "logprob_offset",
                 "output_tokens", "engine_done", "_texts", "_pieces", "_text_ids", "_kept_ids", "_logprob_parts",
                 "_finish", "_stop_reason", "_no_logprobs")

    def __init__(self, spec: OutputSpec, index: int, text: TextDecoder, parser_state: dict[str, Any] | None = None,
                 *, started: bool = False, logprob_context: Sequence[int] = (), logprob_offset: int = 0,
                 output_tokens: int = 0) -> None:
        self.spec = spec
        self.index = index
        self.text = text
        self.parser_state = parser_state
        self.started = started                  # an event was emitted (the role went out)
        self.logprob_context = list(logprob_context)  # last sampled ids, for byte-fallback repair
        self.logprob_offset = logprob_offset    # completions' text_offset of the next position
        self.output_tokens = output_tokens
        self.engine_done = False                # the engine finished it (no abort needed)
        self._texts = TokenTexts.of(spec.settings.model.tokenizer)
        # the non-streamed answer's parts (collect)
        self._pieces: list[str] = []
        self._text_ids: list[int] = []
        self._kept_ids: list[int] = []
        self._logprob_parts: list[dict[str, Any] | None] = []
        self._finish: str | None = None
        self._stop_reason: int | str | None = None
        self._no_logprobs = not spec.logprobs and not spec.completion_logprobs  # read on every chunk

    @classmethod
    def start(cls, spec: OutputSpec, index: int, prompt_token_ids: Sequence[int] | None,
              logprob_offset: int = 0) -> ChoiceDerender:
        parser = spec.parser
        return cls(spec, index, TextDecoder.start(spec.settings.model, spec.text, prompt_token_ids),
                   parser.start(prompt_token_ids) if parser is not None else None, logprob_offset=logprob_offset)

    @property
    def finished(self) -> bool:
        return self.text.done

    # -- one engine chunk ---------------------------------------------------------------------

    def _decode(self, token_ids: Sequence[int] | None, finish_reason: str | None, stop_reason: int | str | None,
                logprobs: list[dict[str, Any]] | None, has_logprobs: bool
                ) -> tuple[TextStep, Sequence[int] | None, dict[str, Any] | None]:
        """The text stage and the metadata of one chunk: (text step, ids kept, logprobs)."""
        if finish_reason is not None:
            self.engine_done = True
        ids: Sequence[int] = token_ids or _NO_IDS
        spec = self.spec
        cap = spec.max_tokens
        if cap is not None and finish_reason is None and self.output_tokens + len(ids) > cap:
            # the engine went past its max_tokens: end here, as it should have (the caller aborts it)
            ids = ids[:max(0, cap - self.output_tokens)]
            finish_reason, stop_reason = "length", None
        step = self.text.step(ids, finish_reason, stop_reason)
        kept = step[2]
        self.output_tokens += kept
        whole = kept == len(ids)
        kept_ids = None if token_ids is None else ids if whole else ids[:kept]
        resolved = None
        wants = spec.logprobs
        if (wants or (wants is None and has_logprobs)) and not spec.hide_metadata:
            content = logprobs if logprobs is None or kept >= len(logprobs) else logprobs[:kept]
            resolved = resolve_chat_logprobs(self._texts, content, spec.top_limit, self.logprob_context)
            if spec.completion_logprobs:
                resolved = completion_logprobs(resolved, content, self.logprob_offset)
                if resolved["tokens"]:
                    self.logprob_offset = resolved["text_offset"][-1] + len(resolved["tokens"][-1])
                else:
                    self.logprob_offset += len(step[0])
        elif spec.completion_logprobs:
            self.logprob_offset += len(step[0])
        if kept:
            context = self.logprob_context
            context.extend(ids if whole else ids[:kept])
            if len(context) > CONTEXT_WINDOW:
                del context[:-CONTEXT_WINDOW]
        return step, kept_ids, resolved

    def _eos_stop(self, finish_reason: str | None, stop_reason: int | str | None) -> bool:
        model = self.spec.settings.model
        return (finish_reason == "stop" and stop_reason is not None and stop_reason == model.primary_eos_token_id
                and stop_reason not in self.spec.text.stop_token_ids)

    def step(self, token_ids: Sequence[int] | None, finish_reason: str | None, stop_reason: int | str | None,
             logprobs: list[dict[str, Any]] | None = None, has_logprobs: bool = False) -> ChoiceEvent | None:
        """One engine chunk (streams) -> its event; None once the choice has ended (a stop string or
        the cap ended it before the engine did: later chunks are dropped). `logprobs` is the chunk's
        normalized `logprobs.content`; `has_logprobs` whether the chunk had a logprobs object."""
        text_decoder = self.text
        if text_decoder.done:
            return None
        spec = self.spec
        cap = spec.max_tokens
        if (finish_reason is None and token_ids and self._no_logprobs and not has_logprobs
                and (cap is None or self.output_tokens + len(token_ids) <= cap)):
            # the common chunk (no finish, no logprobs, within the cap): the text, and the ids kept
            if text_decoder.plain(token_ids):  # (TextDecoder.step's own first case, without its tuple)
                text = text_decoder.detok.feed(token_ids)
                count = len(token_ids)
                text_decoder.decoded += count
                text_ids = kept_ids = token_ids
                finish = stop = None
            else:
                text, text_ids, kept, finish, stop = text_decoder.step_general(token_ids, None, None)
                count = kept
                kept_ids = token_ids if kept == len(token_ids) else token_ids[:kept]
            self.output_tokens += count
            resolved = None
            if count:
                context = self.logprob_context
                context.extend(kept_ids)
                if len(context) > CONTEXT_WINDOW:
                    del context[:-CONTEXT_WINDOW]
        else:
            (text, text_ids, _, finish, stop), kept_ids, resolved = self._decode(
                token_ids, finish_reason, stop_reason, logprobs, has_logprobs)
        first = not self.started
        self.started = True
        parser = spec.parser
        eos = finish is not None and self._eos_stop(finish, stop)
        if parser is None:
            return _event(ChoiceEvent, (self.index, first, text, None, text, _NO_CALLS, False, kept_ids, resolved,
                                        finish, stop, eos, self.output_tokens))
        pstate = self.parser_state
        parsed = parser.feed(pstate, text, text_ids) if (text or text_ids) else None
        if finish is not None:
            parsed = merge_deltas(parsed, parser.finish(pstate))
            finish = parser.finish_reason(pstate, finish)
        if parsed is None:
            return _event(ChoiceEvent, (self.index, first, text, None, None, _NO_CALLS, True, kept_ids, resolved,
                                        finish, stop, eos, self.output_tokens))
        return _event(ChoiceEvent, (self.index, first, text, parsed.get("reasoning"), parsed.get("content"),
                                    parsed.get("tool_calls") or _NO_CALLS, True, kept_ids, resolved, finish, stop, eos,
                                    self.output_tokens))

    def step_engine(self, choice: dict[str, Any]) -> ChoiceEvent | None:
        """`step` for one choice of an engine event, a plain dict (either logprob shape)."""
        logprobs = choice.get("logprobs")
        if logprobs is None:
            return self.step(choice.get("token_ids"), choice.get("finish_reason"), choice.get("stop_reason"))
        return self.step(choice.get("token_ids"), choice.get("finish_reason"), choice.get("stop_reason"),
                         normalize_content(logprobs.get("content")) if isinstance(logprobs, dict) else None, True)

    # -- the non-streamed answer --------------------------------------------------------------

    def collect(self, choice: dict[str, Any]) -> None:
        """Non-streamed answers: accumulate one engine chunk (the parser runs once, in `result`)."""
        if self.text.done:
            return
        logprobs = choice.get("logprobs")
        step, kept_ids, resolved = self._decode(
            choice.get("token_ids"), choice.get("finish_reason"), choice.get("stop_reason"),
            normalize_content(logprobs.get("content")) if isinstance(logprobs, dict) else None, logprobs is not None)
        self._pieces.append(step.text)
        self._text_ids.extend(step.text_ids)
        if kept_ids:
            self._kept_ids.extend(kept_ids)
        self._logprob_parts.append(resolved)
        if step.finish_reason is not None:
            self._finish, self._stop_reason = step.finish_reason, step.stop_reason

    def result(self, prompt_token_ids: Sequence[int] | None) -> ChoiceResult:
        """The collected choice by vLLM's non-streaming rules (the parser sees the whole text)."""
        return self._assemble("".join(self._pieces), self._text_ids, self._kept_ids,
                              merge_logprobs(self._logprob_parts, self.spec.completion_logprobs),
                              self._finish, self._stop_reason, prompt_token_ids)

    @classmethod
    def whole(cls, spec: OutputSpec, index: int, seed_ids: Sequence[int] | None, token_ids: Sequence[int],
              finish_reason: str | None, stop_reason: int | str | None, logprobs: list[dict[str, Any]] | None,
              has_logprobs: bool, parser_prompt_ids: Sequence[int] | None) -> ChoiceResult:
        """A whole output by vLLM's non-streaming derender (docs/vllm-wire-spec.md §2.4, 2.5): the text cut at a stop
        string only when the engine said it stopped, logprobs of every position."""
        choice = cls(spec, index, TextDecoder.start(spec.settings.model, spec.text, ()))
        text, stop_reason = decode_complete(spec.settings.model, spec.text, token_ids, finish_reason, stop_reason,
                                            seed_ids)
        resolved = None
        if has_logprobs and not spec.hide_metadata:
            resolved = resolve_chat_logprobs(choice._texts, logprobs, spec.top_limit)
            if spec.completion_logprobs:
                resolved = completion_logprobs(resolved, logprobs)
        choice.output_tokens = len(token_ids)
        return choice._assemble(text, token_ids, list(token_ids), resolved, finish_reason, stop_reason,
                                parser_prompt_ids)

    def _assemble(self, text: str, text_ids: Sequence[int], kept_ids: list[int], logprobs: dict[str, Any] | None,
                  finish_reason: str | None, stop_reason: int | str | None,
                  prompt_token_ids: Sequence[int] | None) -> ChoiceResult:
        parser = self.spec.parser
        if parser is None:
            reasoning, content, calls = None, text, []
        else:
            reasoning, content, calls = parser.parse_complete(text, text_ids, prompt_token_ids)
        finish = self.spec.resolve_finish(finish_reason, bool(calls))
        return ChoiceResult(self.index, text, reasoning, content, calls, kept_ids, logprobs, finish, stop_reason,
                            self._eos_stop(finish_reason, stop_reason), self.output_tokens)

    # -- stream_state --------------------------------------------------------------------------

    def restore_counters(self, *, started: bool, logprob_context: Sequence[int], logprob_offset: int,
                         output_tokens: int) -> None:
        self.started = started
        self.logprob_context = list(logprob_context)
        self.logprob_offset = logprob_offset
        self.output_tokens = output_tokens
