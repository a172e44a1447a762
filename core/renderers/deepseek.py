"""DeepSeek V3.2 and V4 prompts: vLLM 0.33's renderer modes `deepseek_v32` and `deepseek_v4`.

These models ship no Jinja template; vLLM renders them with DeepSeek's Python prompt encoders
(`encoding_dsv32.py`, `encoding_dsv4.py` in the model repositories), wrapped by its tokenizer
modes. This module writes the same prompt text; the chat render then tokenizes it like a template's
output. The conversation is vLLM's (`core.chat_template.build_conversation`: content as a string
for V3.2, as OpenAI parts for V4; tool-call arguments parsed).

V4.1 (`deepseek_v41`): V4's format with `<｜System｜>`, a numeric effort preamble, space-prefixed
DSML tags and mid-conversation system turns; it reads the request's messages, not the template
conversation.
V3.2: thinking only when `thinking`/`enable_thinking` is true; tools go into a system message put
first; reasoning of earlier turns is dropped when the last message is the user's.
V4: thinking unless a `thinking`/`enable_thinking` kwarg says otherwise (`reasoning_effort: none`
turns it off); a reasoning-effort preamble in thinking mode; tools join the first system message;
tool results become `<tool_result>` blocks of a user turn, in the order of the calls.
A message these encoders refuse is a 400 with the encoder's message.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from core.protocol.common import VLLMValidationError

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
THINK, END_THINK = "<think>", "</think>"
DSML = "｜DSML｜"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
LATEST_REMINDER = "<｜latest_reminder｜>"
IMAGE = "<｜deepseek_image｜>"
TASKS = {"action": "<｜action｜>", "query": "<｜query｜>", "authority": "<｜authority｜>", "domain": "<｜domain｜>",
         "title": "<｜title｜>", "read_url": "<｜read_url｜>"}
RESPONSE_FORMAT = "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n{schema}"

V32_TOOLS = """## Tools
You have access to a set of tools you can use to answer the user's question.
You can invoke functions by writing a "<{dsml}function_calls>" block like the following as part of your reply to the user:
<{dsml}function_calls>
<{dsml}invoke name="$FUNCTION_NAME">
<{dsml}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{dsml}parameter>
...
</{dsml}invoke>
<{dsml}invoke name="$FUNCTION_NAME2">
...
</{dsml}invoke>
</{dsml}function_calls>
String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The "string" attribute should be set to "true" for string type parameters and "false" for other types (numbers, booleans, arrays, objects).
If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:
<{dsml}function_calls>
...
</{dsml}function_calls>
<function_results>
...
</function_results>
{think}...thinking about results{end_think}
Here are the functions available in JSONSchema format:
<functions>
{schemas}
</functions>
"""

V4_TOOLS = """## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "<{dsml}tool_calls>" block like the following:

<{dsml}tool_calls>
<{dsml}invoke name="$TOOL_NAME">
<{dsml}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{dsml}parameter>
...
</{dsml}invoke>
<{dsml}invoke name="$TOOL_NAME2">
...
</{dsml}invoke>
</{dsml}tool_calls>

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by {think}), you MUST output your complete reasoning inside {think}...{end_think} BEFORE any tool calls or final response.

Otherwise, output directly after {end_think} with tool calls or final response.

### Available Tool Schemas

{schemas}

