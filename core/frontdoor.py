"""The front door's per-choice derender and its output in `vllm serve`'s exact shapes.

`/v1/chat/completions` and `/v1/completions` run render -> engine -> derender in one hop. This
module is the derender half, sans-IO: one `ChoiceDecoder` per choice index turns engine chunks
(token ids, finish_reason, stop_reason, logprobs) into text with the same pieces as the derender
endpoints (`core.derender.choice` for the text, `core.logprobs`, `core.parsers.pipeline`), and
the builders below wrap that text in the JSON that vLLM's coupled OpenAI server writes (the
derender endpoints write vLLM's derender shapes instead, which differ: full dumps, role inside
the first delta):

* streamed chunks are what vLLM dumps with `exclude_unset=True`: only the fields it sets (e.g.
  `"kv_transfer_params":null` on every token chunk, `stop_reason` only on the finishing one, a
  delta with only the keys the parser produced), the first chunk per choice carries
  `{"role":"assistant","content":""}`, the usage-only chunk is dumped without nulls;
* non-streamed responses are full dumps (every field, nulls included).

Stop strings (spec 0.3) never reach the engine: the decoder matches them in the decoded text,
holding back only the shortest ambiguous tail, cuts, and reports `finish_reason:"stop"` with the
string as `stop_reason`; the caller then aborts the engine request. Per chunk the work is
O(new tokens); nothing here builds a pydantic model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.derender.choice import ChoiceDecoder as TextDecoder
from core.derender.choice import DecodeOptions as TextOptions
from core.logprobs import (
    TokenTexts, chat_top_limit, completion_logprobs, completion_top_limit, context_tail, normalize_content,
    resolve_chat_logprobs,
)
from core.model import ModelInfo
from core.stop import normalize_stop


@dataclass
class DecodeOptions:
    """What one request asks of the derender, read once from the request and its sampling params."""

    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    stop: list[str] = field(default_factory=list)
    include_stop_str_in_output: bool = False
    min_tokens: int = 0
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    top_limit: int | None = None  # logprob candidates kept per position (None: all)
    logprobs: bool = False
    completion_logprobs: bool = False  # completions' flat shape instead of chat's

    @classmethod
    def from_sampling(cls, sampling: dict[str, Any], *, stop: Any, chat: bool, request: Any) -> DecodeOptions:
        """From the rendered sampling_params (which carry the parser's adjustments) and the request."""
        skip = sampling.get("skip_special_tokens", True) is not False
        spaces = sampling.get("spaces_between_special_tokens", True) is not False or skip
        if chat:
            wants = bool(getattr(request, "logprobs", False))
            limit = chat_top_limit(wants, getattr(request, "top_logprobs", None),
                                   getattr(request, "logprob_token_ids", None))
        else:
            wants = getattr(request, "logprobs", None) is not None
            limit = completion_top_limit(getattr(request, "logprobs", None),
                                         getattr(request, "logprob_token_ids", None))
        return cls(skip_special_tokens=skip, spaces_between_special_tokens=spaces, stop=normalize_stop(stop),
                   include_stop_str_in_output=bool(sampling.get("include_stop_str_in_output")),
                   min_tokens=int(sampling.get("min_tokens") or 0),
                   stop_token_ids=tuple(sampling.get("stop_token_ids") or ()),
                   ignore_eos=bool(sampling.get("ignore_eos")), top_limit=limit, logprobs=wants,
                   completion_logprobs=not chat)

    def text_options(self) -> TextOptions:
        """The text decoder's knobs (the derender endpoints' `ChoiceDecoder` does the decoding)."""
        return TextOptions(skip_special_tokens=self.skip_special_tokens,
                           spaces_between_special_tokens=self.spaces_between_special_tokens,
                           stop=tuple(self.stop), include_stop_str_in_output=self.include_stop_str_in_output,
                           min_tokens=self.min_tokens, ignore_eos=self.ignore_eos,
                           stop_token_ids=tuple(self.stop_token_ids))


@dataclass
class Step:
    """One engine chunk of one choice, derendered."""

    text: str  # new text (stop token dropped, stop strings held back / cut)
    token_ids: list[int]  # the chunk's ids that count (up to a stop-string cut)
    finish_reason: str | None
    stop_reason: int | str | None
    logprobs: dict[str, Any] | None  # chat or completion shape, per DecodeOptions
    had_output: bool = False  # tokens had arrived before this chunk


class ChoiceDecoder:
    """Engine chunks of one choice -> text, token counts and logprobs.

    The text itself (stop token drop, incremental detokenizer, stop strings held back and cut,
    min_tokens) is the derender endpoints' `core.derender.choice.ChoiceDecoder`; this adds what
    the front door needs around it: usage counts, logprobs per chunk, and `vllm serve`'s
    stop_reason for the tokenizer EOS.
    """

    __slots__ = ("model", "opts", "text", "num_tokens", "finished", "_lp_context", "_texts", "_text_offset",
                 "_primary_eos")

    def __init__(self, model: ModelInfo, opts: DecodeOptions, prompt_token_ids: Sequence[int] | None) -> None:
        self.model = model
        self.opts = opts
        self.text = TextDecoder.start(model, opts.text_options(), prompt_token_ids)
        self.num_tokens = 0  # engine tokens counted for this choice (usage)
        self.finished = False
        self._lp_context: list[int] = []
        self._texts = TokenTexts.of(model.tokenizer) if opts.logprobs else None
        self._text_offset = 0
        self._primary_eos = model.primary_eos_token_id

    def step(self, token_ids: Sequence[int], finish_reason: str | None, stop_reason: int | str | None,
             logprobs: dict[str, Any] | None = None) -> Step | None:
        """Derender one chunk; None once the choice has finished (late chunks after a cut)."""
        if self.finished:
            return None
        had_output = self.num_tokens > 0
        step = self.text.step(token_ids, finish_reason, stop_reason)
        ids = list(step.used_ids)  # up to a stop-string cut
        self.num_tokens += len(ids)
        stop_reason = step.stop_reason
        if stop_reason == self._primary_eos and stop_reason not in self.opts.stop_token_ids \
                and step.finish_reason == "stop":
            # a tokens-only engine has no tokenizer EOS and reports it as a stop token id; the
            # coupled `vllm serve` stops on the tokenizer's EOS with stop_reason null (spec 2.3)
            stop_reason = None
        if step.finished:
            self.finished = True
        return Step(step.text, ids, step.finish_reason, stop_reason, self._logprobs(ids, logprobs), had_output)

    def shift_text_offset(self, offset: int) -> None:
        """Completion logprob offsets start here (after an echoed prompt)."""
        self._text_offset = offset

    def _logprobs(self, ids: list[int], logprobs: dict[str, Any] | None) -> dict[str, Any] | None:
        if self._texts is None:
            return None
        content = normalize_content((logprobs or {}).get("content"))
        if content is not None and len(content) > len(ids):
            content = content[:len(ids)]  # a stop-string cut drops the later positions
        chat = resolve_chat_logprobs(self._texts, content, self.opts.top_limit, self._lp_context)
        self._lp_context = context_tail(self._lp_context, ids)
        if not self.opts.completion_logprobs:
            return chat
        out = completion_logprobs(chat, content, self._text_offset)
        if out["tokens"]:
            self._text_offset = out["text_offset"][-1] + len(out["tokens"][-1])
        return out


# -- chat ---------------------------------------------------------------------------------------

def delta_message(parsed: dict[str, Any], reasoning_field: str) -> dict[str, Any]:
    """A parser delta ({reasoning, content, tool_calls}) as vLLM's DeltaMessage with exclude_unset."""
    out: dict[str, Any] = {}
    content = parsed.get("content")
    reasoning = parsed.get("reasoning")
    if content is not None:
        out["content"] = content
    if reasoning is not None:
        if reasoning_field != "reasoning_content":
            out["reasoning"] = reasoning
        if reasoning_field != "reasoning":
            out["reasoning_content"] = reasoning
    calls = parsed.get("tool_calls")
    if calls:
        out["tool_calls"] = [tool_call_delta(c) for c in calls]
    return out


def tool_call_delta(call: dict[str, Any]) -> dict[str, Any]:
    """DeltaToolCall in declaration order (id, type, index, function), only the parts that are set."""
    out: dict[str, Any] = {}
    if call.get("id") is not None:
        out["id"] = call["id"]
    if call.get("type") is not None:
        out["type"] = call["type"]
    out["index"] = call["index"]
    function = call.get("function")
    if function is not None:
        fn: dict[str, Any] = {}
        if function.get("name") is not None:
            fn["name"] = function["name"]
        args = function.get("arguments")
        if args is not None and (args != "" or "name" not in fn):
            fn["arguments"] = args
        out["function"] = fn
    return out


def message_fields(reasoning: str | None, reasoning_field: str) -> dict[str, Any]:
    if reasoning_field == "reasoning":
        return {"reasoning": reasoning}
    if reasoning_field == "reasoning_content":
        return {"reasoning_content": reasoning}
    return {"reasoning": reasoning, "reasoning_content": reasoning}


def chat_message(role: str, content: str | None, reasoning: str | None, tool_calls: list[dict[str, Any]],
                 reasoning_field: str) -> dict[str, Any]:
    """ChatMessage, full dump: tool_calls only when non-empty, reasoning last."""
    message: dict[str, Any] = {"role": role, "content": content, "refusal": None, "annotations": None,
                               "audio": None, "function_call": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    message.update(message_fields(reasoning, reasoning_field))
    return message


def usage_full(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens, "prompt_tokens_details": None,
            "completion_tokens_details": None}


def usage_short(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens}


def chat_chunk(request_id: str, created: int, model: str, choice: dict[str, Any],
               usage: dict[str, Any] | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"id": request_id, "object": "chat.completion.chunk", "created": created,
                             "model": model, "choices": [choice]}
    if usage is not None:
        chunk["usage"] = usage
    chunk["kv_transfer_params"] = None
    return chunk


def chat_role_chunk(request_id: str, created: int, model: str, index: int, role: str,
                    prompt_token_ids: list[int] | None, usage: dict[str, Any] | None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"id": request_id, "object": "chat.completion.chunk", "created": created,
                             "model": model, "choices": [{"index": index, "delta": {"role": role, "content": ""},
                                                          "logprobs": None, "finish_reason": None}]}
    if usage is not None:
        chunk["usage"] = usage
    chunk["prompt_token_ids"] = prompt_token_ids
    chunk["prompt_text"] = None
    return chunk


def chat_echo_chunk(request_id: str, created: int, model: str, index: int, text: str,
                    usage: dict[str, Any] | None) -> dict[str, Any]:
    """The chunk that echoes the last message (chat `echo`), sent after the role chunks."""
    chunk: dict[str, Any] = {"id": request_id, "object": "chat.completion.chunk", "created": created,
                             "model": model, "choices": [{"index": index, "delta": {"content": text},
                                                          "logprobs": None, "finish_reason": None}]}
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def chat_continuous_usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens, "completion_tokens_details": None}


def stream_choice(index: int, delta: dict[str, Any], logprobs: dict[str, Any] | None, finish_reason: str | None,
                  stop_reason: int | str | None, token_ids: list[int] | None) -> dict[str, Any]:
    """ChatCompletionResponseStreamChoice as vLLM sets it (stop_reason and weight_versions only at the end)."""
    if finish_reason is None:
        return {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": None,
                "token_ids": token_ids}
    return {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason,
            "stop_reason": stop_reason, "token_ids": token_ids, "weight_versions": None}


def usage_chunk(request_id: str, created: int, model: str, object_name: str, prompt_tokens: int,
                completion_tokens: int) -> dict[str, Any]:
    return {"id": request_id, "object": object_name, "created": created, "model": model, "choices": [],
            "usage": usage_short(prompt_tokens, completion_tokens)}


def chat_response(request_id: str, created: int, model: str, choices: list[dict[str, Any]], prompt_tokens: int,
                  completion_tokens: int, prompt_token_ids: list[int] | None,
                  prompt_logprobs: list[Any] | None = None) -> dict[str, Any]:
    return {"id": request_id, "object": "chat.completion", "created": created, "model": model,
            "choices": choices, "service_tier": None, "system_fingerprint": None,
            "usage": usage_full(prompt_tokens, completion_tokens), "prompt_logprobs": prompt_logprobs,
            "prompt_token_ids": prompt_token_ids, "prompt_text": None, "kv_transfer_params": None,
            "ec_transfer_params": None, "metrics": None}


def chat_response_choice(index: int, message: dict[str, Any], logprobs: dict[str, Any] | None,
                         finish_reason: str | None, stop_reason: int | str | None,
                         token_ids: list[int] | None) -> dict[str, Any]:
    return {"index": index, "message": message, "logprobs": logprobs, "finish_reason": finish_reason,
            "stop_reason": stop_reason, "token_ids": token_ids, "routed_experts": None, "weight_versions": None}


# -- completions ----------------------------------------------------------------------------------

def completion_chunk(request_id: str, created: int, model: str, index: int, text: str,
                     logprobs: dict[str, Any] | None, finish_reason: str | None, stop_reason: int | str | None,
                     prompt_token_ids: list[int] | None, token_ids: list[int] | None,
                     usage: dict[str, Any] | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": request_id, "object": "text_completion", "created": created, "model": model,
        "choices": [{"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason,
                     "stop_reason": stop_reason, "prompt_token_ids": prompt_token_ids, "token_ids": token_ids,
                     "weight_versions": None}]}
    if usage is not None:
        chunk["usage"] = usage
    chunk["kv_transfer_params"] = None
    return chunk


def completion_response_choice(index: int, text: str, logprobs: dict[str, Any] | None, finish_reason: str | None,
                               stop_reason: int | str | None, token_ids: list[int] | None,
                               prompt_token_ids: list[int] | None) -> dict[str, Any]:
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason,
            "stop_reason": stop_reason, "token_ids": token_ids, "prompt_logprobs": None,
            "prompt_token_ids": prompt_token_ids, "routed_experts": None, "weight_versions": None}


