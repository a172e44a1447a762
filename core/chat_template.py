"""Chat templates rendered exactly as vLLM 0.33 renders them (through transformers' apply_chat_template).

Three things decide the prompt text, and each follows vLLM / transformers:

* the Jinja environment: transformers' sandbox (`trim_blocks`, `lstrip_blocks`, loop controls,
  the `{% generation %}` tag, a `tojson` that keeps non-ASCII, `raise_exception`,
  `strftime_now`), with the tokenizer's special tokens in the namespace;
* the conversation: vLLM rebuilds every message (content parts joined to one string or kept
  as typed parts, depending on what the template iterates; tool-call arguments parsed into
  dicts; `reasoning` mirrored as `reasoning_content`; `developer` turned into `system` when
  the template does not know it);
* the kwargs: only those the template references or that apply_chat_template accepts reach it.

Compiling and analysing a template costs milliseconds, so it happens once per distinct
template text (`load_template`, an LRU cache); rendering is the only per-request work.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

import jinja2
import jinja2.ext
import jinja2.meta
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from core.errors import shown
from core.protocol.common import VLLMValidationError
from core.template_sandbox import BoundedSandbox, TemplateBudget, TemplateBudgetExceeded, render_bounded

ContentFormat = Literal["string", "openai"]

# transformers' apply_chat_template parameters (vLLM always lets these through)
APPLY_CHAT_TEMPLATE_PARAMS = frozenset({
    "self", "conversation", "tools", "documents", "chat_template", "add_generation_prompt",
    "continue_final_message", "tokenize", "sanitize_control_tokens", "padding", "truncation",
    "max_length", "return_tensors", "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs"})
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "

TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "refusal", "thinking"})
_PART_TEXT_KEY = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal",
                  "thinking": "thinking"}
_MEDIA_PART_TYPES = frozenset({"image_url", "input_image", "image_embeds", "audio_embeds", "video_embeds",
                               "prompt_embeds", "image_pil", "audio_url", "input_audio", "video_url"})
_SUPPORTED_PART_TYPES = sorted(TEXT_PART_TYPES | _MEDIA_PART_TYPES | {"tool_reference"})
# keys of the OpenAI/vLLM content-part types; anything else on a text part is passed through
_KNOWN_PART_FIELDS = frozenset({
    "audio_embeds", "audio_url", "closed", "data", "file", "image_embeds", "image_pil", "image_url",
    "input_audio", "name", "prompt_cache_breakpoint", "refusal", "text", "thinking", "type", "uuid",
    "video_embeds", "video_url"})
_MEDIA_KEYS = ("image_url", "image_pil", "image_embeds", "audio_embeds", "video_embeds", "prompt_embeds",
               "audio_url", "input_audio", "video_url")
_BILLING_HEADER = "x-anthropic-billing-header"


# -- the Jinja environment ---------------------------------------------------------------


class _GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` (assistant-mask markup): rendered transparently."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller: Any) -> str:
        return caller()


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    # transformers' override: no HTML escaping, non-ASCII kept
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


def _make_environment(sandbox: type[ImmutableSandboxedEnvironment] = ImmutableSandboxedEnvironment
                      ) -> ImmutableSandboxedEnvironment:
    env = sandbox(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _make_bounded_environment() -> BoundedSandbox:
    env = _make_environment(BoundedSandbox)
    assert isinstance(env, BoundedSandbox)
    env.bound_filters()
    return env


_ENV = _make_environment()  # the server's templates (--chat-template, the tokenizer's)
_BOUNDED_ENV = _make_bounded_environment()  # the templates requests bring (core.template_sandbox)


@dataclass(frozen=True)
class ChatTemplate:
    """A compiled template and what vLLM derives from its source once."""

    source: str
    compiled: jinja2.Template
    variables: frozenset[str]  # undeclared variables: the kwargs the template can read
    content_format: ContentFormat
    knows_developer_role: bool
    bounded: bool = False  # a request's template: rendered under a TemplateBudget

    def accepts(self, name: str) -> bool:
        return name in self.variables or name in APPLY_CHAT_TEMPLATE_PARAMS


@lru_cache(maxsize=64)
def load_template(source: str, bounded: bool = False) -> ChatTemplate:
    """Compile and analyse a template (cached by its text); `bounded`: for a request's template
    (core.template_sandbox). A template that does not compile is a 400, whatever the reason: a
    Jinja syntax error, Python's compile of it (`{% break %}` outside a loop), nesting too deep."""
    env = _BOUNDED_ENV if bounded else _ENV
    try:
        ast = env.parse(source)
        compiled = env.from_string(ast)
        variables = frozenset(jinja2.meta.find_undeclared_variables(ast))
    except jinja2.TemplateError as exc:
        raise VLLMValidationError(str(exc)) from None
    except (SyntaxError, RecursionError, ValueError, TypeError, MemoryError) as exc:
        raise VLLMValidationError(f"The chat template does not compile: {shown(str(exc), limit=500)}") from None
    return ChatTemplate(source=source, compiled=compiled, variables=variables,
                        content_format=detect_content_format(ast),
                        knows_developer_role='"developer"' in source or "'developer'" in source, bounded=bounded)


