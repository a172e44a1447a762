"""The parser contract: incremental, serializable reasoning and tool-call parsers.

A parser *object* holds only configuration (tokenizer, tools, template kwargs) and is cheap to
build once per request. All mutable progress lives in a separate *state*: a small JSON value
(dict of str/int/bool/list/None) that the caller owns. That split is what lets the raw streaming
`/derender` endpoint put the state inside the client-carried `stream_state` and resume on the
next call with O(new text) work, with no replay of the history.

    parser = SomeReasoningParser(ctx)
    state = parser.start(prompt_token_ids)          # decide the initial phase from the prompt
    r, c = parser.feed(state, "new text", [ids])    # mutates `state`, returns the deltas
    r, c = parser.finish(state)                     # flush what was held back

Non-streaming parsing is the same calls with all the text at once: `start`, one `feed`, `finish`.
Invariant (property-tested): for any split of the same text and ids into `feed` calls, the
concatenated deltas are equal. A parser never raises on any input text.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from core.tokenizer import Tokenizer

# A tool-call delta in the OpenAI streaming shape:
#   first delta of call i: {"index": i, "id": str|None, "type": "function", "function": {"name": str, "arguments": str}}
#   later deltas:          {"index": i, "function": {"arguments": "<fragment>"}}
# `id` is None when the family has no ids of its own: the chat pipeline assigns
# `chatcmpl-tool-<16hex>` and pins it for the whole stream.
ToolCallDelta = dict[str, Any]
State = dict[str, Any]


@dataclass(frozen=True)
class ParserContext:
    """Per-request configuration shared by the reasoning and tool parsers."""

    tokenizer: Tokenizer
    tools: list[dict[str, Any]] | None = None  # OpenAI tool objects, as sent by the client
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)  # effective (server defaults applied)
    # the request's own chat_template_kwargs (what vLLM's nemotron_v3 reads for its content swap)
    request_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    history_tool_call_count: int = 0  # assistant tool calls already in messages (kimi_k2 ids continue after them)
    reasoning_parser: str | None = None  # the configured reasoning parser's name (some tool grammars depend on it)
    tool_call_parser: str | None = None  # the tool parser that reads the content after reasoning (if any)
    tool_choice: Any = None  # the request's tool_choice ("auto"/"none"/"required" or a named {"function": ...} dict)
    include_reasoning: bool = True  # the request's include_reasoning (hidden reasoning may be held, not dropped)
    # vLLM's `_engine_based` composition: no reasoning parser, or an engine-based one (else an
    # engine tool parser's output without a call is returned as written, markup included)
    engine_composition: bool = True
    responses_api: bool = False  # a Responses request (vLLM's mistral parser keeps its pre-grammar path)

    def tool_schema(self, name: str) -> dict[str, Any] | None:
        """The JSON schema of a tool's parameters, for families that coerce argument types."""
        for tool in self.tools or ():
            function = tool.get("function") or {}
            if function.get("name") == name:
                params = function.get("parameters")
                return params if isinstance(params, dict) else None
        return None


class ReasoningParser(ABC):
    """Splits model text into reasoning and content."""

    name: ClassVar[str]
    # vLLM's engine-based reasoning adapters (with an engine tool parser, the composition is
    # engine-based: see ToolParser.engine_based)
    engine_based: ClassVar[bool] = False

    def __init__(self, ctx: ParserContext) -> None:
        self.ctx = ctx

    @abstractmethod
    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        """Whether these ids (typically the prompt) already closed the reasoning section."""

    @abstractmethod
    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        """The initial state; with the prompt, decide whether reasoning is already open or closed."""

    @abstractmethod
    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        """Consume new text (and the ids it came from); return (reasoning_delta, content_delta)."""

    @abstractmethod
    def finish(self, state: State) -> tuple[str, str]:
        """End of output: flush held-back text as (reasoning_delta, content_delta)."""

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        """Non-streaming split, equal to vLLM's `extract_reasoning` (empty parts become None).

        The default is one `feed` plus `finish`; families whose vLLM non-streaming rule cannot be
        expressed by a streaming machine (it looks ahead, e.g. granite's markers) override this
        with the exact rule.
        """
        state = self.start(prompt_token_ids)
        r1, c1 = self.feed(state, text, token_ids)
        r2, c2 = self.finish(state)
        return (r1 + r2) or None, (c1 + c2) or None

    def repeat(self, state: State) -> str:
        """After `finish`: text the stream sends again, as content, after the tool parser (vLLM's
        `get_streaming_fallback_content`, which its stream's end appends to the content as it is:
        nemotron_v3 and granite_thinking_parser repeat a reasoning never ended). Most families: ""."""
        return ""

    def split_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None, str]:
        """`parse_complete` and the text the stream of the same output repeats at its end (`repeat`):
        the non-streaming answer appends it to the content as the stream does."""
        return (*self.parse_complete(text, token_ids, prompt_token_ids), "")

    def adjust_request(self, request: Any) -> Any:
        """Render-side request adjustment (most reasoning parsers change nothing)."""
        return request