def completion_response(request_id: str, created: int, model: str, choices: list[dict[str, Any]],
                        prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"id": request_id, "object": "text_completion", "created": created, "model": model,
            "choices": choices, "service_tier": None, "system_fingerprint": None,
            "usage": usage_full(prompt_tokens, completion_tokens), "kv_transfer_params": None,
            "ec_transfer_params": None, "metrics": None}


def echo_logprobs(model: ModelInfo, prompt_token_ids: Sequence[int], prompt_logprobs: list[Any] | None,
                  top_limit: int | None) -> dict[str, Any]:
    """Completion logprobs of the echoed prompt (text_offset from 0), as vllm serve puts them first.

    Values come from the engine's `prompt_logprobs` ([None, {"<id>": {"logprob", "rank", ...}}, ...])
    when it sent them (non-streamed answers); otherwise, and for the first position, they are null."""
    texts = TokenTexts.of(model.tokenizer)
    offsets: list[int] = []
    tokens: list[str] = []
    values: list[float | None] = []
    tops: list[dict[str, float] | None] = []
    offset = 0
    context: list[int] = []
    for pos, tid in enumerate(prompt_token_ids):
        token = texts.get(tid)[0]
        if token.endswith("\ufffd"):
            token = texts.repair(tid, context)
        entry = prompt_logprobs[pos] if prompt_logprobs is not None and pos < len(prompt_logprobs) else None
        candidates = entry if isinstance(entry, dict) else None
        sampled = candidates.get(str(tid)) if candidates else None
        offsets.append(offset)
        tokens.append(token)
        values.append(sampled.get("logprob") if isinstance(sampled, dict) else None)
        if candidates:
            ranked = list(candidates.items()) if top_limit is None else list(candidates.items())[:top_limit]
            tops.append({texts.get(int(k))[0]: v.get("logprob") for k, v in ranked if isinstance(v, dict)})
        else:
            tops.append(None)
        offset += len(token)
        context = (context + [tid])[-4:]
    return {"text_offset": offsets, "token_logprobs": values, "tokens": tokens, "top_logprobs": tops}