def select_template(tokenizer_template: str | dict[str, str] | None, requested: str | None,
                    has_tools: bool) -> str | None:
    """transformers' get_chat_template: a request/flag template, else the tokenizer's (named ones too)."""
    if isinstance(tokenizer_template, dict):
        if requested is not None and requested in tokenizer_template:
            return tokenizer_template[requested]
        if requested is not None:
            return requested
        if has_tools and "tool_use" in tokenizer_template:
            return tokenizer_template["tool_use"]
        return tokenizer_template.get("default")
    return requested if requested is not None else tokenizer_template


# -- content format detection (does the template loop over message content?) -------------


def _is_var(node: jinja2.nodes.Node, name: str) -> bool:
    if isinstance(node, jinja2.nodes.Name):
        return node.ctx == "load" and node.name == name
    if isinstance(node, jinja2.nodes.Getattr) and "." in name:
        base, _, attr = name.rpartition(".")
        return node.attr == attr and _is_var(node.node, base)
    return False


def _is_attr(node: jinja2.nodes.Node, name: str, key: str) -> bool:
    if isinstance(node, jinja2.nodes.Getitem):
        return _is_var(node.node, name) and isinstance(node.arg, jinja2.nodes.Const) and node.arg.value == key
    if isinstance(node, jinja2.nodes.Getattr):
        return _is_var(node.node, name) and node.attr == key
    return False


def _accesses(node: jinja2.nodes.Node, name: str, key: str | None = None) -> bool:
    """`name` (or `name.key`), possibly through filters, tests or slices."""
    if isinstance(node, jinja2.nodes.Filter):
        return node.node is not None and _accesses(node.node, name, key)
    if isinstance(node, jinja2.nodes.Test):
        return _accesses(node.node, name, key)
    if isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice):
        return _accesses(node.node, name, key)
    return _is_attr(node, name, key) if key else _is_var(node, name)


def _dotted(node: jinja2.nodes.Node) -> str | None:
    if isinstance(node, jinja2.nodes.NSRef):
        return f"{node.name}.{node.attr}"
    parts = []
    while isinstance(node, jinja2.nodes.Getattr):
        parts.append(node.attr)
        node = node.node
    if isinstance(node, jinja2.nodes.Name):
        parts.append(node.name)
        return ".".join(reversed(parts))
    return None