You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.
"""

V4_EFFORT_PROMPTS = {
    "low": "",
    "high": (
        "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
        "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
        "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
        "scenarios.\n"
        "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
        "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n"),
    "max": (
        "Reasoning Effort: Beyond maximum — exhaustive, relentless, and uncompromising.\n"
        "You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: exhaustively "
        "decompose the problem into its most fundamental components, trace every causal chain to its root, and "
        "resolve the underlying cause rather than any surface symptom.\n"
        "Do not stop reasoning until you have independently verified the solution from multiple angles and are "
        "certain that no assumption remains unchecked and no error remains undiscovered.\n\n"),
}


class EncodeError(ValueError):
    """A message the encoder refuses (vLLM answers 400 with this message)."""


def to_json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(value, ensure_ascii=True)


def tools_section(template: str, tools: list[dict[str, Any]]) -> str:
    schemas = "\n".join(to_json(tool["function"]) for tool in tools)
    return template.format(dsml=DSML, think=THINK, end_think=END_THINK, schemas=schemas)


def dsml_calls(block: str, calls: list[dict[str, Any]]) -> str:
    """Earlier tool calls of an assistant message in DSML (arguments parsed if still a string)."""
    invokes = []
    for call in calls:
        fn = call["function"]
        args = fn["arguments"]
        if isinstance(args, str):
            args = json.loads(args)
        params = "\n".join(
            f'<{DSML}parameter name="{key}" string="{"true" if isinstance(value, str) else "false"}">'
            f'{value if isinstance(value, str) else to_json(value)}</{DSML}parameter>'
            for key, value in args.items())
        invokes.append(f'<{DSML}invoke name="{fn.get("name")}">\n{params}\n</{DSML}invoke>')
    return "\n\n" + f"<{DSML}{block}>\n" + "\n".join(invokes) + f"\n</{DSML}{block}>"


def last_user_index(messages: list[dict[str, Any]]) -> int:
    for idx in range(len(messages) - 1, -1, -1):
        if messages[idx].get("role") in ("user", "developer"):
            return idx
    return -1


def _with_response_format(text: str, message: dict[str, Any]) -> str:
    if message.get("response_format"):
        text += "\n\n" + RESPONSE_FORMAT.format(schema=to_json(message["response_format"]))
    return text


V4_KEPT_ROLES = ("user", "system", "tool", "latest_reminder", "direct_search_results")


def drop_old_reasoning(messages: list[dict[str, Any]], last: int, kept_roles: tuple[str, ...],
                       reasoning_key: str) -> list[dict[str, Any]]:
    """Before the last user turn: assistant messages lose their reasoning, developer messages
    (and other roles not kept) are dropped."""
    kept = []
    for idx, msg in enumerate(messages):
        role = msg.get("role")
        if role in kept_roles or idx >= last:
            kept.append(msg)
        elif role == "assistant":
            kept.append({k: v for k, v in msg.items() if k != reasoning_key})
    return kept


# -- V3.2 ------------------------------------------------------------------------------------


def encode_v32(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, kwargs: dict[str, Any]) -> str:
    thinking = bool(kwargs.get("thinking", False) or kwargs.get("enable_thinking", False))
    messages = list(messages)
    if tools:
        messages.insert(0, {"role": "system", "tools": tools})
    drop = bool(messages) and messages[-1]["role"] == "user"
    if thinking and drop:
        messages = drop_old_reasoning(messages, last_user_index(messages), ("user", "system", "tool"), "reasoning")
    last = last_user_index(messages)
    return BOS + "".join(_v32_message(i, messages, thinking, last) for i in range(len(messages)))


def _v32_message(index: int, messages: list[dict[str, Any]], thinking: bool, last: int) -> str:
    msg = messages[index]
    role, content = msg.get("role"), msg.get("content")
    tools, calls = msg.get("tools"), msg.get("tool_calls")
    opens = THINK if thinking and index == last else END_THINK
    if role == "system":
        out = content or ""
        if tools:
            out += "\n\n" + tools_section(V32_TOOLS, tools)
        return _with_response_format(out, msg)
    if role == "developer":
        if not content:
            raise EncodeError(f"Invalid message for role `{role}`: {msg}")
        inner = "\n\n" + tools_section(V32_TOOLS, tools) if tools else ""
        inner = _with_response_format(inner, msg) + f"\n\n# The user's message is: {content}"
        return f"{USER}{inner}{ASSISTANT}{opens}"
    if role == "user":
        return f"{USER}{content}{ASSISTANT}{opens}"
    if role == "tool":
        prev = index - 1
        while prev >= 0 and messages[prev].get("role") == "tool":
            prev -= 1
        assistant = messages[prev]  # index -1 wraps around, as the original encoder does
        if not (index == 0 or (prev >= 0 and assistant.get("role") == "assistant")):
            raise EncodeError(f"Invalid messages at {index}:\n{assistant}")
        order = index - prev
        owned = assistant.get("tool_calls")
        if not (owned and len(owned) >= order):
            raise EncodeError("No tool calls but found tool output")
        out = "\n\n<function_results>" if order == 1 else ""
        out += f"\n<result>{content}</result>"
        if order == len(owned):
            out += "\n</function_results>\n\n" + (THINK if thinking and index >= last else END_THINK)
        return out
    if role == "assistant":
        reasoning = msg.get("reasoning")
        call_text = dsml_calls("function_calls", calls) if calls else ""
        thought = ""
        if thinking and index > last:
            if not (reasoning or calls):
                raise EncodeError(f"ThinkingMode: thinking, invalid message without reasoning/tool_calls `{msg}` "
                                  "after last user message")
            thought = (reasoning or "") + END_THINK
        if not calls and msg.get("prefix", False):
            return content or ""
        return f"{thought}{content or ''}{call_text}{EOS}"
    raise EncodeError(f"Invalid role: {role}")


# -- V4 --------------------------------------------------------------------------------------


def _flatten(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    parts = []
    for block in content:
        if not isinstance(block, dict):
            parts.append(str(block))
        elif block.get("type") in ("image", "image_url"):
            parts.append(IMAGE)
        elif block.get("type") == "text":
            parts.append(block.get("text", ""))
        else:
            raise EncodeError(f"Unsupported content block type: {block.get('type')!r}")
    return "\n\n".join(parts)


def _v4_merge_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool results become `tool_result` blocks of user turns (V4 has no tool role)."""
    merged: list[dict[str, Any]] = []
    for msg in messages:
        msg = copy.deepcopy(msg)
        role = msg.get("role")
        prev = merged[-1] if merged else None
        joinable = prev is not None and prev.get("role") == "user" and "content_blocks" in prev
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": msg.get("tool_call_id", ""),
                     "content": msg.get("content", "")}
            if joinable:
                prev["content_blocks"].append(block)
            else:
                merged.append({"role": "user", "content_blocks": [block]})
        elif role == "user":
            text = _flatten(msg.get("content", ""))
            if joinable and prev.get("task") is None:
                prev["content_blocks"].append({"type": "text", "text": text})
            else:
                turn = {"role": "user", "content": text, "content_blocks": [{"type": "text", "text": text}]}
                turn.update({k: msg[k] for k in ("task", "wo_eos", "mask") if k in msg})
                merged.append(turn)
        else:
            merged.append(msg)
    return merged


