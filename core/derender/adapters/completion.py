"""`vllm serve`'s text_completion shapes from the one machine's events and results.

Several prompts give `n` choices each, numbered `p * n + i`. With `echo`, a choice's first chunk
starts with its prompt's text, and with logprobs the prompt's logprobs come first (values from the
engine's `prompt_logprobs`, which a tokens-only engine sends only in non-streamed answers: the
proxy fetches them before a stream, see `core.engine_request.prompt_logprobs_body`); echo with
`max_tokens: 0` shows only the prompt (the engine generates one token that is not shown).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.derender.adapters.chat import stream_end, usage_chunk, usage_full, usage_short
from core.derender.adapters.sse import data_event
from core.derender.choice import ChoiceEvent, merge_logprobs
from core.derender.session import DerenderSession
from core.errors import RequestError
from core.logprobs import TokenTexts
from core.model import ModelInfo


def echo_logprobs(model: ModelInfo, prompt_token_ids: Sequence[int], prompt_logprobs: list[Any] | None,
                  top_limit: int | None) -> dict[str, Any]:
    """Completion logprobs of the echoed prompt (text_offset from 0), as vllm serve puts them first.

    Values come from the engine's `prompt_logprobs` ([None, {"<id>": {"logprob", "rank", ...}}, ...])
    when it sent them; otherwise, and for the first position, they are null."""
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


def _end_offset(part: dict[str, Any]) -> int:
    return part["text_offset"][-1] + len(part["tokens"][-1]) if part["tokens"] else 0


class CompletionPrompts:
    """What a completion's prompts add to its output: the engine's prompt logprobs (every choice
    carries its prompt's) and, with `echo`, each prompt's text and logprobs before its output."""

    def __init__(self, model: ModelInfo, prompts: Sequence[Sequence[int]], echo_texts: Sequence[str] | None, *,
                 echo_logprobs: bool, top_limit: int | None, echo_only: bool) -> None:
        self.model = model
        self.prompts = prompts
        self.echo_texts = echo_texts  # None without echo
        self.echo_logprobs = echo_logprobs and echo_texts is not None
        self.top_limit = top_limit
        self.echo_only = echo_only  # echo with max_tokens 0: the prompt is the whole output
        # the engine's, per prompt, from a non-streamed answer (None: not asked, or streamed)
        self.prompt_logprobs: list[list[Any] | None] = [None] * len(prompts)

    def logprob_offsets(self) -> list[int] | None:
        """Where each prompt's generated logprobs start (after its echoed tokens)."""
        if not self.echo_logprobs:
            return None
        return [_end_offset(echo_logprobs(self.model, ids, None, None)) for ids in self.prompts]

    def echoed_logprobs(self, prompt: int) -> dict[str, Any] | None:
        if not self.echo_logprobs:
            return None
        return echo_logprobs(self.model, self.prompts[prompt], self.prompt_logprobs[prompt], self.top_limit)


class CompletionStream:
    """A `text_completion` chunk stream (a `StreamWriter`) for one request's session."""

    def __init__(self, session: DerenderSession, request: Any, *, request_id: str, created: int, model: str,
                 prompts: CompletionPrompts) -> None:
        self.session = session
        self.request_id, self.created, self.model = request_id, created, model
        self.prompts = prompts
        self.prompt_lens = [len(p) for p in session.prompts]
        options = request.stream_options
        self.include_usage = bool(options and options.include_usage)
        self.continuous = self.include_usage and bool(options and options.continuous_usage_stats)

    def head(self) -> list[bytes]:
        return []

    def chunk(self, prompt: int, event: ChoiceEvent) -> dict[str, Any] | None:
        prompts = self.prompts
        return_ids = self.session.spec.return_token_ids
        text = "" if prompts.echo_only else event.text
        logprobs = event.logprobs
        prompt_ids = None
        if event.first:
            if prompts.echo_texts is not None:
                text = prompts.echo_texts[prompt] + text
                echoed = prompts.echoed_logprobs(prompt)
                if echoed is not None:
                    logprobs = merge_logprobs([echoed, None if prompts.echo_only else logprobs], completion=True)
            if return_ids:
                prompt_ids = self.session.prompts[prompt]
        elif not text and not event.token_ids and event.finish_reason is None:
            return None
        chunk: dict[str, Any] = {
            "id": self.request_id, "object": "text_completion", "created": self.created, "model": self.model,
            "choices": [{"index": event.index, "text": text, "logprobs": logprobs,
                         "finish_reason": event.finish_reason, "stop_reason": event.serve_stop_reason,
                         "prompt_token_ids": prompt_ids,
                         "token_ids": (event.token_ids or []) if return_ids else None, "weight_versions": None}]}
        if self.continuous:
            chunk["usage"] = usage_short(self.prompt_lens[prompt], event.num_tokens)
        chunk["kv_transfer_params"] = None
        return chunk

    def feed(self, prompt: int, batch: list[dict[str, Any]]) -> list[bytes]:
        out = []
        for engine_event in batch:
            for event in self.session.feed(prompt, engine_event):
                chunk = self.chunk(prompt, event)
                if chunk is not None:
                    out.append(data_event(chunk))
        return out

    def close(self, error: RequestError | None) -> list[bytes]:
        return stream_end(error, usage_chunk(self.request_id, self.created, self.model, "text_completion",
                                             sum(self.prompt_lens), self.session.completion_tokens)
                          if self.include_usage and error is None else None)


def completion_response(session: DerenderSession, *, request_id: str, created: int, model: str,
                        prompts: CompletionPrompts) -> dict[str, Any]:
    """The non-streamed text_completion, full dump."""
    return_ids = session.spec.return_token_ids
    choices = []
    for result in session.results():
        prompt = result.index // session.n
        text, logprobs = result.text, result.logprobs
        if prompts.echo_texts is not None:
            echoed = prompts.echoed_logprobs(prompt)
            if prompts.echo_only:
                text, logprobs = prompts.echo_texts[prompt], echoed
            else:
                text = prompts.echo_texts[prompt] + text
                logprobs = merge_logprobs([echoed, logprobs], completion=True)
        choices.append({"index": result.index, "text": text, "logprobs": logprobs,
                        "finish_reason": result.finish_reason, "stop_reason": result.serve_stop_reason,
                        "token_ids": result.token_ids if return_ids else None,
                        "prompt_logprobs": prompts.prompt_logprobs[prompt],
                        "prompt_token_ids": session.prompts[prompt] if return_ids else None,
                        "routed_experts": None, "weight_versions": None})
    return {"id": request_id, "object": "text_completion", "created": created, "model": model,
            "choices": choices, "service_tier": None, "system_fingerprint": None,
            "usage": usage_full(sum(len(p) for p in session.prompts), session.completion_tokens),
            "kv_transfer_params": None, "ec_transfer_params": None, "metrics": None}