def _aliases_of(root: jinja2.nodes.Node, varname: str) -> Iterator[str]:
    """`varname` and every variable assigned from it (transitively), namespace attributes included."""
    yield varname
    seen = {varname}
    queue = deque([varname])
    while queue:
        current = queue.popleft()
        for assign in root.find_all(jinja2.nodes.Assign):
            lhs, rhs = assign.target, assign.node
            found: list[str] = []
            if isinstance(lhs, jinja2.nodes.Name) and _accesses(rhs, current):
                found.append(lhs.name)
            if (isinstance(lhs, jinja2.nodes.Name) and isinstance(rhs, jinja2.nodes.Call)
                    and isinstance(rhs.node, jinja2.nodes.Name) and rhs.node.name == "namespace"):
                found += [f"{lhs.name}.{kw.key}" for kw in rhs.kwargs if _accesses(kw.value, current)]
            elif isinstance(lhs, (jinja2.nodes.Getattr, jinja2.nodes.NSRef)) and _accesses(rhs, current):
                dotted = _dotted(lhs)
                if dotted is not None:
                    found.append(dotted)
            for name in found:
                yield name
                if name not in seen:
                    seen.add(name)
                    queue.append(name)


def _message_loop_vars(root: jinja2.nodes.Node) -> list[str]:
    message_lists = list(_aliases_of(root, "messages"))
    out = []
    for loop in root.find_all(jinja2.nodes.For):
        if any(_accesses(loop.iter, name) for name in message_lists) and isinstance(loop.target, jinja2.nodes.Name):
            out.append(loop.target.name)
    return out


def _loops_over_content(root: jinja2.nodes.Node) -> bool:
    message_vars = _message_loop_vars(root)
    macro_params_by_loop: dict[int, set[str]] = {}
    loops_in_macros: set[int] = set()
    for macro in root.find_all(jinja2.nodes.Macro):
        names = {arg.name for arg in macro.args}
        content_params: set[str] = set()
        for call in root.find_all(jinja2.nodes.Call):
            if not (isinstance(call.node, jinja2.nodes.Name) and call.node.name == macro.name):
                continue
            for i, arg in enumerate(call.args):
                if i < len(macro.args) and any(_accesses(arg, v, "content") for v in message_vars):
                    content_params.add(macro.args[i].name)
            for kw in call.kwargs:
                if kw.key in names and any(_accesses(kw.value, v, "content") for v in message_vars):
                    content_params.add(kw.key)
        for loop in macro.find_all(jinja2.nodes.For):
            loops_in_macros.add(id(loop))
            if content_params:
                macro_params_by_loop[id(loop)] = content_params
    for loop in root.find_all(jinja2.nodes.For):
        if any(_accesses(loop.iter, v, "content") for v in message_vars):
            return True
        params = macro_params_by_loop.get(id(loop))
        if isinstance(loop.iter, jinja2.nodes.Name):
            if params is not None and loop.iter.name in params:
                return True
            if id(loop) not in loops_in_macros and loop.iter.name == "content":
                return True
    return False


def detect_content_format(ast: jinja2.nodes.Template) -> ContentFormat:
    """vLLM's rule: "openai" (typed parts) if the template iterates message content, else "string"."""
    try:
        return "openai" if _loops_over_content(ast) else "string"
    except Exception:
        return "string"


# -- messages -> conversation -------------------------------------------------------------


def _part_text(part: Any) -> tuple[str, Any]:
    """(part type, its payload) for one content part, as vLLM classifies it."""
    if not isinstance(part, dict):
        raise VLLMValidationError("Invalid content part: expected an object or a string.", parameter="messages")
    part_type = part.get("type")
    uuid = part.get("uuid")
    if isinstance(part_type, str) and uuid is None and part_type in _PART_TEXT_KEY:
        return part_type, part.get(_PART_TEXT_KEY[part_type])
    if isinstance(part_type, str) and uuid is None and part_type == "tool_reference":
        return part_type, part.get("name")
    if isinstance(part_type, str) and uuid is None and part_type in _MEDIA_PART_TYPES:
        return part_type, part
    if part_type is None or uuid is not None:
        for key in _MEDIA_KEYS:
            if key in part:
                return key, part
        if "tool_reference" in part:
            return "tool_reference", part.get("name")
        raise VLLMValidationError("Missing 'type' field in multimodal part.", parameter="type")
    if not isinstance(part_type, str):
        raise VLLMValidationError("Invalid 'type' field in multimodal part.", parameter="type")
    raise VLLMValidationError(f"Unsupported chat content part type: {shown(part_type, quote=True)}. "
                              f"Supported types: {', '.join(_SUPPORTED_PART_TYPES)}.",
                              parameter="type", value=part_type)