def _v4_order_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each user turn's tool results in the order of the preceding assistant's calls."""
    order: dict[str, int] = {}
    for msg in messages:
        if msg.get("role") == "assistant" and msg.get("tool_calls"):
            order = {}
            for idx, call in enumerate(msg["tool_calls"]):
                call_id = call.get("id") or call.get("function", {}).get("id", "")
                if call_id:
                    order[call_id] = idx
        elif msg.get("role") == "user" and msg.get("content_blocks"):
            results = [b for b in msg["content_blocks"] if b.get("type") == "tool_result"]
            if len(results) > 1 and order:
                ranked = iter(sorted(results, key=lambda b: order.get(b.get("tool_use_id", ""), 0)))
                msg["content_blocks"] = [next(ranked) if b.get("type") == "tool_result" else b
                                         for b in msg["content_blocks"]]
    return messages


def v4_mode(kwargs: dict[str, Any]) -> tuple[bool, str | None]:
    """(thinking, reasoning effort) from the template kwargs, as vLLM's deepseek_v4 mode reads them."""
    thinking = bool(kwargs.get("thinking")) or bool(kwargs.get("enable_thinking"))
    if "thinking" not in kwargs and "enable_thinking" not in kwargs:
        thinking = True
    effort = kwargs.get("reasoning_effort")
    if not isinstance(effort, str):
        effort = "high" if thinking else None
    elif effort == "none":
        thinking, effort = False, None
    elif effort != "max":
        effort = "low" if effort in ("low", "minimal", "medium") else "high"
    return thinking, effort


def encode_v4(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, kwargs: dict[str, Any]) -> str:
    thinking, effort = v4_mode(kwargs)
    messages = list(messages)
    if tools:
        at = next((i for i, m in enumerate(messages) if m.get("role") == "system"), None)
        if at is None:
            messages.insert(0, {"role": "system"})
            at = 0
        else:
            messages[at] = copy.copy(messages[at])
        messages[at]["tools"] = tools
    drop = kwargs.get("drop_thinking", True)
    messages = _v4_order_tool_results(_v4_merge_tool_results(messages))
    if any(m.get("tools") for m in messages):
        drop = False
    if thinking and drop:
        messages = drop_old_reasoning(messages, last_user_index(messages), V4_KEPT_ROLES, "reasoning")
    last = last_user_index(messages)
    return BOS + "".join(_v4_message(i, messages, thinking, drop, effort, last) for i in range(len(messages)))


