"""gpt-oss Responses requests as Harmony messages, as vLLM 0.33 renders them (`model_type: gpt_oss`).

vLLM renders a Responses request for a Harmony model with its own conversation, not the chat one
(`OnlineRenderer._render_responses_with_harmony`, `responses/harmony.py`):

* a new conversation starts with the system message (`reasoning.effort`: high, medium or low; any
  other effort is a 400) and a developer message when there are instructions or function tools
  (custom and namespace tools are a 400 there: "tool type 'custom' is not supported.");
  instructions are `instructions`, or, when it is absent, a leading system / developer input item;
* then `previous_input_messages` (vLLM's extension: chat-shaped or Harmony-shaped dicts; their
  system and developer messages dropped);
* a continuation (`previous_response_id`) replaces all of that by the stored Harmony messages of
  the previous response (its preamble, input and output, exactly as they were: the new request's
  instructions, tools and effort are not shown to the model, as in vLLM);
* then the input: a string is one user message (an empty one too, unless there is
  `previous_input_messages`); items become messages one by one: user text, assistant text on the
  final channel, later system / developer items as developer messages (empty ones skipped),
  `reasoning` content joined with "\\n" on the analysis channel (none: skipped), `function_call`
  as a commentary call to `functions.NAME` (json), `function_call_output` as a message from
  `functions.NAME` (the name of the call with that `call_id`, looked up in the previous
  response's output and the calls earlier in this input; none: a 400 "No call message found");
  any other item type is a 400 "Unknown input type".

The messages are rendered by `core.renderers.harmony.render_ids` (analysis before the last final
answer dropped, legacy call headers).
"""

from __future__ import annotations

import json
from typing import Any

from core.errors import RequestError
from core.protocol.common import VLLMValidationError
from core.renderers import harmony


def _as_dict(item: Any, *, exclude_none: bool = False) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    return item.model_dump(exclude_none=exclude_none)


def _input_error(exc: Exception) -> RequestError:
    """vLLM answers item conversion errors as invalid_request_error on `input`."""
    return RequestError(str(exc), 400, "invalid_request_error", "input")


def instructions_and_input(request: Any) -> tuple[str | None, Any]:
    """`instructions`, or a leading system / developer item's text (that item then left out)."""
    items = request.input
    if request.instructions is not None or isinstance(items, str) or not items:
        return request.instructions, items
    first = _as_dict(items[0], exclude_none=True)
    if first.get("role") not in ("system", "developer"):
        return None, items
    return harmony.flatten_text(first.get("content")), list(items[1:])


def developer_tools(tools: list[Any]) -> list[dict[str, Any]] | None:
    """Responses tools in the chat form `harmony.developer_message` reads; None when every tool is
    a built-in one (vLLM's `has_custom_tools`: no functions namespace then)."""
    if all(tool.type in harmony.BUILTIN_TOOL_TYPES for tool in tools):
        return None
    out: list[dict[str, Any]] = []
    for tool in tools:
        if tool.type == "function":
            out.append({"type": "function", "function": {"name": tool.name, "description": tool.description,
                                                         "parameters": tool.parameters}})
        else:
            out.append({"type": tool.type})
    return out


def preamble(instructions: str | None, tools: list[Any], effort: str | None) -> list[Any]:
    """The system message and, with instructions or function tools, the developer message."""
    messages = [harmony.system_message(effort)]
    tool_dicts = developer_tools(tools)
    if instructions or tool_dicts:
        messages.append(harmony.developer_message(instructions or None, tool_dicts))
    return messages


# -- previous_input_messages (vLLM's Harmony history extension) ---------------------------------


def _text_contents(content: Any) -> list[Any]:
    from openai_harmony import TextContent

    if isinstance(content, list):
        return [TextContent(text=part.get("text", "")) for part in content]
    return [TextContent(text=content if isinstance(content, str) else "")]


def _harmony_shaped(message: dict[str, Any]) -> Any:
    from openai_harmony import Author, Message, Role

    author = message["author"]
    role, name = author.get("role"), author.get("name")
    contents = _text_contents(message.get("content", ""))
    out = (Message(author=Author.new(Role(role), name), content=contents) if name
           else Message.from_role_and_contents(Role(role), contents))
    if message.get("channel"):
        out = out.with_channel(message["channel"])
    if message.get("recipient"):
        out = out.with_recipient(message["recipient"])
    if message.get("content_type"):
        out = out.with_content_type(message["content_type"])
    return out


