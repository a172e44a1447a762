"""Render an Anthropic Messages request: the chat-equivalent request, then vLLM 0.33's GenerateRequest.

vLLM renders `/v1/messages`, `/v1/messages/count_tokens` and `/v1/messages/render` by turning the
Anthropic request into a ChatCompletionRequest (`AnthropicServingMessages.to_chat_completion_request`
in `vllm/entrypoints/anthropic/serving.py`) and rendering that as a chat
(`ServingRender.render_messages_request` -> `render_chat_request`). This module does the same
conversion (`to_chat_request`) and hands the result to `core.render.render_chat`, so every chat
rule (template, tools, structural tags, sampling defaults, reasoning_ended, parse_context) applies
unchanged. Sans-IO: no I/O, no clock except vLLM's time-based id for a `tool_use` block without one.

The conversion, as vLLM 0.33 does it:

* `system` (a string, or the `text` of its text blocks, joined with no separator; blocks starting
  with `x-anthropic-billing-header` are dropped) becomes the first message. System messages inside
  `messages` stay where they are, unless the chat template rejects a non-leading system message
  (probed once per model: `template_requires_leading_system`), then their text is appended to the
  leading system message instead.
* A string `content` stays a string. Blocks: `text` (non-empty) -> text parts (one text part
  collapses to a string), `image` -> an `image_url` part (a text-only model answers 400),
  `thinking` -> the message's `reasoning` (joined), `redacted_thinking` / `tool_reference` ->
  nothing, `tool_use` -> a `tool_calls` entry (`arguments` = Python's `json.dumps(input)`), a
  user's `tool_result` -> a `tool` message placed BEFORE the user message (its text blocks joined
  with "\\n"; `is_error` is not rendered), an assistant's `tool_result` -> a text part
  `"Tool result: <str(content)>"`. A user message left without content is dropped.
* Nothing marks the last message for continuation: an assistant "prefill" is rendered as a
  finished turn followed by a new generation prompt (vLLM does not continue it).
* `max_tokens` -> both `max_tokens` and `max_completion_tokens` (so length errors name
  `max_completion_tokens`), `stop_sequences` -> `stop`, `temperature` / `top_p` / `top_k` and
  vLLM's extensions copied, `metadata` ignored; `stream` adds
  `stream_options {include_usage, continuous_usage_stats}`.
* `output_config.format` -> a json_schema `response_format`; `output_config.effort` ->
  `reasoning_effort`; `thinking` enabled -> `thinking_token_budget = budget_tokens`; disabled ->
  `reasoning_effort` = the server's disabled-thinking effort (`--anthropic-disabled-thinking-effort`,
  default "auto": "none" unless the template rejects "none" or renders it like a real effort, then
  "low"; probed once: `probe_disabled_thinking_effort`); adaptive -> nothing.
* `tool_choice`: auto/any/tool/none -> "auto"/"required"/named/"none", and
  `parallel_tool_calls = not disable_parallel_tool_use`; absent -> null, or "auto" when tools are
  given. Tools -> function tools (`input_schema` -> `parameters`), after applying the
  `tool_addition` / `tool_removal` blocks of the messages. These are set after the chat request
  is built, so the chat validators on tools / tool_choice do not run (vLLM's order).

Deviations from vLLM 0.33, each a 400 here: `tool_choice` any / tool without `tools` (vLLM drops
the forced choice and renders anyway: `MISSING_TOOLS_MESSAGE`, checked after rendering, so that
vLLM's own errors for the request come first); an image inside a tool_result whose
`source` is not an object (vLLM: a 500, `IMAGE_SOURCE_MESSAGE`).

# Output side: what vLLM 0.33 does with the engine's answer (for the `/v1/messages` front door)

From `vllm/entrypoints/anthropic/serving.py` (`AnthropicServingMessages`), `protocol.py` and
`api_router.py`; the 0.32 `vllm serve` recordings (tests/fixtures/oracle/serve_messages_*.json)
show the same shapes:

* Non-streaming (`messages_full_converter`, built from the chat completion, dumped with
  `exclude_none=True`: a null `stop_sequence` is absent): `id` = the chat completion's id
  (`chatcmpl-...`, not `msg_...`), `type` "message", `role` "assistant", `model`, `content`,
  `stop_reason`, `usage`. Blocks in this order: one `thinking` block
  `{"type":"thinking","thinking":<reasoning>,"signature":uuid4().hex}` when the reasoning is
  non-empty, one `text` block when the content is non-empty, one `tool_use` block per tool call
  (`id` = the chat tool-call id, `chatcmpl-tool-<16 hex>` for hermes; `name`; `input` =
  `json.loads(arguments)`); nothing at all gives `[{"type":"text","text":""}]`. `usage` =
  `{"input_tokens": prompt_tokens - cached, "output_tokens": completion_tokens}` (cache fields only
  with prompt-token details). `stop_reason` (`_to_anthropic_stop_reason`): finish `length` ->
  `max_tokens`; any tool call -> `tool_use`; else a matched stop string -> `stop_sequence` with
  `stop_sequence` = the string (the text is cut before it); else `end_turn` (finish `stop` /
  `tool_calls`); other finish reasons -> null.
* Streaming (`message_stream_converter` over the chat stream, include_usage and
  continuous_usage_stats forced on; `text/event-stream`): each event is
  `event: <type>\ndata: <json>\n\n`, the JSON dumped with `exclude_unset=True`. The first chat
  chunk (the role chunk) becomes `message_start` with `message` = {id, type, role, content: [],
  model, stop_reason: null, stop_sequence: null, usage: {input_tokens, output_tokens: 0}}. Then
  per block, in output order: `content_block_start` (`{"type":"thinking","thinking":""}`,
  `{"type":"text","text":""}` or `{"type":"tool_use","id","name","input":{}}`, with `index`
  counting blocks from 0), `content_block_delta`s (`thinking_delta` / `text_delta` /
  `input_json_delta` with `partial_json`; empty deltas skipped) and, when another block starts or
  the output ends, `content_block_stop`; a thinking block's stop is preceded by one
  `signature_delta` (uuid4 hex). A call id with a name opens a new tool_use block; content that
  arrives while a tool_use block is open is held back and sent after it as its own text block.
  The usage-only chunk closes the open block and sends `message_delta` (`delta` {stop_reason,
  stop_sequence}, `usage` {input_tokens, output_tokens}); `tool_use` there needs the last call's
  arguments to parse as JSON (else a stop string, else end_turn). Last `message_stop`
  (`{"type":"message_stop"}`). No `ping`. An error mid-stream closes the open block and sends
  `event: error` `{"type":"error","error":{"type": <by status, "api_error" for a bug>, "message"}}`
  with no `message_stop`.
* Errors (`api_router.translate_error_response`): `{"type":"error","error":{"type","message"}}`
  with the type from the status (`core.protocol.messages.anthropic_error_type`). vLLM's
  request-validation 400s on these routes come out in the OpenAI shape (its global FastAPI
  handler); ours are Anthropic-shaped (`proxy.routes.messages.anthropic_errors`), except on
  `/v1/messages/render`, a render-server route, where vLLM's OpenAI shape is kept.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, get_args

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from core.chat_template import select_template
from core.errors import RequestError, bad_request
from core.model import ModelInfo
from core.protocol.chat import ChatCompletionRequest
from core.protocol.construct import construct
from core.protocol.common import (
    ChatCompletionNamedToolChoiceParam,
    ChatCompletionToolsParam,
    JsonSchemaResponseFormat,
    ResponseFormat,
    StreamOptions,
)
from core.protocol.messages import (
    BILLING_HEADER,
    TOOL_CHANGE_TYPES,
    AnthropicContentBlock,
    AnthropicCountTokensRequest,
    AnthropicEffort,
    AnthropicMessage,
    AnthropicMessagesRequest,
    AnthropicTool,
    AnthropicToolChangeDefinition,
    AnyMessagesRequest,
)
from core.render import RenderOptions, TokenBudget, render_chat, render_chat_ids, request_chat_kwargs

MISSING_TOOLS_MESSAGE = "tool_choice {type!r} requires tools: no tools were given."
IMAGE_SOURCE_MESSAGE = "The `source` of an image in a tool_result must be an object."

Message = dict[str, Any]


# -- messages -----------------------------------------------------------------------------


def _system_block_texts(blocks: list[AnthropicContentBlock]) -> list[str]:
    return [b.text for b in blocks if b.type == "text" and b.text and not b.text.startswith(BILLING_HEADER)]


def _inline_system_text(message: AnthropicMessage) -> str | None:
    """The text of a system message inside `messages` (billing headers dropped), None when empty."""
    if isinstance(message.content, str):
        return None if message.content.startswith(BILLING_HEADER) else message.content
    return "".join(_system_block_texts(message.content)) or None


def _leading_system(request: AnyMessagesRequest, merge_inline_system: bool) -> list[Message]:
    system = request.system
    parts: list[str] = []
    if system:
        parts = [system] if isinstance(system, str) else _system_block_texts(system)
    if merge_inline_system:
        parts += [text for m in request.messages if m.role == "system" and (text := _inline_system_text(m))]
    return [{"role": "system", "content": "".join(parts)}] if parts else []


def _image_url(source: dict[str, Any]) -> str:
    if source.get("type") == "url":
        return source.get("url", "")
    return f"data:{source.get('media_type', 'image/jpeg')};base64,{source.get('data', '')}"


def _tool_call(block: AnthropicContentBlock) -> dict[str, Any]:
    # json.dumps on purpose: Python's spacing and ASCII escapes, as vLLM writes the arguments
    return {"id": block.id or f"call_{int(time.time())}", "type": "function",
            "function": {"name": block.name or "", "arguments": json.dumps(block.input or {})}}


def _user_tool_result(block: AnthropicContentBlock) -> list[Message]:
    """A user's tool_result: a `tool` message, plus a user message for its images and a second
    `tool` message for its tool references (vLLM's order)."""
    text, images, references = "", [], []
    if isinstance(block.content, str):
        text = block.content
    elif isinstance(block.content, list):
        texts = []
        for item in block.content:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "text":
                text_item = item.get("text", "")
                if not isinstance(text_item, str):  # vLLM's "\n".join fails the same way (a 400 there too)
                    raise bad_request(f"sequence item {len(texts)}: expected str instance, "
                                      f"{type(text_item).__name__} found")
                texts.append(text_item)
            elif kind == "image":
                source = item.get("source", {})
                if not isinstance(source, dict):  # vLLM: a 500 (AttributeError)
                    raise bad_request(IMAGE_SOURCE_MESSAGE)
                if url := _image_url(source):
                    images.append(url)
            elif kind == "tool_reference":
                if name := item.get("tool_name") or item.get("name"):
                    references.append({"type": "tool_reference", "name": name})
        text = "\n".join(texts)
    call_id = block.tool_use_id or ""
    out: list[Message] = [{"role": "tool", "tool_call_id": call_id, "content": text or ""}]
    if images:
        out.append({"role": "user", "content": [{"type": "image_url", "image_url": {"url": u}} for u in images]})
    if references:
        out.append({"role": "tool", "tool_call_id": call_id, "content": references})
    return out


def _block_message(message: AnthropicMessage, out: list[Message]) -> Message:
    """A message with content blocks; tool results of a user message go to `out` first."""
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    reasoning: list[str] = []
    assert not isinstance(message.content, str)
    for block in message.content:
        kind = block.type
        if kind == "text" and block.text:
            parts.append({"type": "text", "text": block.text})
        elif kind == "image" and block.source:
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block.source)}})
        elif kind == "thinking" and block.thinking is not None:
            reasoning.append(block.thinking)
        elif kind == "tool_use":
            calls.append(_tool_call(block))
        elif kind == "tool_result":
            if message.role == "user":
                out.extend(_user_tool_result(block))
            else:
                parts.append({"type": "text", "text": f"Tool result: {str(block.content) if block.content else ''}"})
    converted: Message = {"role": message.role}
    if reasoning:
        converted["reasoning"] = "".join(reasoning)
    if calls:
        converted["tool_calls"] = calls
    if parts:
        converted["content"] = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
    return converted


