"""What the derender needs to know about the server: model, parser flags, limits.

Built once at start-up (from `proxy.config.ServerConfig` by the I/O layer) and shared by every
request; nothing in it changes per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.model import ModelInfo
from core.protocol.common import MAX_N_SEQUENCES


@dataclass(frozen=True)
class DerenderSettings:
    model: ModelInfo
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    enable_auto_tool_choice: bool = False
    # core.render.RenderOptions (or the ServerConfig to build it from, lazily: only the parser
    # path needs the effective chat-template kwargs)
    render_options: Any = None
    max_logprobs: int = 20
    reasoning_field: str = "reasoning"  # reasoning | reasoning_content | both
    stream_state_secret: str | None = None
    max_n_sequences: int = MAX_N_SEQUENCES
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def parser_configured(self) -> bool:
        """vLLM builds a parser for a reasoning parser, or a tool parser with auto tool choice."""
        return bool(self.reasoning_parser or (self.tool_call_parser and self.enable_auto_tool_choice))

    @classmethod
    def from_config(cls, config: Any, model: ModelInfo) -> DerenderSettings:
        """From `proxy.config.ServerConfig` (duck-typed: core never imports proxy)."""
        return cls(model=model, reasoning_parser=config.reasoning_parser,
                   tool_call_parser=config.tool_call_parser,
                   enable_auto_tool_choice=config.enable_auto_tool_choice,
                   render_options=config,
                   max_logprobs=config.max_logprobs, reasoning_field=config.reasoning_field,
                   stream_state_secret=config.stream_state_secret)

    def chat_template_kwargs(self, chat_request: Any) -> dict[str, Any]:
        """The effective kwargs parsers see (spec 2.4 step 6), computed by render's own function."""
        from core.render import RenderOptions, effective_chat_kwargs

        if self.model.model_type == "gpt_oss":  # Harmony ignores template kwargs
            return {}
        options = self.extras.get("render_options")
        if options is None:
            source = self.render_options
            options = (source if isinstance(source, RenderOptions)
                       else RenderOptions.from_config(source) if source is not None else RenderOptions.build())
            self.extras["render_options"] = options
        return effective_chat_kwargs(chat_request, options)