def _v4_user_blocks(blocks: list[dict[str, Any]]) -> str:
    parts = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind in ("image", "image_url"):
            parts.append(IMAGE)
        elif kind == "tool_result":
            result = block.get("content", "")
            if isinstance(result, list):
                result = "\n\n".join(b.get("text", "") if b.get("type") == "text" else f"[Unsupported {b.get('type')}]"
                                     for b in result)
            parts.append(f"<tool_result>{result}</tool_result>")
        else:
            parts.append(f"[Unsupported {kind}]")
    return "\n\n".join(parts)


def _assistant_turn(msg: dict[str, Any], index: int, messages: list[dict[str, Any]], thinking: bool, drop: bool,
                    last: int, reasoning_key: str, call_text: str) -> str:
    """An assistant message of V4 / V4.1: its reasoning when kept, content, calls, EOS."""
    after_task = index >= 1 and messages[index - 1].get("task") is not None
    thought = ""
    if thinking and not after_task and (not drop or index > last):
        thought = (msg.get(reasoning_key) or "") + END_THINK
    return f"{thought}{msg.get('content') or ''}{call_text}" + ("" if msg.get("wo_eos", False) else EOS)


def _next_turn(out: str, index: int, messages: list[dict[str, Any]], thinking: bool, drop: bool, last: int,
               opens_assistant: bool) -> str:
    """What follows a V4 / V4.1 message: nothing before another turn, else a task token or the
    assistant header with its think tag."""
    if index + 1 < len(messages) and messages[index + 1].get("role") not in ("assistant", "latest_reminder"):
        return out
    task = messages[index].get("task")
    if task is not None:
        if task not in TASKS:
            raise EncodeError(f"Invalid task: '{task}'. Valid tasks are: {list(TASKS)}")
        if task != "action":
            return out + TASKS[task]
        return out + ASSISTANT + (THINK if thinking else END_THINK) + TASKS[task]
    if opens_assistant:
        out += ASSISTANT + (THINK if thinking and (not drop or index >= last) else END_THINK)
    return out


def _user_side_turn(msg: dict[str, Any], content: Any, tools_template: str) -> str:
    """A V4 / V4.1 developer, user or latest_reminder message (the tool results merged into users)."""
    role = msg.get("role")
    if role == "developer":
        if not content:
            raise EncodeError(f"Invalid message for role `{role}`: {msg}")
        inner = USER + content
        if msg.get("tools"):
            inner += "\n\n" + tools_section(tools_template, msg["tools"])
        return _with_response_format(inner, msg)
    if role == "user":
        blocks = msg.get("content_blocks")
        return USER + (_v4_user_blocks(blocks) if blocks else content or "")
    return LATEST_REMINDER + f"{content}"


def _v4_message(index: int, messages: list[dict[str, Any]], thinking: bool, drop: bool, effort: str | None,
                last: int) -> str:
    msg = messages[index]
    role, content = msg.get("role"), _flatten(msg.get("content"))
    tools, calls = msg.get("tools"), msg.get("tool_calls")
    effort = effort or "low"
    if effort not in V4_EFFORT_PROMPTS:
        raise EncodeError(f"Invalid reasoning effort: {effort}, expected one of {list(V4_EFFORT_PROMPTS)}")
    out = V4_EFFORT_PROMPTS[effort] if index == 0 and thinking else ""
    if role == "system":
        out += content or ""
        if tools:
            out += "\n\n" + tools_section(V4_TOOLS, tools)
        out = _with_response_format(out, msg)
    elif role in ("developer", "user", "latest_reminder"):
        out += _user_side_turn(msg, content, V4_TOOLS)
    elif role == "tool":
        raise EncodeError("deepseek_v4 merges tool messages into user; please preprocess with merge_tool_messages()")
    elif role == "assistant":
        call_text = dsml_calls("tool_calls", calls) if calls else ""
        out += _assistant_turn({**msg, "content": content}, index, messages, thinking, drop, last, "reasoning",
                               call_text)
    else:
        raise EncodeError(f"Invalid role: {role}")
    # a trailing system message opens generation, one followed by an assistant opens that turn
    opens = role in ("user", "developer") or (role == "system" and (
        index == len(messages) - 1 or messages[index + 1].get("role") == "assistant"))
    return _next_turn(out, index, messages, thinking, drop, last, opens)