def chat_messages(request: AnyMessagesRequest, merge_inline_system: bool = False) -> list[Message]:
    """The chat messages vLLM renders for an Anthropic request."""
    out = _leading_system(request, merge_inline_system)
    for message in request.messages:
        if message.role == "system":
            if not merge_inline_system and (text := _inline_system_text(message)):
                out.append({"role": "system", "content": text})
            continue
        if isinstance(message.content, str):
            converted: Message = {"role": message.role, "content": message.content}
        else:
            converted = _block_message(message, out)
        if not (message.role == "user" and "content" not in converted):
            out.append(converted)
    return out


# -- the rest of the request ----------------------------------------------------------------


def resolve_tools(request: AnyMessagesRequest) -> list[AnthropicTool] | None:
    """`tools` after the `tool_addition` / `tool_removal` blocks of the messages, in their order."""
    changes = [block for m in request.messages if not isinstance(m.content, str)
               for block in m.content if block.type in TOOL_CHANGE_TYPES]
    if not changes:
        return request.tools
    tools = {tool.name: tool for tool in request.tools or []}
    removed: set[str] = set()
    for block in changes:
        change = block.tool
        assert change is not None  # the block's validator requires it
        if isinstance(change, AnthropicToolChangeDefinition):
            name = change.definition.name
            tools[name] = change.definition
        else:
            name = change.name
            if name not in tools:
                raise bad_request(f"{block.type} references tool {name!r}, which is not declared in tools")
            if block.type == "tool_addition":
                tools[name] = tools[name].model_copy(update={"defer_loading": None})
        if block.type == "tool_removal":
            removed.add(name)
        else:
            removed.discard(name)
    return [tool for name, tool in tools.items() if name not in removed]


