"""gpt-oss chat rendering: the Harmony format, as vLLM 0.33 renders a `model_type: gpt_oss` model.

No Jinja template: the request becomes Harmony messages (openai-harmony, the same library and
version vLLM 0.33 uses, `oss-harmony`, whose o200k vocabulary is embedded) rendered for completion:

* a system message (model identity, `Reasoning: <effort>`, today's date, or the date in
  `VLLM_SYSTEM_START_DATE`, the variable vLLM pins it with);
* a developer message when the first message is system/developer (its text: instructions) or the
  request has tools (a `functions` namespace);
* the conversation: user, later system/developer messages (as developer instructions), assistant
  content (final channel), reasoning (analysis), content beside tool calls (commentary), each
  call (commentary to=functions.NAME, json), tool results (from functions.NAME to assistant);
  analysis messages before the last final answer are dropped; earlier calls keep the legacy
  header `assistant to=functions.NAME<|channel|>commentary json` gpt-oss was trained on.

Request adjustments (vLLM's `HarmonyParser.adjust_request`): a response format / structured
output becomes a structural tag around the final channel; with tools and the `openai` tool parser,
"required", a named tool, "auto" with `parallel_tool_calls: false` or a strict tool get the Harmony
call tag (analysis and commentary optional, then a call on any channel, or a final answer in
"auto"). vLLM skips the chat-template checks (no untrusted-template error) and the tool_choice
checks here, and parses the output with template kwargs `{}`.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
from typing import Any

from core.errors import bad_request
from core.protocol.common import StructuredOutputsParams, VLLMValidationError

START, CHANNEL, CONSTRAIN, MESSAGE = 200006, 200005, 200003, 200008
EFFORTS = ("high", "medium", "low")
BUILTIN_TOOL_TYPES = ("web_search_preview", "code_interpreter", "container")


@functools.cache
def encoding() -> Any:
    from openai_harmony import HarmonyEncodingName, load_harmony_encoding

    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


def start_date() -> str:
    return os.environ.get("VLLM_SYSTEM_START_DATE") or datetime.datetime.now().strftime("%Y-%m-%d")


def flatten_text(content: Any) -> str | None:
    """The text parts of a message content, joined (None when there is none)."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for item in content:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict) and item.get("text") is not None:
            texts.append(item["text"])
    return "".join(texts) if texts else None


# -- messages --------------------------------------------------------------------------------


def system_message(effort: str | None) -> Any:
    from openai_harmony import Message, ReasoningEffort, Role, SystemContent

    content = SystemContent.new()
    if effort is not None:
        if effort not in EFFORTS:
            raise VLLMValidationError(f"reasoning_effort={effort!r} is not supported by Harmony. Supported values "
                                      f"are: {', '.join(EFFORTS)}.", parameter="reasoning_effort")
        content = content.with_reasoning_effort({"high": ReasoningEffort.HIGH, "medium": ReasoningEffort.MEDIUM,
                                                 "low": ReasoningEffort.LOW}[effort])
    content = content.with_conversation_start_date(start_date())
    return Message.from_role_and_content(Role.SYSTEM, content)


def developer_message(instructions: str | None, tools: list[dict[str, Any]] | None) -> Any:
    from openai_harmony import DeveloperContent, Message, Role, ToolDescription

    content = DeveloperContent.new()
    if instructions is not None:
        content = content.with_instructions(instructions)
    if tools is not None:
        functions = []
        for tool in tools:
            kind = tool.get("type")
            if kind in BUILTIN_TOOL_TYPES:
                continue
            if kind != "function":
                raise VLLMValidationError(f"tool type {kind!r} is not supported.", parameter="tools")
            fn = tool["function"]
            functions.append(ToolDescription.new(name=fn["name"], description=fn.get("description") or "",
                                                 parameters=fn.get("parameters")))
        if functions:
            content = content.with_function_tools(functions)
    return Message.from_role_and_content(Role.DEVELOPER, content)


def conversation_messages(messages: list[dict[str, Any]]) -> list[Any]:
    """vLLM's parse_chat_inputs_to_harmony_messages."""
    names = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                names[call.get("id")] = (call.get("function") or {}).get("name")
    out: list[Any] = []
    for message in messages:
        out.extend(_harmony_messages(message, names))
    return out