def _chat_shaped(message: dict[str, Any]) -> list[Any]:
    from openai_harmony import Author, Message, Role

    role = message.get("role")
    if role is None:
        raise VLLMValidationError(f"Message has no 'role' key: {message}", parameter="input")
    calls = message.get("tool_calls")
    if role == "assistant" and calls:
        return [Message.from_role_and_content(Role.ASSISTANT, (call.get("function") or {}).get("arguments", "") or "")
                .with_channel("commentary").with_recipient(f"functions.{(call.get('function') or {}).get('name', '')}")
                .with_content_type("json") for call in calls]
    if role == "tool":
        name = message.get("name", "")
        if name and not name.startswith("functions."):
            name = f"functions.{name}"
        text = harmony.flatten_text(message.get("content")) or ""
        return [Message.from_author_and_content(Author.new(Role.TOOL, name), text)
                .with_channel("commentary").with_recipient("assistant")]
    if role in ("system", "developer"):
        return []  # dropped from the history (instructions come from the current request)
    return [Message.from_role_and_contents(Role(role), _text_contents(message.get("content", "")))]


def previous_input_messages(raw: list[dict[str, Any]] | None) -> list[Any]:
    from openai_harmony import Role

    out: list[Any] = []
    for message in raw or []:
        try:
            if isinstance(message.get("author"), dict):
                converted = [_harmony_shaped(message)]
            else:
                converted = _chat_shaped(message)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # vLLM: a 500
            raise RequestError(f"Invalid previous_input_messages entry: {exc}", 400, "invalid_request_error",
                               "previous_input_messages") from None
        out.extend(m for m in converted if m.author.role not in (Role.SYSTEM, Role.DEVELOPER))
    return out


# -- input items -------------------------------------------------------------------------------


def _call_name(call_id: Any, earlier: list[Any]) -> str:
    for item in reversed(earlier):
        data = _as_dict(item)
        if data.get("type") == "function_call" and data.get("call_id") == call_id:
            return data.get("name", "")
    raise VLLMValidationError(f"No call message found for {call_id}", parameter="input")


def item_message(item: Any, earlier_calls: list[Any]) -> Any | None:
    """One input item as a Harmony message (None: nothing to render), vLLM's response_input_to_harmony."""
    from openai_harmony import Author, Message, Role

    data = _as_dict(item)
    kind = data.get("type")
    if kind is None or kind == "message":
        role, content = data["role"], data["content"]
        if role in ("system", "developer"):
            text = harmony.flatten_text(content)
            return harmony.developer_message(text, None) if text else None
        if isinstance(content, str):
            message = Message.from_role_and_content(Role(role), content)
        else:
            message = Message.from_role_and_contents(Role(role), _text_contents(content))
        return message.with_channel("final") if role == "assistant" else message
    if kind == "function_call_output":
        name = _call_name(data["call_id"], earlier_calls)
        return (Message.from_author_and_content(Author.new(Role.TOOL, f"functions.{name}"), data["output"])
                .with_channel("commentary").with_recipient("assistant"))
    if kind == "reasoning":
        content = data.get("content")
        if not content:
            return None
        return Message.from_role_and_content(Role.ASSISTANT, "\n".join(part["text"] for part in content)
                                             ).with_channel("analysis")
    if kind == "function_call":
        return (Message.from_role_and_content(Role.ASSISTANT, data["arguments"]).with_channel("commentary")
                .with_recipient(f"functions.{data['name']}").with_content_type("json"))
    raise VLLMValidationError(f"Unknown input type: {kind}", parameter="input")


def input_messages(items: Any, has_history: bool, previous_outputs: list[Any]) -> list[Any]:
    """The request's input as Harmony messages."""
    from openai_harmony import Message, Role

    if isinstance(items, str):
        return [Message.from_role_and_content(Role.USER, items)] if items or not has_history else []
    out: list[Any] = []
    earlier = list(previous_outputs)
    try:
        for item in items:
            message = item_message(item, earlier)
            if message is not None:
                out.append(message)
            if _as_dict(item).get("type") == "function_call":
                earlier.append(item)
    except RequestError as exc:
        raise _input_error(exc) from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # openai-harmony's pydantic errors
        raise _input_error(exc) from None  # (e.g. an output given as parts), odd shapes
    return out


def conversation(request: Any, effort: str | None, previous: list[Any] | None,
                 previous_outputs: list[Any]) -> list[Any]:
    """Every Harmony message of the prompt, in order. `previous`: the stored messages of the
    previous response (a continuation), else None; `previous_outputs`: its output items."""
    if previous is None:
        instructions, items = instructions_and_input(request)
        messages = preamble(instructions, request.tools, effort)
        messages.extend(previous_input_messages(request.previous_input_messages))
    else:
        items = request.input
        messages = list(previous)
    messages.extend(input_messages(items, bool(request.previous_input_messages), previous_outputs))
    return messages


# -- the stored form -----------------------------------------------------------------------------


def dump_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """Harmony messages as JSON-ready dicts (for the response store)."""
    return [json.loads(json.dumps(m.to_dict())) for m in messages]


def load_messages(data: list[dict[str, Any]]) -> list[Any]:
    from openai_harmony import Message

    return [Message.from_dict(d) for d in data]


__all__ = ["conversation", "preamble", "input_messages", "instructions_and_input", "previous_input_messages",
           "dump_messages", "load_messages"]