def _chat_tool(tool: AnthropicTool) -> ChatCompletionToolsParam:
    return ChatCompletionToolsParam.model_validate({"type": "function", "function": {
        "name": tool.name, "description": tool.description, "parameters": tool.input_schema,
        "strict": tool.strict, "defer_loading": tool.defer_loading}})


def _apply_tool_choice(chat: ChatCompletionRequest, request: AnyMessagesRequest) -> None:
    choice = request.tool_choice
    if choice is None:
        chat.tool_choice = None
        return
    chat.parallel_tool_calls = not choice.disable_parallel_tool_use
    if choice.type == "tool":
        chat.tool_choice = ChatCompletionNamedToolChoiceParam.model_validate(
            {"type": "function", "function": {"name": choice.name}})
    else:
        chat.tool_choice = {"auto": "auto", "any": "required", "none": "none"}[choice.type]


def check_tools_for_choice(request: AnyMessagesRequest, chat: ChatCompletionRequest) -> None:
    """Our one stricter rule: a choice that forces a tool call needs tools (vLLM drops it silently).
    Checked once the request has rendered, so that any error vLLM itself gives comes first."""
    choice = request.tool_choice
    if choice is not None and choice.type in ("any", "tool") and not chat.tools:
        raise bad_request(MISSING_TOOLS_MESSAGE.format(type=choice.type), param="tool_choice")