def _strip_billing_header(parts: list[Any]) -> list[Any]:
    out: list[Any] = []
    for part in parts:
        text = part if isinstance(part, str) else (
            part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None)
        if not (isinstance(text, str) and text.startswith(_BILLING_HEADER)):
            out.append(part)
            continue
        rest = text.partition("\n")[2]
        if rest:
            out.append(rest if isinstance(part, str) else {**part, "text": rest})
    return out


def _convert_content(role: str, content: Any, wrap: bool, model_name: str) -> Any:
    if content is None:
        parts: list[Any] = []
    elif isinstance(content, str):
        parts = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        parts = content
    else:
        raise VLLMValidationError("Message content must be a string or a list of content parts.",
                                  parameter="messages")
    if role == "system":
        parts = _strip_billing_header(parts)
    pieces: list[Any] = []
    for part in parts:
        if isinstance(part, str):
            if wrap:
                pieces.append({"type": "text", "text": part})
            elif part:  # vLLM keeps only truthy parts: "" vanishes in string format
                pieces.append(part)
            continue
        part_type, payload = _part_text(part)
        if part_type in ("text", "refusal") and payload is None:
            continue  # vLLM skips text parts without text
        if part_type in TEXT_PART_TYPES:
            if not isinstance(payload, str):
                raise VLLMValidationError("Content part text must be a string.", parameter="messages")
            if wrap:
                item = {"type": "text", "text": payload}
                item.update({k: v for k, v in part.items() if k not in _KNOWN_PART_FIELDS})
                pieces.append(item)
            elif payload:
                pieces.append(payload)
        elif part_type == "tool_reference":
            if wrap:
                pieces.append({"type": "tool_reference", "name": payload})
            elif payload:
                pieces.append(payload)
        else:
            raise VLLMValidationError(f"{model_name} is not a multimodal model")
    if wrap:
        return pieces
    return "\n".join(p for p in pieces if isinstance(p, str))


def build_conversation(messages: list[dict[str, Any]], content_format: ContentFormat,
                       model_name: str) -> list[dict[str, Any]]:
    """vLLM's parse_chat_messages for text-only models: the dicts the template iterates."""
    wrap = content_format == "openai"
    conversation: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        out: dict[str, Any] = {"role": role, "content": _convert_content(role, message.get("content"), wrap,
                                                                         model_name)}
        if role == "assistant":
            tool_calls = message.get("tool_calls")
            if tool_calls is not None:
                if not isinstance(tool_calls, list):
                    raise VLLMValidationError("assistant tool_calls must be a list.", parameter="tool_calls")
                out["tool_calls"] = [_copy_tool_call(tc) for tc in tool_calls]
            reasoning = message.get("reasoning")
            if reasoning is not None:
                out["reasoning"] = reasoning
                out["reasoning_content"] = reasoning
        elif role == "tool":
            if "tool_call_id" in message:
                out["tool_call_id"] = message["tool_call_id"]
            content = out["content"]
            if isinstance(content, list):
                if not any(isinstance(i, dict) and i.get("type") != "text" for i in content):
                    texts = [i.get("text", "") for i in content if isinstance(i, dict) and i.get("type") == "text"]
                    out["content"] = "\n".join(texts) if texts else ""
        if isinstance(message.get("name"), str):
            out["name"] = message["name"]
        if isinstance(message.get("task"), str):
            out["task"] = message["task"]
        if role == "developer":
            out["tools"] = message.get("tools")
        conversation.append(out)
    parse_tool_call_arguments(conversation)
    return conversation