class ToolParser(ABC):
    """Extracts tool calls from content text (after reasoning was split off)."""

    name: ClassVar[str]
    # whether required/named tool_choice output (plain JSON forced by structured outputs) is
    # handled by the generic JSON path rather than this family's markup
    supports_required_and_named: ClassVar[bool] = True
    # vLLM's engine-based parsers (one grammar for the whole output): their content is used even
    # when no call was found (markup removed), and they run under tool_choice "none" too
    engine_based: ClassVar[bool] = False
    # one grammar for reasoning, content and calls (Harmony): the pipeline feeds the family on
    # every step with the token ids, even when the reasoning parser gave no content, and its
    # content is the answer as the family gives it (vLLM's path for such a format applies none of
    # the generic content rules: whitespace-only content beside calls or under a forced choice stays)
    unified: ClassVar[bool] = False
    # vLLM's generic rule for forced choices: whitespace-only content without a call is dropped
    # (off for a family whose vLLM parser composes its own answer: Kimi K3 keeps it)
    forced_blank_dropped: ClassVar[bool] = True

    def __init__(self, ctx: ParserContext) -> None:
        self.ctx = ctx

    @abstractmethod
    def start(self) -> State:
        """The initial state."""

    @abstractmethod
    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        """Consume new content text; return (content_delta, tool_call_deltas)."""

    @abstractmethod
    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        """End of output: flush held-back text and unsent argument tails."""

    def tools_called(self, state: State) -> bool:
        """Streaming: whether vLLM's non-streaming answer would say tools were called even with
        no call found (then whitespace-only content is dropped), e.g. DeepSeek's block marker."""
        return False

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        """Non-streaming extraction, equal to vLLM's `extract_tool_calls`.

        Returns (calls, content): `calls` is None when no tool was called (vLLM's
        `tools_called=False`), else a list of {"id": str|None, "name", "arguments"}. The default
        aggregates `feed` + `finish`; families override it where vLLM's non-streaming rule looks
        ahead (e.g. hermes falls back to plain content when any call is not valid JSON).
        """
        state = self.start()
        content, deltas = self.feed(state, text, token_ids)
        tail, more = self.finish(state)
        calls = aggregate_tool_deltas(deltas + more)
        content = (content + tail) or None
        return (calls or None), content

    @classmethod
    def always_adjusts(cls, ctx: ParserContext) -> bool:
        """Whether adjust_request runs under tool_choice "none" without a reasoning parser too."""
        return False

    def adjust_request(self, request: Any) -> Any:
        """Render-side adjustment of the chat request (e.g. hermes: skip_special_tokens=False).

        May mutate and must return the request; called before sampling params are built. The
        default is vLLM's base rule for families that parse forced calls as plain JSON
        (`supports_required_and_named`): "required" / a named tool constrain the output with a
        JSON schema built from the tools (`structured_outputs.json`, response_format dropped).
        """
        if not self.supports_required_and_named or not getattr(request, "tools", None):
            return request
        current = getattr(request, "structured_outputs", None)
        if current is not None and getattr(current, "structural_tag", None) is not None:
            return request
        from core.parsers.json_schema import json_schema_from_tools

        schema = json_schema_from_tools(request)
        if schema is not None:
            from core.protocol.common import StructuredOutputsParams

            request.structured_outputs = StructuredOutputsParams(json=schema)
            request.response_format = None
        return request


def aggregate_tool_deltas(deltas: list[ToolCallDelta]) -> list[dict[str, Any]]:
    """Fold streaming tool-call deltas into complete calls [{id, name, arguments}] by index."""
    calls: dict[int, dict[str, Any]] = {}
    for delta in deltas:
        call = calls.setdefault(delta["index"], {"id": None, "name": "", "arguments": ""})
        if delta.get("id"):
            call["id"] = delta["id"]
        function = delta.get("function") or {}
        call["name"] += function.get("name") or ""
        call["arguments"] += function.get("arguments") or ""
    return [calls[i] for i in sorted(calls)]