def chat_fields(request: AnyMessagesRequest, merge_inline_system: bool = False) -> dict[str, Any]:
    """The fields vLLM builds its ChatCompletionRequest from (tools and the rest are set after)."""
    fields: dict[str, Any] = {"model": request.model, "messages": chat_messages(request, merge_inline_system),
                              "chat_template_kwargs": request.chat_template_kwargs}
    if isinstance(request, AnthropicMessagesRequest):
        fields.update(max_tokens=request.max_tokens, max_completion_tokens=request.max_tokens,
                      stop=request.stop_sequences, temperature=request.temperature, top_p=request.top_p,
                      top_k=request.top_k, watermarking=request.watermarking, cache_salt=request.cache_salt,
                      kv_transfer_params=request.kv_transfer_params, ec_transfer_params=request.ec_transfer_params,
                      vllm_xargs=request.vllm_xargs, mm_payload=request.mm_payload)
    return fields


# the fields the chat request's validation checks or copies beyond what the Anthropic request's did:
# cache_salt's rules, the transfer params' media rule, and dicts it rebuilds
_CHAT_CHECKED = ("chat_template_kwargs", "cache_salt", "kv_transfer_params", "ec_transfer_params", "vllm_xargs")


def chat_request_of(fields: dict[str, Any]) -> ChatCompletionRequest:
    """`ChatCompletionRequest.model_validate(fields)`, as vLLM validates it, or the same request
    built without validating when none of `_CHAT_CHECKED` is set: then every value was validated
    by the Anthropic request with the chat field's own type and bounds (max_tokens, stop strings,
    sampling numbers, mm_payload), every message `chat_messages` makes has a string role (the one
    message rule), and no before-validator applies (no tools, tool_choice, stream options,
    response format, logprobs, reasoning_content or cache salt yet). Validating again cost ~8 us
    hot and ~80 us in the server (its caches cold between requests), most of what Messages added
    before the engine call over chat completions. tests/core/test_render_messages.py compares
    the two for any request."""
    if any(fields.get(name) is not None for name in _CHAT_CHECKED):
        return ChatCompletionRequest.model_validate(fields)
    return construct(ChatCompletionRequest, **fields)


