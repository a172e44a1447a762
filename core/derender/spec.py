"""What one request asks of the derender (`OutputSpec`), read once per request.

The per-choice machine (`core.derender.choice`) is the same for every API; what differs between
vLLM's two servers is only where the knobs come from, so there is one constructor per source:

* the front door (`vllm serve`'s rules): the rendered sampling params (which carry the parser's
  adjustments and the stop strings) and the request; logprobs exactly when the request asks;
  the engine's `max_tokens` is a cap the proxy enforces itself;
* the raw derender endpoints (vLLM's derender rules, docs/vllm-wire-spec.md §2.4 / 2.5): the request carried in the
  body, special tokens kept whenever a parser reads markers, logprobs whenever the engine sent them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.derender.settings import DerenderSettings
from core.derender.text import TextOptions
from core.logprobs import chat_top_limit, completion_top_limit
from core.parsers.pipeline import ChatOutputParser


@dataclass(frozen=True, slots=True)
class OutputSpec:
    settings: DerenderSettings
    text: TextOptions
    parser: ChatOutputParser | None = None
    chat: bool = True                   # chat's finish rule; completions pass the engine's through
    logprobs: bool | None = None        # as the request asks; None: whenever the engine sent them
    top_limit: int | None = None        # logprob candidates kept per position (None: all)
    completion_logprobs: bool = False   # completions' flat shape with text offsets
    return_token_ids: bool = False
    hide_metadata: bool = False         # include_reasoning false with a parser: no logprobs, no ids
    max_tokens: int | None = None       # the engine must stop here; past it the choice ends "length"

    def resolve_finish(self, finish_reason: str | None, tool_calls_made: bool) -> str | None:
        """The non-streamed finish_reason: chat's null -> "stop" and the parser's tool_calls rule."""
        if not self.chat:
            return finish_reason
        if self.parser is not None:
            return self.parser.resolve_finish_reason(finish_reason, tool_calls_made)
        return finish_reason or "stop"

    # -- the front door --------------------------------------------------------------------

    @classmethod
    def for_chat(cls, settings: DerenderSettings, request: Any, sampling: dict[str, Any],
                 parser: ChatOutputParser | None, max_tokens: int | None = None) -> OutputSpec:
        hide = parser is not None and getattr(request, "include_reasoning", True) is False
        wants = bool(getattr(request, "logprobs", False))
        return cls(settings=settings, text=TextOptions.from_sampling(sampling), parser=parser, logprobs=wants,
                   top_limit=chat_top_limit(wants, getattr(request, "top_logprobs", None),
                                            getattr(request, "logprob_token_ids", None)),
                   return_token_ids=bool(getattr(request, "return_token_ids", False)) and not hide,
                   hide_metadata=hide, max_tokens=max_tokens)

    @classmethod
    def for_completion(cls, settings: DerenderSettings, request: Any, sampling: dict[str, Any],
                       max_tokens: int | None = None) -> OutputSpec:
        return cls(settings=settings, text=TextOptions.from_sampling(sampling), chat=False,
                   logprobs=request.logprobs is not None,
                   top_limit=completion_top_limit(request.logprobs, request.logprob_token_ids),
                   completion_logprobs=True, return_token_ids=bool(request.return_token_ids),
                   max_tokens=max_tokens)

    # -- the raw derender endpoints --------------------------------------------------------

    @classmethod
    def for_raw_chat(cls, settings: DerenderSettings, chat_request: Any,
                     parser: ChatOutputParser | None) -> OutputSpec:
        hide = parser is not None and chat_request is not None and chat_request.include_reasoning is False
        top_limit = (chat_top_limit(chat_request.logprobs, chat_request.top_logprobs, chat_request.logprob_token_ids)
                     if chat_request is not None else None)
        return cls(settings=settings, text=TextOptions.from_request(chat_request, preserve_special=parser is not None),
                   parser=parser, top_limit=top_limit,
                   return_token_ids=bool(chat_request is not None and chat_request.return_token_ids) and not hide,
                   hide_metadata=hide)

    @classmethod
    def for_raw_completion(cls, settings: DerenderSettings, request: Any) -> OutputSpec:
        top_limit = completion_top_limit(request.logprobs, request.logprob_token_ids) if request is not None else None
        return cls(settings=settings, text=TextOptions.from_request(request), chat=False, top_limit=top_limit,
                   completion_logprobs=True, return_token_ids=bool(request is not None and request.return_token_ids))
