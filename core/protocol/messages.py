"""The Anthropic Messages API request (`/v1/messages`, `/v1/messages/count_tokens`), as vLLM 0.33 validates it.

vLLM's models are plain pydantic models (unknown keys are ignored, so `cache_control`, `metadata`,
`service_tier`, ... pass), and its validation errors name these classes and fields: the class
names, field types and validator messages below are kept equal to vLLM 0.33's
(`vllm/entrypoints/anthropic/protocol.py`) so a bad request gets the same 400 text.

Only the request side lives here; the front door's response objects are built as dicts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import AfterValidator, BaseModel, Field, field_validator, model_validator

from core.errors import sanitize
from core.protocol.common import MAX_STOP_STRINGS, MMPayload, resolve_return_mm_kwargs_alias

ContentBlockType: TypeAlias = Literal["text", "image", "tool_use", "tool_result", "tool_reference", "thinking",
                                      "redacted_thinking", "tool_addition", "tool_removal"]
TOOL_CHANGE_TYPES = ("tool_addition", "tool_removal")
# Claude Code puts a per-request hash in a system block starting with this; vLLM drops the block
BILLING_HEADER = "x-anthropic-billing-header"

AnthropicEffort: TypeAlias = Literal["low", "medium", "high", "xhigh", "max"]
# the reasoning_effort `thinking: {"type": "disabled"}` turns into ("auto": probed per model)
DisabledThinkingEffort: TypeAlias = Literal["none", "low", "medium", "high", "xhigh", "max"]
ThinkingDisplay: TypeAlias = Literal["summarized", "omitted", "updates"]


class AnthropicTool(BaseModel):
    name: str
    description: str | None = None
    input_schema: dict[str, Any]
    strict: bool | None = None
    defer_loading: bool | None = None

    @field_validator("input_schema")
    @classmethod
    def _default_object_type(cls, schema: dict[str, Any]) -> dict[str, Any]:
        if "type" not in schema:
            schema["type"] = "object"
        return schema


class AnthropicToolChangeReference(BaseModel):
    """`tool_addition` / `tool_removal` naming a tool declared in `tools`."""

    type: Literal["tool_reference"]
    name: str


class AnthropicToolChangeDefinition(BaseModel):
    """`tool_addition` declaring a tool by value."""

    type: Literal["tool_definition"]
    definition: AnthropicTool


AnthropicToolChange: TypeAlias = Annotated[AnthropicToolChangeReference | AnthropicToolChangeDefinition,
                                           Field(discriminator="type")]


class AnthropicContentBlock(BaseModel):
    """One content block; which fields matter depends on `type` (vLLM keeps them all optional)."""

    type: ContentBlockType
    text: str | None = None
    source: dict[str, Any] | None = None  # image
    id: str | None = None  # tool_use
    tool_use_id: str | None = None  # tool_result
    name: str | None = None
    input: dict[str, Any] | None = None
    content: str | list[dict[str, Any]] | None = None
    is_error: bool | None = None  # accepted, not rendered (as in vLLM)
    tool_name: str | None = None  # tool_reference
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None  # redacted_thinking
    tool: AnthropicToolChange | None = None

    @model_validator(mode="after")
    def _check_tool_change(self) -> AnthropicContentBlock:
        if self.type not in TOOL_CHANGE_TYPES:
            return self
        if self.tool is None:
            raise ValueError(f"tool is required for {self.type} blocks")
        if self.type == "tool_removal" and self.tool.type != "tool_reference":
            raise ValueError("tool_removal only accepts a tool_reference")
        return self


def _reject_tool_changes(content: str | list[AnthropicContentBlock] | None) -> None:
    if content is None or isinstance(content, str):
        return
    for block in content:
        if block.type in TOOL_CHANGE_TYPES:
            raise ValueError(f'{block.type} blocks are only allowed in messages with role "system"')


class AnthropicMessage(BaseModel):
    role: Literal["user", "assistant", "system"]
    content: str | list[AnthropicContentBlock]

    @model_validator(mode="after")
    def _tool_changes_only_in_system(self) -> AnthropicMessage:
        if self.role != "system":
            _reject_tool_changes(self.content)
        return self


class AnthropicToolChoice(BaseModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None

    @model_validator(mode="after")
    def _name_for_tool(self) -> AnthropicToolChoice:
        if self.type == "tool" and not self.name:
            raise ValueError("tool_choice.name is required when type is 'tool'")
        return self


class AnthropicJsonOutputFormat(BaseModel):
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    type: Literal["json_schema"] = "json_schema"


class AnthropicOutputConfig(BaseModel):
    effort: AnthropicEffort | None = None
    format: AnthropicJsonOutputFormat | None = None


class AnthropicThinkingConfigEnabled(BaseModel):
    type: Literal["enabled"]
    budget_tokens: int = Field(ge=1024)
    display: ThinkingDisplay | None = None  # accepted, ignored: reasoning is always returned


class AnthropicThinkingConfigDisabled(BaseModel):
    type: Literal["disabled"]


class AnthropicThinkingConfigAdaptive(BaseModel):
    type: Literal["adaptive"]
    display: ThinkingDisplay | None = None


AnthropicThinkingConfig: TypeAlias = Annotated[
    AnthropicThinkingConfigEnabled | AnthropicThinkingConfigDisabled | AnthropicThinkingConfigAdaptive,
    Field(discriminator="type")]

def _model_required(value: str) -> str:
    if not value:
        raise ValueError("Model is required")
    return value


def _system_without_tool_changes(value: str | list[AnthropicContentBlock] | None
                                 ) -> str | list[AnthropicContentBlock] | None:
    _reject_tool_changes(value)
    return value


ModelName: TypeAlias = Annotated[str, AfterValidator(_model_required)]
SystemParam: TypeAlias = Annotated[str | list[AnthropicContentBlock] | None,
                                   AfterValidator(_system_without_tool_changes)]


class AnthropicMessagesRequest(BaseModel):
    """POST /v1/messages (and /v1/messages/render)."""

    model: ModelName
    messages: list[AnthropicMessage]
    max_tokens: int
    metadata: dict[str, Any] | None = None  # accepted, ignored
    output_config: AnthropicOutputConfig | None = None
    thinking: AnthropicThinkingConfig | None = None
    stop_sequences: Annotated[list[str], Field(max_length=MAX_STOP_STRINGS)] | None = None
    stream: bool | None = False
    system: SystemParam = None
    temperature: float | None = None
    tool_choice: AnthropicToolChoice | None = None
    tools: list[AnthropicTool] | None = None
    top_k: int | None = None
    top_p: float | None = None

    # vLLM's extensions
    mm_payload: MMPayload = "tensors"
    return_mm_kwargs: bool | None = None
    cache_salt: str | None = Field(default=None, min_length=1, max_length=1024)
    watermarking: bool | None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    vllm_xargs: dict[str, str | int | float | list[str | int | float]] | None = None
    chat_template_kwargs: dict[str, Any] | None = None

    @field_validator("max_tokens")
    @classmethod
    def _validate_max_tokens(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("max_tokens must be positive")
        return value

    @model_validator(mode="before")
    @classmethod
    def _mm_kwargs_alias(cls, data: Any) -> Any:
        return resolve_return_mm_kwargs_alias(data)

    @model_validator(mode="after")
    def _budget_below_max_tokens(self) -> AnthropicMessagesRequest:
        # a disaggregated prefill leg (do_remote_decode) never decodes: its max_tokens is not checked
        if self.kv_transfer_params and self.kv_transfer_params.get("do_remote_decode"):
            return self
        if isinstance(self.thinking, AnthropicThinkingConfigEnabled) and self.thinking.budget_tokens >= self.max_tokens:
            raise ValueError("thinking.budget_tokens must be less than max_tokens")
        return self


class AnthropicCountTokensRequest(BaseModel):
    """POST /v1/messages/count_tokens: the prompt-shaping fields of a Messages request."""

    model: ModelName
    messages: list[AnthropicMessage]
    output_config: AnthropicOutputConfig | None = None
    system: SystemParam = None
    thinking: AnthropicThinkingConfig | None = None
    tool_choice: AnthropicToolChoice | None = None
    tools: list[AnthropicTool] | None = None
    chat_template_kwargs: dict[str, Any] | None = None


AnyMessagesRequest: TypeAlias = AnthropicMessagesRequest | AnthropicCountTokensRequest


# -- errors ------------------------------------------------------------------------------------

# Anthropic's SDKs dispatch on error.type: vLLM picks it from the HTTP status
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error"}


def anthropic_error_type(status: int) -> str:
    """vLLM's `translate_error_type`: other 5xx are api_error, other 4xx invalid_request_error."""
    return _ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")


def anthropic_error_body(message: str, status: int) -> dict[str, Any]:
    """`{"type": "error", "error": {"type", "message"}}` (the message sanitized like every error we send)."""
    return {"type": "error", "error": {"type": anthropic_error_type(status), "message": sanitize(message)}}