def to_chat_request(request: AnyMessagesRequest, *, merge_inline_system: bool = False,
                    disabled_thinking_effort: str = "none") -> ChatCompletionRequest:
    """The ChatCompletionRequest vLLM renders for an Anthropic request (see the module docstring)."""
    chat = chat_request_of(chat_fields(request, merge_inline_system))
    # what follows is assigned, not validated: vLLM sets these after building its request
    if isinstance(request, AnthropicMessagesRequest) and request.stream:
        chat.stream = True
        chat.stream_options = StreamOptions(include_usage=True, continuous_usage_stats=True)
    output = request.output_config
    if output is not None and output.format is not None and output.format.json_schema:
        chat.response_format = ResponseFormat(type="json_schema", json_schema=JsonSchemaResponseFormat(
            name="json_schema", schema=output.format.json_schema))
    if output is not None and output.effort is not None:
        chat.reasoning_effort = output.effort
    thinking = request.thinking
    if thinking is not None and thinking.type == "disabled":
        chat.reasoning_effort = disabled_thinking_effort  # type: ignore[assignment]
    elif thinking is not None and thinking.type == "enabled":
        chat.thinking_token_budget = thinking.budget_tokens
    _apply_tool_choice(chat, request)
    tools = resolve_tools(request)
    if tools is not None:
        if chat.tool_choice is None:
            chat.tool_choice = "auto"
        chat.tools = [_chat_tool(tool) for tool in tools]
    return chat


# -- per-model probes (once per renderer) ------------------------------------------------------


def template_requires_leading_system(model: ModelInfo) -> bool:
    """Whether the chat template (with or without tools) fails on a system message after a user one.

    vLLM renders [system, user, system, user] with a bare sandboxed Jinja environment (no
    `raise_exception`, so a template that calls it fails too); a failure, or no template, means
    inline system messages are merged into the leading one.
    """
    return any(_fails_on_inline_system(select_template(model.tokenizer.chat_template, None, has_tools))
               for has_tools in (False, True))


@lru_cache(maxsize=16)
def _fails_on_inline_system(source: str | None) -> bool:
    if not source:
        return True
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    probe = [{"role": r, "content": "t"} for r in ("system", "user", "system", "user")]
    try:
        env.from_string(source).render(messages=probe, add_generation_prompt=False)
    except Exception:  # vLLM catches jinja2.TemplateError (anything else stops its start-up)
        return True
    return False


def _probe_render(model: ModelInfo, options: RenderOptions, effort: str) -> list[int] | None:
    chat = ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "Hi"}],
                                                 "reasoning_effort": effort})
    try:
        ids, _ = render_chat_ids(model, options, chat.messages, tool_dicts=None, request_template=None,
                                 chat_kwargs=request_chat_kwargs(chat, options.reasoning_effort_map),
                                 budget=TokenBudget(model.max_model_len, None, None, None, False))
    except Exception:  # any failure means "this template cannot take the effort" (vLLM: same)
        return None
    return ids


def probe_disabled_thinking_effort(model: ModelInfo, options: RenderOptions) -> str:
    """vLLM's "auto" effort for `thinking: disabled`: "low" when the template rejects "none" or
    renders it exactly like one of the real efforts (it ignores it), else "none"."""
    none_ids = _probe_render(model, options, "none")
    if none_ids is None:
        return "low"
    if any(_probe_render(model, options, effort) == none_ids for effort in get_args(AnthropicEffort)):
        return "low"
    return "none"