def _copy_tool_call(item: Any) -> Any:
    # copied two levels deep: arguments are replaced by a dict without touching the request
    if isinstance(item, dict):
        item = dict(item)
        if isinstance(item.get("function"), dict):
            item["function"] = dict(item["function"])
    return item


def parse_tool_call_arguments(conversation: list[dict[str, Any]]) -> None:
    """Templates expect assistant tool-call arguments as dicts (transformers' convention)."""
    for message in conversation:
        if message["role"] != "assistant" or "tool_calls" not in message:
            continue
        tool_calls = message["tool_calls"]
        if not tool_calls:
            message.pop("tool_calls", None)
            continue
        for item in tool_calls:
            if not isinstance(item, dict):
                raise VLLMValidationError("assistant tool_calls entries must be objects.", parameter="tool_calls")
            function = item.get("function")
            if item.get("type", "function") != "function" or not isinstance(function, dict):
                raise VLLMValidationError("chat completions only support assistant tool_calls of type 'function'.",
                                          parameter="tool_calls")
            arguments = function.get("arguments")
            if not arguments:
                function["arguments"] = {}
                continue
            if isinstance(arguments, dict):
                continue
            parsed: Any = arguments
            if isinstance(arguments, str):
                try:
                    parsed = json.loads(arguments)
                except json.JSONDecodeError:
                    parsed = None  # malformed history must not break every later turn
            function["arguments"] = parsed if isinstance(parsed, dict) else {}