# -- V4.1 ------------------------------------------------------------------------------------

SYSTEM = "<｜System｜>"
V41_EFFORTS = {"low": 50, "high": 75, "xhigh": 75, "max": 100}
V41_PARTS_TEXT = ("text", "input_text", "output_text")
V41_PARTS_IMAGE = ("image_url", "input_image", "image_pil")


def _v41_normalize(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """vLLM's deepseek_v41 message normalization (the request's messages, not the template conversation)."""
    out = [dict(m) for m in copy.deepcopy(messages)]
    for msg in out:
        role = msg.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise EncodeError(f"Invalid role: {role}")
        if "reasoning" in msg:
            msg["reasoning_content"] = msg["reasoning"]
        _v41_no_image_text(msg.get("reasoning_content"))
        content = msg.get("content")
        if isinstance(content, str):
            _v41_no_image_text(content)
        elif isinstance(content, list):
            parts = []
            for part in content:
                kind = part.get("type")
                if kind in V41_PARTS_TEXT:
                    _v41_no_image_text(part.get("text"))
                    parts.append(part.get("text", ""))
                elif kind in V41_PARTS_IMAGE:
                    parts.append(IMAGE)
                else:
                    raise EncodeError(f"DeepSeek V4.1 supports text and image content only; got {kind!r}")
            msg["content"] = "\n\n".join(parts)
    return out


def _v41_no_image_text(text: Any) -> None:
    if isinstance(text, str) and IMAGE in text:
        raise EncodeError(f"Message text contains image special token {IMAGE!r}; provide images as image "
                          "content parts.")


def v41_mode(kwargs: dict[str, Any]) -> tuple[bool, Any]:
    thinking = bool(kwargs.get("thinking") or kwargs.get("enable_thinking"))
    if "thinking" not in kwargs and "enable_thinking" not in kwargs:
        thinking = True
    effort = kwargs.get("reasoning_effort")
    if effort == "none":
        thinking, effort = False, None
    if effort is None:
        effort = "high"
    if not ((type(effort) is int and 1 <= effort <= 100) or (isinstance(effort, str) and effort in V41_EFFORTS)):
        raise EncodeError("DeepSeek V4.1 reasoning_effort must be low, high, xhigh, max, or an integer within "
                          "[1, 100] in chat_template_kwargs")
    return thinking, effort


def _v41_merge_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] = []
    for msg in messages:
        msg = copy.deepcopy(msg)
        role = msg.get("role")
        prev = merged[-1] if merged else None
        joinable = prev is not None and prev.get("role") == "user" and "content_blocks" in prev
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": msg.get("tool_call_id", ""), "content": msg.get("content", "")}
            if joinable:
                prev["content_blocks"].append(block)
            else:
                merged.append({"role": "user", "content_blocks": [block]})
        elif role == "user":
            blocks = msg.get("content_blocks")
            if blocks is None:
                blocks = [{"type": "text", "text": msg.get("content", "")}]
            if joinable and prev.get("task") is None:
                prev["content_blocks"].extend(blocks)
            else:
                msg["content_blocks"] = blocks
                merged.append(msg)
        else:
            merged.append(msg)
    return merged


def _v41_last_user(messages: list[dict[str, Any]]) -> int:
    """User/developer turns and mid-conversation system messages; a user turn of tool results only is not one."""
    for idx in range(len(messages) - 1, -1, -1):
        role = messages[idx].get("role")
        if role in ("user", "developer") or (role == "system" and idx > 0):
            blocks = messages[idx].get("content_blocks")
            if blocks and not any(b.get("type") in ("text", "image", "image_url") for b in blocks):
                continue
            return idx
    return -1


def _v41_arguments(call: dict[str, Any]) -> dict[str, Any]:
    args = call["function"]["arguments"]
    if not isinstance(args, dict):
        for _ in range(2):  # JSON strings, double-encoded ones too
            if not isinstance(args, str):
                break
            try:
                args = json.loads(args)
            except ValueError:
                break
        if not isinstance(args, dict):
            args = {"arguments": call["function"]["arguments"]}
    return args