# -- rendering ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RenderedMessages:
    """One rendered Messages request: what the engine gets and what the derender needs.

    `chat_request` is the chat-equivalent request after rendering (the tool parser's adjustments,
    e.g. hermes' `skip_special_tokens=False` and structural tag, are applied to it): its
    `tools`, `tool_choice`, `include_reasoning`, `parallel_tool_calls` and
    `effective_chat_kwargs(chat_request, options)` set up the output parsers exactly as for
    `/v1/chat/completions`.
    """

    generate_request: dict[str, Any]
    chat_request: ChatCompletionRequest

    @property
    def stop_sequences(self) -> list[str]:
        stop = self.chat_request.stop
        return [stop] if isinstance(stop, str) else list(stop or [])

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.generate_request["token_ids"]


@dataclass
class MessagesRenderer:
    """Renders Messages requests for one model and server configuration.

    Holds the two per-model answers vLLM computes once (inline-system merging, the effort for
    disabled thinking); both are found lazily on first need. `disabled_thinking_effort` is vLLM's
    `--anthropic-disabled-thinking-effort` ("auto" or an effort).
    """

    model: ModelInfo
    options: RenderOptions
    disabled_thinking_effort: str = "auto"
    _merge_inline_system: bool | None = field(default=None, repr=False)

    @property
    def merge_inline_system(self) -> bool:
        if self._merge_inline_system is None:
            self._merge_inline_system = template_requires_leading_system(self.model)
        return self._merge_inline_system

    def effort_for(self, request: AnyMessagesRequest) -> str:
        """The reasoning_effort for `thinking: disabled` ("none" when thinking is not disabled)."""
        if request.thinking is None or request.thinking.type != "disabled":
            return "none"
        return self.resolved_disabled_thinking_effort

    @property
    def resolved_disabled_thinking_effort(self) -> str:
        if self.disabled_thinking_effort == "auto":
            self.disabled_thinking_effort = probe_disabled_thinking_effort(self.model, self.options)
        return self.disabled_thinking_effort

    def chat_request(self, request: AnyMessagesRequest) -> ChatCompletionRequest:
        return to_chat_request(request, merge_inline_system=self.merge_inline_system,
                               disabled_thinking_effort=self.effort_for(request))

    def render(self, request: AnthropicMessagesRequest, request_id: str | None = None) -> RenderedMessages:
        """POST /v1/messages/render (and the front door's render step): the GenerateRequest dict,
        `request_id` = `chatcmpl-<request_id>` (the X-Request-Id header; random when None).
        Raises RequestError."""
        chat = self.chat_request(request)
        generate = render_chat(self.model, self.options, chat, request_id)
        check_tools_for_choice(request, chat)
        return RenderedMessages(generate_request=generate, chat_request=chat)

    def count_tokens(self, request: AnthropicCountTokensRequest) -> int:
        """POST /v1/messages/count_tokens: the rendered prompt's length. Raises RequestError."""
        chat = self.chat_request(request)
        token_ids = render_chat(self.model, self.options, chat)["token_ids"]
        check_tools_for_choice(request, chat)
        return len(token_ids)


def count_tokens_body(input_tokens: int) -> dict[str, Any]:
    """vLLM's count_tokens answer (context_management is always there)."""
    return {"input_tokens": input_tokens, "context_management": {"original_input_tokens": input_tokens}}


def request_size(request: AnyMessagesRequest) -> int:
    """A cheap estimate of the text to render (inline vs thread pool), as `core.render.request_size`."""
    size = 64 * len(request.messages) + 256 * len(request.tools or [])
    system = request.system
    if isinstance(system, str):
        size += len(system)
    elif system:
        size += sum(len(b.text or "") for b in system)
    for message in request.messages:
        if isinstance(message.content, str):
            size += len(message.content)
            continue
        for block in message.content:
            size += 128 + len(block.text or block.thinking or "")
            if isinstance(block.content, str):
                size += len(block.content)
    return size


__all__ = ["MessagesRenderer", "RenderedMessages", "RequestError", "chat_messages", "count_tokens_body",
           "probe_disabled_thinking_effort", "request_size", "resolve_tools", "template_requires_leading_system",
           "to_chat_request", "chat_fields", "chat_request_of"]
