"""Request-side wire models shared by chat and completion requests (vLLM 0.33 shapes).

Every model accepts unknown keys and ignores them, as vLLM's `OpenAIBaseModel` does
(`extra="allow"`; vLLM only logs them). Request-level validators raise `VLLMValidationError`
(a `core.errors.RequestError`), which escapes pydantic unchanged, exactly as vLLM's does, so
the client gets the plain message and `param`; type errors stay pydantic ValidationErrors and
`core.errors.validation_error` prints them the way vLLM's FastAPI handler does.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from core.errors import RequestError, shown

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# vLLM's environment-variable limits, at their defaults
MAX_STOP_STRINGS = 4
MAX_N_SEQUENCES = 16384
MAX_COMPLETION_PROMPTS = 1024
MAX_NUM_BAD_WORDS = 128

_CACHE_SALT_FORBIDDEN = frozenset("@/\\\x00")
_MAX_CACHE_SALT_LENGTH = 128


def random_uuid() -> str:
    """vLLM's request id: 16 lowercase hex chars (a random 64-bit value)."""
    return secrets.token_hex(8)


class VLLMValidationError(RequestError):
    """A request validation failure with the parameter it concerns (400 BadRequestError).

    Like vLLM's, it is not a ValueError: raised inside a pydantic validator it escapes
    `model_validate` unchanged instead of becoming one entry of a ValidationError, so the
    client sees exactly `"<message> (parameter=<p>, value=<v>)"` with `param` = the parameter.
    """

    def __init__(self, message: str, *, parameter: str | None = None, value: Any = None) -> None:
        self.raw_message = message
        self.parameter = parameter
        self.value = value
        extras = []
        if parameter is not None:
            extras.append(f"parameter={parameter}")
        if value is not None:
            extras.append(f"value={shown(value)}")  # a client's value: cut, never recursed into
        text = f"{message} ({', '.join(extras)})" if extras else message
        super().__init__(text, 400, "BadRequestError", parameter)

    def __str__(self) -> str:
        return self.message


class OpenAIBaseModel(BaseModel):
    """Accepts and ignores unknown fields, like vLLM (which only logs them at debug level)."""

    model_config = ConfigDict(extra="allow")


def validate_cache_salt(cache_salt: object) -> None:
    if cache_salt is None:
        return
    if not isinstance(cache_salt, str) or not cache_salt:
        raise VLLMValidationError("Parameter 'cache_salt' must be a non-empty string if provided.",
                                  parameter="cache_salt")
    if len(cache_salt) > _MAX_CACHE_SALT_LENGTH or any(c in _CACHE_SALT_FORBIDDEN for c in cache_salt):
        raise VLLMValidationError(
            "Parameter 'cache_salt' must be at most 128 characters and must "
            "not contain '@', '/', '\\\\', or NUL.", parameter="cache_salt")


def _thinking_token_budget(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, (bool, float)) or not isinstance(value, int) or (value < 0 and value != -1):
        raise VLLMValidationError(
            "`thinking_token_budget` must be a non-negative integer or -1 for unlimited.",
            parameter="thinking_token_budget", value=value)
    return None if value == -1 else value


StopParam: TypeAlias = str | Annotated[list[str], Field(max_length=MAX_STOP_STRINGS)] | None
# `top_logprobs` is nullable in the OpenAI spec; null means the same as omitted
TopLogprobsParam: TypeAlias = Annotated[int, BeforeValidator(lambda v: 0 if v is None else v)]
ThinkingTokenBudget: TypeAlias = Annotated[int | None, BeforeValidator(_thinking_token_budget)]
MMPayload: TypeAlias = Literal["tensors", "none"]
ReasoningEffort: TypeAlias = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class StreamOptions(OpenAIBaseModel):
    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


class FunctionDefinition(OpenAIBaseModel):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    defer_loading: bool | None = None

    def to_template(self) -> dict[str, Any]:
        """The dict the chat template sees (vLLM's model_dump: no extras, no null strict/defer_loading)."""
        out: dict[str, Any] = {"name": self.name, "description": self.description,
                               "parameters": self.parameters}
        if self.strict is not None:
            out["strict"] = self.strict
        if self.defer_loading is not None:
            out["defer_loading"] = self.defer_loading
        return out


class ChatCompletionToolsParam(OpenAIBaseModel):
    type: Literal["function"] = "function"
    function: FunctionDefinition
    defer_loading: bool | None = None

    @model_validator(mode="after")
    def _propagate_defer_loading(self) -> ChatCompletionToolsParam:
        if self.defer_loading is not None and self.function.defer_loading is None:
            self.function.defer_loading = self.defer_loading
        return self

    def to_template(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "function": self.function.to_template()}
        if self.defer_loading is not None:
            out["defer_loading"] = self.defer_loading
        return out


class ChatCompletionNamedFunction(OpenAIBaseModel):
    name: str


class ChatCompletionNamedToolChoiceParam(OpenAIBaseModel):
    function: ChatCompletionNamedFunction
    type: Literal["function"] = "function"


class JsonSchemaResponseFormat(OpenAIBaseModel):
    name: str
    description: str | None = None
    # `schema` in the OpenAI API; renamed because it shadows a pydantic attribute
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class LegacyStructuralTag(OpenAIBaseModel):
    begin: str
    structural_tag_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    end: str