def merge_logprobs(parts: list[dict[str, Any] | None], completion: bool) -> dict[str, Any] | None:
    """Concatenate per-chunk logprobs (for a non-streamed answer assembled from a stream)."""
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


# -- per-choice streams (what the loop calls per engine chunk) ------------------------------------

def _merge_parsed(first: dict[str, Any] | None, second: dict[str, Any] | None) -> dict[str, Any] | None:
    """Join a feed() delta and a finish() delta of the same chunk into one."""
    if first is None:
        return second
    if second is None:
        return first
    out = dict(first)
    for key in ("reasoning", "content"):
        if second.get(key) is not None:
            out[key] = (out.get(key) or "") + second[key]
    calls = [dict(c) for c in first.get("tool_calls") or []]
    for call in second.get("tool_calls") or []:
        last = calls[-1] if calls else None
        fn = call.get("function") or {}
        if (last is not None and last["index"] == call["index"] and set(call) <= {"index", "function"}
                and set(fn) <= {"arguments"}):
            last_fn = dict(last.get("function") or {})
            last_fn["arguments"] = (last_fn.get("arguments") or "") + (fn.get("arguments") or "")
            last["function"] = last_fn
        else:
            calls.append(call)
    out["tool_calls"] = calls
    return out


class ChatChoiceStream:
    """One chat choice of a stream: engine chunk -> the `choices[0]` of a chat.completion.chunk.

    Mirrors vLLM's ChatStreamProcessor: the plain path sends every chunk (`{"content": text}`,
    possibly empty); the parser path sends only deltas the parser produced, unless the chunk
    finishes the choice or carries logprobs / token_ids the client asked for.
    """

    __slots__ = ("index", "decoder", "parser", "pstate", "reasoning_field", "return_token_ids", "hide_metadata",
                 "engine_done", "text", "token_ids", "logprob_parts", "finish_reason", "stop_reason")

    def __init__(self, index: int, model: ModelInfo, opts: DecodeOptions, prompt_token_ids: Sequence[int],
                 parser: Any, *, reasoning_field: str = "reasoning", return_token_ids: bool = False,
                 include_reasoning: bool = True) -> None:
        self.index = index
        self.decoder = ChoiceDecoder(model, opts, prompt_token_ids)
        self.parser = parser
        self.pstate = parser.start(prompt_token_ids) if parser is not None else None
        self.reasoning_field = reasoning_field
        self.return_token_ids = return_token_ids
        self.hide_metadata = parser is not None and not include_reasoning
        self.engine_done = False  # the engine sent this choice's finish (no abort needed)
        # aggregates, for a non-streamed answer built from the same steps
        self.text: list[str] = []
        self.token_ids: list[int] = []
        self.logprob_parts: list[dict[str, Any] | None] = []
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None

    @property
    def finished(self) -> bool:
        return self.decoder.finished

    def _step(self, choice: dict[str, Any]) -> Step | None:
        finish = choice.get("finish_reason")
        if finish is not None:
            self.engine_done = True
        step = self.decoder.step(choice.get("token_ids") or (), finish, choice.get("stop_reason"),
                                 choice.get("logprobs"))
        if step is not None and step.finish_reason is not None:
            self.finish_reason, self.stop_reason = step.finish_reason, step.stop_reason
        return step

    def collect(self, choice: dict[str, Any]) -> None:
        """Non-streamed answers: only accumulate (the parser runs once at the end)."""
        step = self._step(choice)
        if step is not None:
            self.text.append(step.text)
            self.token_ids.extend(step.token_ids)
            self.logprob_parts.append(step.logprobs)

    def step(self, choice: dict[str, Any]) -> dict[str, Any] | None:
        """Streamed answers: the chunk's choice, or None when there is nothing to send."""
        step = self._step(choice)
        if step is None:
            return None
        finish = step.finish_reason
        parser = self.parser
        if parser is None:
            delta: dict[str, Any] | None = {"content": step.text}
        elif not step.text and not step.token_ids and not step.had_output:
            delta = {}  # finished without output: the final chunk goes out unparsed
        else:
            parsed = parser.feed(self.pstate, step.text, step.token_ids) if (step.text or step.token_ids) else None
            if finish is not None:
                parsed = _merge_parsed(parsed, parser.finish(self.pstate))
            delta = delta_message(parsed, self.reasoning_field) if parsed else None
        if finish is not None and parser is not None:
            finish = parser.finish_reason(self.pstate, finish)
            self.finish_reason = finish
        logprobs = None if self.hide_metadata else step.logprobs
        include_ids = self.return_token_ids and not self.hide_metadata
        if delta is None:
            if finish is None and logprobs is None and not include_ids:
                return None
            delta = {}
        return stream_choice(self.index, delta, logprobs, finish, step.stop_reason,
                             step.token_ids if include_ids else None)

    def response_choice(self, role: str, prompt_token_ids: Sequence[int], echo_prefix: str | None = None
                        ) -> dict[str, Any]:
        """The non-streamed choice from the accumulated output (vLLM's non-streaming parse)."""
        text = "".join(self.text)
        finish = self.finish_reason or "stop"
        parser = self.parser
        if parser is None:
            reasoning, content, calls = None, text, []
        else:
            reasoning, content, calls = parser.parse_complete(text, self.token_ids, prompt_token_ids)
            if calls and finish == "stop" and parser.choice != "named":
                finish = "tool_calls"
        if echo_prefix:
            content = echo_prefix + (content or "")
        logprobs = None if self.hide_metadata else merge_logprobs(self.logprob_parts, completion=False)
        include_ids = self.return_token_ids and not self.hide_metadata
        return chat_response_choice(self.index, chat_message(role, content, reasoning, calls, self.reasoning_field),
                                    logprobs, finish, self.stop_reason, list(self.token_ids) if include_ids else None)