def _harmony_messages(message: dict[str, Any], names: dict[Any, Any]) -> list[Any]:
    from openai_harmony import Author, Message, Role, TextContent

    role = message.get("role")
    calls = message.get("tool_calls") or []
    out = []
    if role == "assistant" and calls:
        content = flatten_text(message.get("content"))
        if content:
            out.append(Message.from_role_and_content(Role.ASSISTANT, content).with_channel("commentary"))
        if message.get("reasoning"):
            out.append(Message.from_role_and_content(Role.ASSISTANT, message["reasoning"]).with_channel("analysis"))
        for call in calls:
            fn = call.get("function") or {}
            out.append(Message.from_role_and_content(Role.ASSISTANT, fn.get("arguments", "") or "")
                       .with_channel("commentary").with_recipient(f"functions.{fn.get('name', '')}")
                       .with_content_type("json"))
        return out
    if role == "tool":
        name = names.get(message.get("tool_call_id", ""), "")
        text = flatten_text(message.get("content")) or ""
        return [Message.from_author_and_content(Author.new(Role.TOOL, f"functions.{name}"), text)
                .with_channel("commentary").with_recipient("assistant")]
    if role == "assistant" and message.get("reasoning"):
        out.append(Message.from_role_and_content(Role.ASSISTANT, message["reasoning"]).with_channel("analysis"))
    content = message.get("content") or ""
    if isinstance(content, str):
        contents = [TextContent(text=content)]
    else:
        contents = [TextContent(text=part.get("text", "")) for part in content]
    if role == "assistant" and contents and contents[0].text:
        out.append(Message.from_role_and_contents(Role.ASSISTANT, contents).with_channel("final"))
    elif role in ("system", "developer"):
        instructions = flatten_text(message.get("content"))
        if instructions is not None:
            out.append(developer_message(instructions, None))
    elif role != "assistant":
        out.append(Message.from_role_and_contents(Role(role), contents))
    return out


def drop_old_analysis(messages: list[Any]) -> list[Any]:
    """Analysis messages before the last final answer are dropped (vLLM's auto_drop_analysis_messages)."""
    last_final = -1
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].author.role == "assistant" and messages[i].channel == "final":
            last_final = i
            break
    return [m for i, m in enumerate(messages) if not (i < last_final and m.channel == "analysis")]


def render_ids(messages: list[Any]) -> list[int]:
    from openai_harmony import Conversation, RenderConversationConfig, Role

    conversation = Conversation.from_messages(drop_old_analysis(messages))
    ids = encoding().render_conversation_for_completion(conversation, Role.ASSISTANT,
                                                        config=RenderConversationConfig(auto_drop_analysis=False))
    return legacy_call_headers(ids)


def legacy_call_headers(ids: list[int]) -> list[int]:
    """Rewrite `assistant<|channel|>C to=R <|constrain|>T` headers to `assistant to=R<|channel|>C T`."""
    enc = encoding()
    out = list(ids)
    i = 0
    while i < len(out):
        if out[i] != START:
            i += 1
            continue
        try:
            end = out.index(MESSAGE, i + 1)
            channel_at = out.index(CHANNEL, i + 1, end)
            constrain_at = out.index(CONSTRAIN, channel_at + 1, end)
        except ValueError:
            i += 1
            continue
        author = enc.decode(out[i + 1:channel_at])
        middle = enc.decode(out[channel_at + 1:constrain_at])
        content_type = enc.decode(out[constrain_at + 1:end])
        if author != "assistant" or " to=" not in middle or not middle.endswith(" "):
            i = end + 1
            continue
        channel, recipient = middle[:-1].split(" to=", 1)
        if not channel or not recipient or not content_type:
            i = end + 1
            continue
        header = [START, *enc.encode(f"assistant to={recipient}"), CHANNEL, *enc.encode(f"{channel} {content_type}"),
                  MESSAGE]
        out[i:end + 1] = header
        i += len(header)
    return out


def render_chat_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       reasoning_effort: str | None) -> list[int]:
    """The prompt ids of a chat (vLLM's _make_request_with_harmony)."""
    if reasoning_effort == "none":
        raise VLLMValidationError(f"Harmony does not support reasoning_effort={reasoning_effort!r}",
                                  parameter="reasoning_effort")
    rest = list(messages)
    instructions = None
    if rest and isinstance(rest[0], dict) and rest[0].get("role") in ("system", "developer"):
        instructions = flatten_text(rest[0].get("content"))
        rest = rest[1:]
    harmony = [system_message(reasoning_effort)]
    if instructions or tools:
        harmony.append(developer_message(instructions, tools))
    harmony.extend(conversation_messages(rest))
    try:
        return render_ids(harmony)
    except Exception as exc:  # openai-harmony's HarmonyError / ValueError on text it cannot render
        raise bad_request(str(exc)) from None


# -- structured outputs and the tool-call tag --------------------------------------------------

_ANY_TEXT = {"type": "any_text", "excludes": [], "max_tokens": None, "max_chars": None}
_END = ["<|end|>", ""]  # Harmony's stop tokens are "": xgrammar refuses stop tokens under a grammar
_JSON_CONSTRAINS = (" json", " <|constrain|>json")
_CHANNELS = ("<|channel|>commentary", "<|channel|>analysis", "<|channel|>final")
_CALL_BEGINS = (" to=functions.{name}{channel}{constrain}<|message|>", "{channel} to=functions.{name}{constrain}<|message|>")
_FINAL_BEGIN = "<|channel|>final{constrain}<|message|>"


def _json_schema(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": schema, "style": "json", "any_order": False,
            "max_whitespace_cnt": None, "excludes": []}