def encode_v41(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, kwargs: dict[str, Any]) -> str:
    messages = _v41_normalize(messages)
    if tools:
        system = next((m for m in messages if m["role"] == "system"), None)
        if system is None:
            system = {"role": "system", "content": ""}
            messages.insert(0, system)
        system["tools"] = tools
    thinking, effort = v41_mode(kwargs)
    drop = kwargs.get("drop_thinking", True)
    messages = _v4_order_tool_results(_v41_merge_tool_results(messages))
    if any(m.get("tools") for m in messages):
        drop = False
    if thinking and drop:
        messages = drop_old_reasoning(messages, _v41_last_user(messages), V4_KEPT_ROLES, "reasoning_content")
    last = _v41_last_user(messages)
    return BOS + "".join(_v41_message(i, messages, thinking, drop, effort, last) for i in range(len(messages)))


def _v41_message(index: int, messages: list[dict[str, Any]], thinking: bool, drop: bool, effort: Any,
                 last: int) -> str:
    msg = messages[index]
    role, content = msg.get("role"), msg.get("content")
    tools, calls = msg.get("tools"), msg.get("tool_calls")
    budget = V41_EFFORTS[effort] if isinstance(effort, str) else effort
    effort_text = (f"Reasoning Effort: {budget} (range 1-100, the higher the value, the more thorough the "
                   "reasoning)\n\n") if index == 0 and thinking else ""
    out = (SYSTEM if index == 0 and (effort_text or role == "system") else "") + effort_text
    if role == "system":
        out += (SYSTEM if index > 0 else "") + (content or "")
        if tools:
            out += "\n\n" + tools_section(V41_TOOLS, tools)
        out = _with_response_format(out, msg)
    elif role in ("developer", "user", "latest_reminder"):
        out += _user_side_turn(msg, content, V41_TOOLS)
    elif role == "assistant":
        call_text = ""
        if calls:
            invokes = []
            for call in calls:
                params = "\n".join(
                    f'<{DSML} parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
                    f'{v if isinstance(v, str) else to_json(v)}</{DSML} parameter>'
                    for k, v in _v41_arguments(call).items())
                invokes.append(f'<{DSML} invoke name="{call["function"].get("name")}">\n{params}\n</{DSML} invoke>')
            call_text = "\n\n" + f"<{DSML} calls>\n" + "\n".join(invokes) + f"\n</{DSML} calls>"
        out += _assistant_turn(msg, index, messages, thinking, drop, last, "reasoning_content", call_text)
    else:
        raise EncodeError(f"Unknown role: {role}")
    # mid-conversation system messages open the assistant turn too
    opens = role in ("user", "developer") or (role == "system" and index > 0)
    return _next_turn(out, index, messages, thinking, drop, last, opens)


V41_TOOLS = V4_TOOLS.replace("<{dsml}tool_calls>", "<{dsml} calls>").replace("</{dsml}tool_calls>", "</{dsml} calls>") \
    .replace("<{dsml}invoke", "<{dsml} invoke").replace("</{dsml}invoke>", "</{dsml} invoke>") \
    .replace("<{dsml}parameter", "<{dsml} parameter").replace("</{dsml}parameter>", "</{dsml} parameter>")


def fim_prompt(prefix: str, suffix: str) -> str:
    """DeepSeek V4's fill-in-the-middle completion prompt (a completion with `suffix`)."""
    return f"<｜fim▁begin｜>{prefix}<｜fim▁hole｜>{suffix}<｜fim▁end｜>"


ENCODERS = {"deepseek_v32": encode_v32, "deepseek_v4": encode_v4, "deepseek_v41": encode_v41}
# the content form of the conversation each encoder reads (vLLM's parse_chat_messages format);
# None: the request's own messages (V4.1 normalizes them itself)
CONTENT_FORMATS = {"deepseek_v32": "string", "deepseek_v4": "openai", "deepseek_v41": None}


def render_prompt(mode: str, conversation: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  kwargs: dict[str, Any]) -> str:
    try:
        return ENCODERS[mode](conversation, tools, kwargs)
    except EncodeError as exc:
        raise VLLMValidationError(str(exc)) from None
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise VLLMValidationError(f"{mode} cannot encode these messages: {exc}") from None