class LegacyStructuralTagResponseFormat(OpenAIBaseModel):
    type: Literal["structural_tag"]
    structures: list[LegacyStructuralTag]
    triggers: list[str]


class StructuralTagResponseFormat(OpenAIBaseModel):
    type: Literal["structural_tag"]
    format: Any


class ResponseFormat(OpenAIBaseModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaResponseFormat | None = None


AnyResponseFormat: TypeAlias = ResponseFormat | StructuralTagResponseFormat | LegacyStructuralTagResponseFormat

_STRUCTURED_KINDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")


class StructuredOutputsParams(BaseModel):
    """vLLM's StructuredOutputsParams dataclass: exactly one constraint kind."""

    json_: str | dict | None = Field(default=None, alias="json")  # type: ignore[type-arg]
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None
    structural_tag: str | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def as_wire(self) -> dict[str, Any]:
        """The dataclass as vLLM serializes it inside sampling_params (every key, private ones too)."""
        return {"json": self.json_, "regex": self.regex, "choice": self.choice, "grammar": self.grammar,
                "json_object": self.json_object, "disable_any_whitespace": self.disable_any_whitespace,
                "disable_additional_properties": self.disable_additional_properties,
                "whitespace_pattern": self.whitespace_pattern, "structural_tag": self.structural_tag,
                "_backend": None, "_backend_was_auto": False}

    def _dict_repr(self) -> str:
        return repr(self.as_wire())

    @model_validator(mode="after")
    def _exactly_one(self) -> StructuredOutputsParams:
        count = sum(getattr(self, "json_" if k == "json" else k) is not None for k in _STRUCTURED_KINDS)
        if count > 1:
            raise VLLMValidationError("You can only use one kind of structured outputs constraint "
                                      f"but multiple are specified: {self._dict_repr()}")
        if count < 1:
            raise VLLMValidationError("You must use one kind of structured outputs constraint "
                                      f"but none are specified: {self._dict_repr()}")
        return self

    @classmethod
    def of(cls, **kwargs: Any) -> StructuredOutputsParams:
        return cls.model_validate(kwargs)

    def replace(self, **overrides: Any) -> StructuredOutputsParams:
        data = {**self.as_wire(), **overrides}
        data.pop("_backend")
        data.pop("_backend_was_auto")
        return StructuredOutputsParams.model_validate(data)


class RepetitionDetectionParams(BaseModel):
    max_pattern_size: int = 0
    min_pattern_size: int = 0
    min_count: int = 0

    @model_validator(mode="after")
    def _check(self) -> RepetitionDetectionParams:
        if (self.max_pattern_size < 0 or self.min_pattern_size < 0
                or self.min_pattern_size > self.max_pattern_size):
            raise VLLMValidationError(
                "max_pattern_size, min_pattern_size must be >=0, with min_pattern_size <= max_pattern_size. "
                "Set both to 0 to disable repetitive pattern detection.")
        if self.max_pattern_size > 0 and self.min_count < 2:
            raise VLLMValidationError(
                "min_count must be >= 2 to detect repetitive patterns in engine output. If you do not "
                "wish to detect repetitive patterns, set max_pattern_size to 0.")
        return self

    def as_wire(self) -> dict[str, Any]:
        return {"max_pattern_size": self.max_pattern_size, "min_pattern_size": self.min_pattern_size,
                "min_count": self.min_count}


def structured_outputs_from_response_format(structured_outputs: StructuredOutputsParams | None,
                                            response_format: Any) -> StructuredOutputsParams | None:
    """`response_format` overrides `structured_outputs` (vLLM's rule)."""
    import json

    if response_format is None or response_format.type == "text":
        return structured_outputs
    if response_format.type == "json_object":
        overrides: dict[str, Any] = {"json_object": True}
    elif response_format.type == "json_schema":
        overrides = {"json": response_format.json_schema.json_schema}
    else:
        overrides = {"structural_tag": json.dumps(response_format.model_dump(by_alias=True))}
    if structured_outputs is None:
        return StructuredOutputsParams.model_validate(overrides)
    return structured_outputs.replace(**overrides)


def check_response_format(data: dict[str, Any]) -> None:
    response_format = data.get("response_format")
    if not isinstance(response_format, dict):
        return
    if response_format.get("type") == "json_schema" and response_format.get("json_schema") is None:
        raise VLLMValidationError("When response_format type is 'json_schema', the "
                                  "'json_schema' field must be provided.", parameter="response_format")


def check_stream_options(data: dict[str, Any]) -> None:
    if data.get("stream_options") and not data.get("stream"):
        raise VLLMValidationError("Stream options can only be defined when `stream=True`.",
                                  parameter="stream_options")


def count_structured_constraints(structured: Any) -> int:
    if not isinstance(structured, dict):
        return 0
    return sum(structured.get(k) is not None for k in ("json", "regex", "choice"))


def resolve_return_mm_kwargs_alias(data: Any) -> Any:
    if isinstance(data, dict) and data.get("return_mm_kwargs") is False and "mm_payload" not in data:
        data = {**data, "mm_payload": "none"}
    return data
