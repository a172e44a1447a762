"""ResponsesRequest: the OpenAI Responses request (`POST /v1/responses`) with vLLM 0.33's extras.

The field types are the official `openai` package's own Responses types (input items, output
items, tools, tool_choice, text, reasoning), as vLLM 0.33 declares them, so a malformed item
gets exactly vLLM's pydantic error (the union of every item type: a long list, cut at 10). Field
names, defaults and declaration order follow vLLM's model; the request-level checks run in the
order vLLM's "before" validators run (last defined first).

`input_item_parsing` mirrors vLLM: `function_call`, `reasoning` and assistant `message` items
(list content) are turned into the SDK's output-item models before union validation, because
pydantic cannot tell those apart from their TypedDict twins; what the conversion to chat
messages does with an item depends on that (model or dict), exactly as in vLLM.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from openai.types.responses import (
    FunctionTool,
    ResponseFunctionToolCall,
    ResponseInputItemParam,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponsePrompt,
    ResponseReasoningItem,
    ResponseTextConfig,
)
from openai.types.responses.response import ToolChoice
from openai.types.responses.tool import Tool
from openai.types.shared import Metadata, Reasoning
from pydantic import BeforeValidator, Field, PrivateAttr, TypeAdapter, ValidationError, field_validator, model_validator

from core.errors import RequestError
from core.protocol.common import (
    INT64_MAX,
    INT64_MIN,
    MMPayload,
    OpenAIBaseModel,
    StopParam,
    StructuredOutputsParams,
    TopLogprobsParam,
    VLLMValidationError,
    random_uuid,
    resolve_return_mm_kwargs_alias,
    validate_cache_salt,
)

OUTPUT_LOGPROBS = "message.output_text.logprobs"
# the separator vLLM puts between a namespace tool's namespace and its function's name
NAMESPACE_SEPARATOR = "__"


def _default_input_image_details(value: Any) -> Any:
    """`detail: "auto"` on input images that omit it (the API default), before SDK validation."""
    if not isinstance(value, dict) or not isinstance(value.get("content"), list):
        return value
    content = value["content"]
    if not any(isinstance(p, dict) and p.get("type") == "input_image" and "detail" not in p for p in content):
        return value
    parts = [{**p, "detail": "auto"} if isinstance(p, dict) and p.get("type") == "input_image"
             and "detail" not in p else p for p in content]
    return {**value, "content": parts}


ResponseInputOutputItem: TypeAlias = ResponseInputItemParam | ResponseOutputItem
InputItem: TypeAlias = Annotated[ResponseInputOutputItem, BeforeValidator(_default_input_image_details)]


class PromptCacheOptionsParam(OpenAIBaseModel):
    """OpenAI's prompt_cache_options (accepted and echoed; vLLM does not act on them)."""

    mode: Literal["implicit", "explicit"] = "implicit"
    ttl: Literal["30m"] = "30m"
    comparison_response_id: str | None = None
    prewarm: bool | None = None


def _tool_field(tool: Any, name: str) -> Any:
    return tool.get(name) if isinstance(tool, dict) else getattr(tool, name, None)


def _resolve_named_tool_choice(tool_name: str, tools: list[Any]) -> str:
    """A named tool choice as the flat `<namespace>__<name>` name when it names a namespaced tool."""
    exact: set[str] = set()
    by_local_name: dict[str, list[str]] = {}
    for tool in tools:
        if _tool_field(tool, "type") == "namespace":
            namespace, members = _tool_field(tool, "name"), _tool_field(tool, "tools")
            if not isinstance(members, list) or not isinstance(namespace, str):
                return tool_name
            for member in members:
                local = _tool_field(member, "name")
                if isinstance(local, str):
                    flat = f"{namespace}{NAMESPACE_SEPARATOR}{local}"
                    exact.add(flat)
                    by_local_name.setdefault(local, []).append(flat)
        elif isinstance(name := _tool_field(tool, "name"), str):
            exact.add(name)
    if tool_name in exact:
        return tool_name
    candidates = by_local_name.get(tool_name, [])
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        raise VLLMValidationError(
            f"Tool choice '{tool_name}' is ambiguous: it is defined in more than one namespace "
            f"({', '.join(candidates)}). Select it by its full '<namespace>__<name>' name.", parameter="tool_choice")
    raise VLLMValidationError("Tool choice 'function' not found in 'tools' parameter.", parameter="tool_choice")