class CompletionChoiceStream:
    """One completions choice: engine chunk -> `choices[0]` of a text_completion chunk."""

    __slots__ = ("index", "decoder", "return_token_ids", "echo_text", "echo_only", "engine_done", "started",
                 "text", "token_ids", "logprob_parts", "finish_reason", "stop_reason", "prompt_token_ids",
                 "prompt_logprobs", "model")

    def __init__(self, index: int, model: ModelInfo, opts: DecodeOptions, prompt_token_ids: list[int], *,
                 return_token_ids: bool = False, echo_text: str | None = None, echo_only: bool = False) -> None:
        self.index = index
        self.decoder = ChoiceDecoder(model, opts, prompt_token_ids)
        self.return_token_ids = return_token_ids
        self.prompt_token_ids = prompt_token_ids
        self.echo_text = echo_text  # not None with echo: sent before the first generated text
        # echo with max_tokens 0: the engine generates one token (spec 2.2) that vLLM does not show
        self.echo_only = echo_only
        self.model = model
        # the engine's, from a non-streamed answer (a streamed echo fetches them first: see
        # `wants_prompt_logprobs`); None leaves the echoed prompt's logprob values null
        self.prompt_logprobs: list[Any] | None = None
        self.engine_done = False
        self.started = False
        self.text: list[str] = []
        self.token_ids: list[int] = []
        self.logprob_parts: list[dict[str, Any] | None] = []
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None

    @property
    def finished(self) -> bool:
        return self.decoder.finished

    @property
    def wants_prompt_logprobs(self) -> bool:
        """Echo with logprobs: the first chunk carries the prompt's logprobs, which a tokens-only
        engine sends only in a non-streamed answer, so they must be fetched before streaming."""
        return self.echo_text is not None and self.decoder.opts.logprobs

    def _echo_logprobs(self) -> dict[str, Any] | None:
        """The echoed prompt's part of the logprobs (None without echo or logprobs)."""
        if self.echo_text is None or not self.decoder.opts.logprobs:
            return None
        part = echo_logprobs(self.model, self.prompt_token_ids, self.prompt_logprobs, self.decoder.opts.top_limit)
        if part["tokens"]:  # the generated tokens' offsets continue after the echoed text
            self.decoder.shift_text_offset(part["text_offset"][-1] + len(part["tokens"][-1]))
        return part

    def _step(self, choice: dict[str, Any]) -> tuple[Step, bool] | None:
        finish = choice.get("finish_reason")
        if finish is not None:
            self.engine_done = True
        first = not self.started
        self.started = True
        if first and self.echo_text is not None:
            self.logprob_parts.append(self._echo_logprobs())
        step = self.decoder.step(choice.get("token_ids") or (), finish, choice.get("stop_reason"),
                                 choice.get("logprobs"))
        if step is None:
            return None
        if step.finish_reason is not None:
            self.finish_reason, self.stop_reason = step.finish_reason, step.stop_reason
        return step, first

    def collect(self, choice: dict[str, Any]) -> None:
        result = self._step(choice)
        if result is not None:
            step = result[0]
            self.text.append(step.text)
            self.token_ids.extend(step.token_ids)
            self.logprob_parts.append(step.logprobs)

    def chunk(self, choice: dict[str, Any], request_id: str, created: int, model: str,
              continuous_usage_prompt: int | None) -> dict[str, Any] | None:
        result = self._step(choice)
        if result is None:
            return None
        step, first = result
        text = "" if self.echo_only else step.text
        logprobs = step.logprobs
        prompt_ids = None
        if first:
            if self.echo_text is not None:
                text = self.echo_text + text
                echoed = self.logprob_parts.pop() if self.logprob_parts else None
                if echoed is not None:
                    logprobs = merge_logprobs([echoed, None if self.echo_only else logprobs], completion=True)
            if self.return_token_ids:
                prompt_ids = self.prompt_token_ids
        elif not text and not step.token_ids and step.finish_reason is None:
            return None
        usage = None
        if continuous_usage_prompt is not None:
            usage = usage_short(continuous_usage_prompt, self.decoder.num_tokens)
        return completion_chunk(request_id, created, model, self.index, text, logprobs, step.finish_reason,
                                step.stop_reason, prompt_ids, step.token_ids if self.return_token_ids else None,
                                usage)

    def response_choice(self) -> dict[str, Any]:
        text = "" if self.echo_only else "".join(self.text)
        parts = self.logprob_parts
        if self.echo_text is not None:
            text = self.echo_text + text
            if self.echo_only:
                parts = parts[:1]  # the echoed prompt only
        choice = completion_response_choice(
            self.index, text, merge_logprobs(parts, completion=True), self.finish_reason,
            self.stop_reason, list(self.token_ids) if self.return_token_ids else None,
            self.prompt_token_ids if self.return_token_ids else None)
        choice["prompt_logprobs"] = self.prompt_logprobs
        return choice