def developer_to_system(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For templates without a developer role: developer -> system, then all system messages merged first."""
    converted = []
    for message in conversation:
        if message["role"] == "developer":
            message = {k: v for k, v in message.items() if k != "tools"}
            message["role"] = "system"
        converted.append(message)
    system_texts: list[str] = []
    others: list[dict[str, Any]] = []
    merge = False
    for i, message in enumerate(converted):
        if message["role"] != "system":
            others.append(message)
            continue
        if i > 0 or system_texts:
            merge = True
        content = message.get("content", "")
        if isinstance(content, list):
            content = "\n".join(p["text"] if isinstance(p, dict) and "text" in p else p
                                for p in content if isinstance(p, (dict, str))
                                and (isinstance(p, str) or "text" in p))
        if content:
            system_texts.append(content)
    if not merge:
        return converted
    return [{"role": "system", "content": "\n\n".join(system_texts)}, *others]


# -- rendering ---------------------------------------------------------------------------


def render(template: ChatTemplate, conversation: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None,
           kwargs: dict[str, Any], special_tokens: dict[str, str], budget: TemplateBudget | None = None) -> str:
    """transformers' apply_chat_template(tokenize=False) with vLLM's kwargs filter and error mapping.

    `kwargs` are the effective chat-template kwargs (already merged); those the template does
    not reference and apply_chat_template does not accept are dropped, as vLLM does. A bounded
    (request) template renders under `budget`; going over it is a 400.
    """
    if "chat_template" in kwargs or "tokenize" in kwargs:
        unexpected = {"chat_template", "tokenize"} & kwargs.keys()
        raise VLLMValidationError(f"Found unexpected chat template kwargs from request: {unexpected}")
    accepted = {k: v for k, v in kwargs.items() if template.accepts(k)}
    try:
        return _apply(template, conversation, tools, accepted, special_tokens, budget)
    except VLLMValidationError:
        raise
    except TemplateBudgetExceeded as exc:
        raise VLLMValidationError(str(exc)) from None
    except Exception as exc:  # a template rejecting its input is the client's problem (vLLM: 400)
        raise VLLMValidationError(_error_reason(exc)) from None


def _error_reason(exc: BaseException) -> str:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, jinja2.TemplateError):
            return str(current)
        current = current.__cause__ or current.__context__
    return str(exc)


def _apply(template: ChatTemplate, conversation: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
           kwargs: dict[str, Any], special_tokens: dict[str, str], budget: TemplateBudget | None) -> str:
    add_generation_prompt = kwargs.pop("add_generation_prompt", False)
    continue_final = kwargs.pop("continue_final_message", False)
    documents = kwargs.pop("documents", None)
    if kwargs.pop("return_assistant_tokens_mask", False):
        raise ValueError("`return_assistant_tokens_mask=True` requires `return_dict=True` and `tokenize=True`")
    if not conversation:
        raise ValueError("Cannot apply chat template to an empty conversation. Provide at least one message.")
    if continue_final and add_generation_prompt:
        raise ValueError(
            "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message when "
            "you want the model to continue the final message, and add_generation_prompt when you want to add a "
            "header that will prompt it to start a new assistant message instead.")
    if kwargs.pop("sanitize_control_tokens", False):
        raise ValueError("`sanitize_control_tokens=True` requires `tokenize=True` and is not compatible with "
                         "`return_assistant_tokens_mask=True`.")
    for name in APPLY_CHAT_TEMPLATE_PARAMS:  # consumed by apply_chat_template, never template variables
        kwargs.pop(name, None)
    if documents is not None:
        for document in documents:
            if not isinstance(document, dict):
                raise TypeError("Documents should be a list of dicts with 'title' and 'text' keys!")
    final_text = None
    if continue_final:
        field = continue_final if isinstance(continue_final, str) else "content"
        conversation = [*conversation[:-1], _deepish_copy(conversation[-1])]
        final_text = _mark_final_message(conversation[-1], field, template.source)
    namespace = {**special_tokens, **kwargs}
    if template.bounded:
        if budget is None:
            raise ValueError("a request's chat template renders only with a budget")
        rendered = render_bounded(template.compiled, budget, messages=conversation, tools=tools, documents=documents,
                                  add_generation_prompt=add_generation_prompt, **namespace)
    else:
        rendered = template.compiled.render(messages=conversation, tools=tools, documents=documents,
                                            add_generation_prompt=add_generation_prompt, **namespace)
    if continue_final:
        assert final_text is not None
        if final_text.strip() not in rendered or _CONTINUE_TAG.strip() not in rendered:
            raise ValueError(
                "continue_final_message is set but the final message does not appear in the chat after applying "
                "the chat template! This can happen if the chat template deletes portions of the final message. "
                "Please verify the chat template and final message in your chat to ensure they are compatible."
                f"Final message to continue: {final_text.strip()}\nRendered chat:\n{rendered}")
        at = rendered.rindex(_CONTINUE_TAG.strip())
        if rendered[at:at + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
            rendered = rendered[:at]
        else:
            rendered = rendered[:at].rstrip()
    return rendered


def _deepish_copy(message: dict[str, Any]) -> dict[str, Any]:
    out = dict(message)
    if isinstance(out.get("content"), list):
        out["content"] = [dict(p) if isinstance(p, dict) else p for p in out["content"]]
    return out


def _mark_final_message(message: dict[str, Any], field: str, source: str) -> str:
    final = message.get(field)
    if final is None:
        raise ValueError(f'continue_final_message is set but the final message has no "{field}" to continue!')
    if field not in source:
        raise ValueError(f'continue_final_message is set to "{field}" but this is not an accepted field in the '
                         "chat_template")
    if isinstance(final, (list, tuple)):
        for block in reversed(final):
            if isinstance(block, dict) and "text" in block:
                text = block["text"]
                block["text"] = text + _CONTINUE_TAG
                return text
        raise ValueError("continue_final_message is set but we could not find any text to continue in the final "
                         "message!")
    message[field] = final + _CONTINUE_TAG
    return final