class ResponsesRequest(OpenAIBaseModel):
    # ordered as vLLM's model (which follows OpenAI's documentation)
    background: bool | None = False
    include: list[Literal["code_interpreter_call.outputs", "computer_call_output.output.image_url",
                          "file_search_call.results", "message.input_image.image_url",
                          "message.output_text.logprobs", "reasoning.encrypted_content"]] | None = None
    input: str | list[InputItem]
    instructions: str | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    metadata: Metadata | None = None
    model: str | None = None
    logit_bias: dict[str, float] | None = None
    parallel_tool_calls: bool | None = True
    previous_response_id: str | None = None
    prompt: ResponsePrompt | None = None
    reasoning: Reasoning | None = None
    include_reasoning: bool = True
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] = "auto"
    store: bool | None = True
    stream: bool | None = False
    temperature: float | None = None
    text: ResponseTextConfig | None = None
    tool_choice: ToolChoice = "auto"
    tools: list[Tool] = Field(default_factory=list)
    top_logprobs: TopLogprobsParam = 0
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    truncation: Literal["auto", "disabled"] | None = "disabled"
    user: str | None = None
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    prompt_cache_key: str | None = None
    prompt_cache_options: PromptCacheOptionsParam | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    safety_identifier: str | None = None

    # vLLM's extra parameters
    watermarking: bool | None = None
    request_id: str = Field(default_factory=lambda: f"resp_{random_uuid()}")
    session_id: str | None = None
    media_io_kwargs: dict[str, dict[str, Any]] | None = None
    mm_processor_kwargs: dict[str, Any] | None = None
    priority: int = Field(default=0, ge=INT64_MIN, le=INT64_MAX)
    mm_payload: MMPayload = "tensors"
    return_mm_kwargs: bool | None = None
    cache_salt: str | None = Field(default=None, min_length=1, max_length=1024)
    enable_response_messages: bool = False
    # Harmony (gpt-oss) history; vLLM also accepts openai_harmony Message objects here
    previous_input_messages: list[dict[str, Any]] | None = None
    structured_outputs: StructuredOutputsParams | None = None
    repetition_penalty: float | None = None
    seed: int | None = Field(None, ge=INT64_MIN, le=INT64_MAX)
    stop: StopParam = Field(default_factory=list)  # (a factory: a [] default is deep-copied per request)
    stop_token_ids: list[int] | None = Field(default_factory=list)
    ignore_eos: bool = False
    vllm_xargs: dict[str, str | int | float | list[str | int | float]] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    chat_template_kwargs: dict[str, Any] | None = None

    # set by a tool parser's adjust_request when its grammar also covers reasoning (Mistral)
    _grammar_from_parser: bool = PrivateAttr(default=False)

    @field_validator("input", mode="wrap")
    @classmethod
    def _validate_input(cls, value: Any, handler: Any) -> Any:
        """Plain text messages (what most requests are) skip the union of ~30 item types, which
        costs ~40 us per item: for them the union's only match is EasyInputMessageParam, whose
        validated value is the item's own keys. Anything else takes the union (and its errors)."""
        if type(value) is list and value and all(_is_plain_message(item) for item in value):
            return [dict(item) for item in value]
        return handler(value)

    @field_validator("tools", mode="wrap")
    @classmethod
    def _validate_tools(cls, value: Any, handler: Any) -> Any:
        """Function tools (what agents send) skip the union of 16 tool types, which costs ~15 us
        per tool (its discriminator is the SDK's, not pydantic's, so every member is tried): a
        `type: "function"` object matches FunctionTool alone. One that FunctionTool rejects takes
        the union, whose errors are vLLM's."""
        if type(value) is list and all(type(tool) is dict and tool.get("type") == "function" for tool in value):
            try:
                return _FUNCTION_TOOLS.validate_python(value)
            except ValidationError:
                pass
        return handler(value)

    @field_validator("prompt_cache_retention", mode="before")
    @classmethod
    def _normalize_prompt_cache_retention(cls, value: object) -> object:
        return "in_memory" if value == "in-memory" else value  # older SDKs' spelling

    @model_validator(mode="before")
    @classmethod
    def _check_request(cls, data: Any) -> Any:
        """vLLM's before-validators, in the order pydantic runs them there (last defined first)."""
        if not isinstance(data, dict):
            return data
        _check_tool_usage(data)
        _check_custom_tool_format(data)
        _parse_input_items(data)
        if data.get("prompt") is not None:
            raise VLLMValidationError("prompt template is not supported", parameter="prompt")
        if data.get("background") and not data.get("store", True):
            raise VLLMValidationError("background can only be used when `store` is true", parameter="background")
        validate_cache_salt(data.get("cache_salt"))
        return resolve_return_mm_kwargs_alias(data)

    # -- helpers used by render and the front door --------------------------------------

    @property
    def include_output_logprobs(self) -> bool:
        return isinstance(self.include, list) and OUTPUT_LOGPROBS in self.include

    @property
    def grammar_from_parser(self) -> bool:
        return self._grammar_from_parser

    def extract_structured_outputs(self) -> StructuredOutputsParams | None:
        """`text.format` as structured outputs (vLLM: both it and `structured_outputs` is a 400)."""
        text_format = None if self.text is None else self.text.format
        if text_format is None:
            return self.structured_outputs
        if self.structured_outputs is not None:
            raise VLLMValidationError("Cannot specify both structured_outputs and text.format",
                                      parameter="structured_outputs")
        if text_format.type == "json_object":
            return StructuredOutputsParams(json_object=True)
        if text_format.type == "json_schema" and text_format.schema_ is not None:
            return StructuredOutputsParams.model_validate({"json": text_format.schema_})
        return None


