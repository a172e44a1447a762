"""What the derender needs to know about the server: model, render options, parser flags, limits.

Built once at start-up (`from_config`, from `proxy.config.ServerConfig`) and shared by every
request; nothing in it changes per request. Building it checks the parser flags against the
tokenizer, so a parser whose markers the tokenizer lacks is a start-up error naming the flag
rather than a 400 on every request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.derender.state import StateCodec, server_fingerprint
from core.model import ModelInfo
from core.parsers.pipeline import ChatOutputParser
from core.protocol.common import MAX_N_SEQUENCES
from core.render import RenderOptions, effective_chat_kwargs


@dataclass(frozen=True)
class DerenderSettings:
    model: ModelInfo
    render: RenderOptions = field(default_factory=RenderOptions.build)
    max_logprobs: int = 20
    reasoning_field: str = "reasoning"  # reasoning | reasoning_content | both
    stream_state_secret: str | None = None
    max_n_sequences: int = MAX_N_SEQUENCES
    # derived once: the stream_state codec, and the digest of what makes states interchangeable
    codec: StateCodec = field(init=False, repr=False, compare=False)
    fingerprint: str = field(init=False, repr=False, compare=False)
    # vLLM builds a parser for a reasoning parser, or a tool parser with auto tool choice
    parser_configured: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        model = self.model
        object.__setattr__(self, "codec", StateCodec(self.stream_state_secret))
        object.__setattr__(self, "parser_configured", bool(
            self.reasoning_parser or (self.tool_call_parser and self.enable_auto_tool_choice)))
        object.__setattr__(self, "fingerprint", server_fingerprint(
            model.served_model_names, len(model.tokenizer), model.eos_token_ids, self.reasoning_parser,
            self.tool_call_parser, self.enable_auto_tool_choice))

    @classmethod
    def build(cls, model: ModelInfo, *, reasoning_parser: str | None = None, tool_call_parser: str | None = None,
              enable_auto_tool_choice: bool = False, **fields: Any) -> DerenderSettings:
        """Settings for these parser flags (unknown names or a tokenizer without the family's
        markers raise ValueError naming the flag)."""
        ChatOutputParser.check_supported(model, reasoning_parser, tool_call_parser, enable_auto_tool_choice)
        render = RenderOptions.build(reasoning_parser=reasoning_parser, tool_call_parser=tool_call_parser,
                                     enable_auto_tool_choice=enable_auto_tool_choice)
        return cls(model=model, render=render, **fields)

    @classmethod
    def from_config(cls, config: Any, model: ModelInfo) -> DerenderSettings:
        """From `proxy.config.ServerConfig` (duck-typed: core never imports proxy), at start-up."""
        ChatOutputParser.check_supported(model, config.reasoning_parser, config.tool_call_parser,
                                         config.enable_auto_tool_choice)
        return cls(model=model, render=RenderOptions.from_config(config), max_logprobs=config.max_logprobs,
                   reasoning_field=config.reasoning_field, stream_state_secret=config.stream_state_secret)

    @property
    def reasoning_parser(self) -> str | None:
        return self.render.reasoning_parser

    @property
    def tool_call_parser(self) -> str | None:
        return self.render.tool_call_parser

    @property
    def enable_auto_tool_choice(self) -> bool:
        return self.render.enable_auto_tool_choice

    def chat_template_kwargs(self, chat_request: Any) -> dict[str, Any]:
        """The effective kwargs parsers see (docs/vllm-wire-spec.md §2.4 step 6), computed by render's own function."""
        if self.model.model_type == "gpt_oss":  # Harmony ignores template kwargs
            return {}
        return effective_chat_kwargs(chat_request, self.render)

    def parser_for(self, chat_request: Any) -> ChatOutputParser | None:
        """The request's output parser (None: plain detokenization)."""
        if not self.parser_configured or chat_request is None:
            return None
        return ChatOutputParser.for_request(
            model=self.model, reasoning_parser=self.reasoning_parser, tool_call_parser=self.tool_call_parser,
            enable_auto_tool_choice=self.enable_auto_tool_choice, request=chat_request,
            chat_template_kwargs=self.chat_template_kwargs(chat_request))