def _tag(begin: str, content: dict[str, Any], end: Any) -> dict[str, Any]:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def _assemble(commentary: bool, content: dict[str, Any]) -> dict[str, Any]:
    def optional(channel: str) -> dict[str, Any]:
        return {"type": "optional", "content": {"type": "sequence", "elements": [
            _tag(f"<|channel|>{channel}<|message|>", dict(_ANY_TEXT), "<|end|>"),
            {"type": "const_string", "value": "<|start|>assistant"}]}}

    elements = [optional("analysis")] + ([optional("commentary")] if commentary else []) + [content]
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": elements}}


def output_format(params: StructuredOutputsParams) -> dict[str, Any] | None:
    """xgrammar's format for a structured-output constraint (vLLM's structured_outputs_to_format)."""
    if params.json_object:
        return _json_schema({"type": "object"})
    if params.json_ is not None:
        return _json_schema(json.loads(params.json_) if isinstance(params.json_, str) else params.json_)
    if params.regex is not None:
        return {"type": "regex", "pattern": params.regex}
    if params.choice is not None:
        return {"type": "or", "elements": [{"type": "const_string", "value": c} for c in params.choice]}
    if params.grammar is not None:
        return {"type": "grammar", "grammar": params.grammar}
    if params.structural_tag is not None:
        tag = json.loads(params.structural_tag)
        if "structures" in tag:  # the legacy form
            return {"type": "triggered_tags", "triggers": tag["triggers"],
                    "tags": [_tag(s["begin"], _json_schema(s["schema"]), s["end"]) for s in tag["structures"]],
                    "at_least_one": False, "stop_after_first": False, "excludes": []}
        return tag.get("format")
    return None


def _wrap_output_format(request: Any) -> None:
    """A structured output constrains the final channel only (vLLM's _adjust_output_format)."""
    params = request.extract_structured_outputs()
    if params is None:
        return
    final = output_format(params)
    if final is None:
        return
    if final.get("type") == "json_schema":
        content = {"type": "or", "elements": [_tag(_FINAL_BEGIN.format(constrain=c), final, _END)
                                              for c in _JSON_CONSTRAINS]}
    else:
        content = _tag(_FINAL_BEGIN.format(constrain=""), final, _END)
    request.structured_outputs = params.replace(json=None, regex=None, choice=None, grammar=None, json_object=None,
                                                structural_tag=json.dumps(_assemble(False, content)))
    request.response_format = None


def _tool_parameters(function: dict[str, Any], strict: bool) -> Any:
    if not strict:
        return True
    params = function.get("parameters")
    return params if params is not None else True


def calls_tag(functions: list[tuple[dict[str, Any], bool]], auto: bool) -> dict[str, Any]:
    """vLLM's harmony structural tag: analysis, commentary, then a call (or, in auto, a final answer)."""
    tags = [_tag(pattern.format(name=fn.get("name", ""), channel=channel, constrain=constrain),
                 _json_schema(_tool_parameters(fn, strict)), _END)
            for fn, strict in functions for pattern in _CALL_BEGINS for constrain in _JSON_CONSTRAINS
            for channel in _CHANNELS]
    if auto:
        tags.extend(_tag(_FINAL_BEGIN.format(constrain=c), dict(_ANY_TEXT), _END) for c in (*_JSON_CONSTRAINS, ""))
    return _assemble(True, {"type": "or", "elements": tags})


def _apply_calls_tag(request: Any) -> None:
    """vLLM's DelegatingParser._apply_structural_tag for the `harmony` tag model."""
    tools = [t.to_template() for t in request.tools or []]
    if not tools:
        return
    choice = request.tool_choice
    named = None if isinstance(choice, str) or choice is None else choice.function.name
    if choice not in ("auto", "required") and named is None:
        return
    is_auto = choice == "auto"
    structured = request.extract_structured_outputs()
    single = request.parallel_tool_calls is False
    function_level = single and not (is_auto and structured is not None)  # strict level FUNCTION
    any_strict = any((t.get("function") or {}).get("strict") is True for t in tools)
    if is_auto and not function_level and not any_strict:
        return  # strict level AUTO: no tag
    output = output_format(structured) if (is_auto and structured is not None) else None
    functions = [(t["function"], t["function"].get("strict") is True) for t in tools if t.get("type") == "function"]
    if named is not None:
        functions = [f for f in functions if f[0].get("name") == named]
        if not functions:
            raise bad_request(f"Tool '{named}' not found in tools")
    if choice == "required" and not functions:
        raise bad_request("tool_choice 'required' needs at least one tool")
    tag = calls_tag(functions, auto=is_auto and output is None)
    if output is not None:
        tag = {"type": "structural_tag", "format": {"type": "or", "elements": [tag["format"], output]}}
    request.structured_outputs = StructuredOutputsParams(structural_tag=json.dumps(tag))
    request.response_format = None


def adjust_request(request: Any, *, tool_parser: bool) -> None:
    """vLLM's HarmonyParser.adjust_request (only when a Harmony parser flag is set)."""
    _wrap_output_format(request)
    if tool_parser:
        _apply_calls_tag(request)