_FUNCTION_TOOLS = TypeAdapter(list[FunctionTool])
_PLAIN_ROLES = frozenset(("user", "assistant", "system", "developer"))
_PLAIN_KEYS = frozenset(("role", "content", "type"))


def _is_plain_message(item: Any) -> bool:
    """`{"role": ..., "content": "text"}` (optionally `"type": "message"`): an EasyInputMessageParam
    that no other item type accepts (they all need list content or more keys)."""
    return (type(item) is dict and type(item.get("content")) is str and type(item.get("role")) is str
            and item["role"] in _PLAIN_ROLES
            and item.get("type", "message") == "message" and item.keys() <= _PLAIN_KEYS)


def _parse_input_items(data: dict[str, Any]) -> None:
    """vLLM's `input_item_parsing`: turn items pydantic cannot disambiguate into SDK models."""
    items = data.get("input")
    if items is None or isinstance(items, (str, bytes)):
        return
    if not isinstance(items, list):
        try:
            items = list(items)
        except TypeError:
            return  # not iterable: pydantic rejects it
    data["input"] = [_parse_input_item(item) for item in items]


def _parse_input_item(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    item_type = item.get("type")
    if item_type == "reasoning" and "id" not in item:
        item = {**item, "id": f"rs_{random_uuid()}"}  # kept even when the item then fails, as vLLM does
    try:
        if item_type == "function_call":
            return ResponseFunctionToolCall(**item)
        if item_type == "reasoning":
            return ResponseReasoningItem(**item)
        if item_type == "message" and item.get("role") == "assistant" and isinstance(item.get("content"), list):
            message = dict(item)
            message.setdefault("id", f"msg_{random_uuid()}")
            message.setdefault("status", "completed")
            message["content"] = [{**p, "annotations": []} if isinstance(p, dict) and p.get("type") == "output_text"
                                  and "annotations" not in p else p for p in item["content"]]
            return ResponseOutputMessage(**message)
    except (ValidationError, TypeError):
        return item  # left for the union's own (complete) error
    return item


def _check_custom_tool_format(data: dict[str, Any]) -> None:
    tools = data.get("tools")
    if not isinstance(tools, list):
        return
    for tool in tools:
        tool_dict = tool if isinstance(tool, dict) else None
        if tool_dict is None:
            continue
        fmt = tool_dict.get("format")
        if tool_dict.get("type") == "custom" and isinstance(fmt, dict) and fmt.get("type") == "grammar":
            raise VLLMValidationError("Custom tools with a grammar format are not supported; only free-form text "
                                      "custom tools are accepted.", parameter="tools")


def _check_tool_usage(data: dict[str, Any]) -> None:
    tools = data.get("tools")
    tool_choice = data.get("tool_choice", "auto")
    has_tools = tools is not None and _len(tools) > 0
    named = isinstance(tool_choice, dict) and tool_choice.get("type") in ("function", "custom")
    if not has_tools:
        if tool_choice in ("auto", "none"):
            data["tool_choice"] = "none"
        elif tool_choice == "required":
            raise VLLMValidationError("Tool choice 'required' must be specified with 'tools' parameter.",
                                      parameter="tool_choice")
        elif named:
            raise VLLMValidationError("Tool choice 'function' not found in 'tools' parameter.",
                                      parameter="tool_choice")
    elif named and tools is not None:
        name = tool_choice.get("name")
        if not name:
            raise VLLMValidationError("Tool choice 'function' not found in 'tools' parameter.",
                                      parameter="tool_choice")
        resolved = _resolve_named_tool_choice(name, tools if isinstance(tools, list) else list(tools))
        if resolved != name:
            data["tool_choice"] = {**tool_choice, "name": resolved}


def _len(value: Any) -> int:
    try:
        return len(value)
    except TypeError:
        # vLLM's validator fails the same way, and its handler answers the TypeError with a 400
        raise RequestError(f"object of type '{type(value).__name__}' has no len()") from None


_ITEMS = TypeAdapter(list[InputItem])


def validate_items(items: list[Any]) -> list[Any]:
    """Validate stored Responses items (a previous response's input and output) as `input` is.

    Raises pydantic's ValidationError for a malformed item.
    """
    data: dict[str, Any] = {"input": list(items)}
    _parse_input_items(data)
    return _ITEMS.validate_python(data["input"])


__all__ = ["ResponsesRequest", "validate_items", "OUTPUT_LOGPROBS", "NAMESPACE_SEPARATOR"]
