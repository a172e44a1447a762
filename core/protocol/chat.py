"""ChatCompletionRequest: the OpenAI chat request with vLLM 0.33's extras and validators.

Field names, defaults and declaration order follow vLLM's model, and so do the validator
messages (docs/vllm-wire-spec.md §2.1). The request-level checks run in the order vLLM's pydantic "before"
validators run (last defined first), so a request that breaks several rules gets the same
first complaint. Messages stay plain dicts: the template renderer works on dicts and a
per-message pydantic model would only cost time.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PrivateAttr, model_validator

from core.errors import shown
from core.protocol.common import (
    INT64_MAX,
    INT64_MIN,
    AnyResponseFormat,
    ChatCompletionNamedToolChoiceParam,
    ChatCompletionToolsParam,
    MMPayload,
    OpenAIBaseModel,
    ReasoningEffort,
    RepetitionDetectionParams,
    StopParam,
    StreamOptions,
    StructuredOutputsParams,
    ThinkingTokenBudget,
    TopLogprobsParam,
    VLLMValidationError,
    check_response_format,
    check_stream_options,
    count_structured_constraints,
    random_uuid,
    resolve_return_mm_kwargs_alias,
    structured_outputs_from_response_format,
    validate_cache_salt,
)


def _check_message(message: dict[str, Any]) -> dict[str, Any]:
    role = message.get("role")
    if not isinstance(role, str):
        raise VLLMValidationError("Each message must have a string `role`.", parameter="messages")
    return message


ChatMessage = Annotated[dict[str, Any], AfterValidator(_check_message)]

# the OpenAI defaults of the 7 knobs that fall back to generation_config (docs/vllm-wire-spec.md §3.1)
CHAT_DEFAULT_SAMPLING_PARAMS: dict[str, Any] = {
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
}


class ChatCompletionRequest(OpenAIBaseModel):
    messages: list[ChatMessage]
    model: str | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = False
    top_logprobs: TopLogprobsParam = 0
    max_tokens: int | None = None  # deprecated in favour of max_completion_tokens
    max_completion_tokens: int | None = None
    n: int | None = 1
    presence_penalty: float | None = None
    response_format: AnyResponseFormat | None = None
    seed: int | None = Field(None, ge=INT64_MIN, le=INT64_MAX)
    stop: StopParam = Field(default_factory=list)  # (a factory: a [] default is deep-copied per request)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    temperature: float | None = None
    top_p: float | None = None
    tools: list[ChatCompletionToolsParam] | None = None
    tool_choice: (Literal["none"] | Literal["auto"] | Literal["required"]
                  | ChatCompletionNamedToolChoiceParam | None) = "none"
    reasoning_effort: ReasoningEffort | None = None
    thinking_token_budget: ThinkingTokenBudget = None
    include_reasoning: bool = True
    parallel_tool_calls: bool | None = True
    user: str | None = None  # ignored, as by vLLM

    use_beam_search: bool = False
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    watermarking: bool | None = None
    length_penalty: float = 1.0
    stop_token_ids: list[int] | None = Field(default_factory=list)
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    min_tokens: int = 0
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool = True
    truncate_prompt_tokens: Annotated[int, Field(ge=-1, le=INT64_MAX)] | None = None
    truncation_side: Literal["left", "right"] | None = None
    prompt_logprobs: int | None = None
    logprob_token_ids: list[int] | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] = Field(default_factory=list)

    echo: bool = False
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = False
    documents: list[dict[str, str]] | None = None
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    media_io_kwargs: dict[str, dict[str, Any]] | None = None
    mm_processor_kwargs: dict[str, Any] | None = None
    structured_outputs: StructuredOutputsParams | None = None
    priority: int = Field(default=0, ge=INT64_MIN, le=INT64_MAX)
    request_id: str = Field(default_factory=random_uuid)
    session_id: str | None = None
    return_tokens_as_token_ids: bool | None = None
    return_token_ids: bool | None = None
    return_weight_versions: bool = False
    routed_experts_prompt_start: int = Field(default=0, ge=0)
    return_token_offsets: bool | None = False
    return_prompt_text: bool | None = None
    mm_payload: MMPayload = "tensors"
    return_mm_kwargs: bool | None = None
    cache_salt: str | None = Field(default=None, min_length=1, max_length=1024)
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    vllm_xargs: dict[str, str | int | float | list[str | int | float]] | None = None
    repetition_detection: RepetitionDetectionParams | None = None
    stream_interval: Annotated[int, Field(ge=1)] | None = None

    # set by a tool parser's adjust_request when its grammar also covers reasoning (Mistral)
    _grammar_from_parser: bool = PrivateAttr(default=False)

    @model_validator(mode="before")
    @classmethod
    def _check_request(cls, data: Any) -> Any:
        """vLLM's before-validators, in the order pydantic runs them there."""
        if not isinstance(data, dict):
            return data
        _check_system_content(data)
        _drop_prompt_token_ids_with_media(data)
        if data.get("continue_final_message") and data.get("add_generation_prompt"):
            raise VLLMValidationError(
                "Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
        _check_tool_usage(data)
        _check_structured_outputs_count(data)
        _check_logprobs(data)
        check_stream_options(data)
        check_response_format(data)
        _normalize_messages(data)
        validate_cache_salt(data.get("cache_salt"))
        return resolve_return_mm_kwargs_alias(data)

    # -- helpers used by render ---------------------------------------------------------

    @property
    def grammar_from_parser(self) -> bool:
        return self._grammar_from_parser

    def set_grammar_from_parser(self, value: bool = True) -> None:
        self._grammar_from_parser = value

    def extract_structured_outputs(self) -> StructuredOutputsParams | None:
        return structured_outputs_from_response_format(self.structured_outputs, self.response_format)

    def history_tool_call_count(self) -> int:
        count = 0
        for message in self.messages:
            if message.get("role") == "assistant":
                calls = message.get("tool_calls")
                if isinstance(calls, list):
                    count += len(calls)
        return count


def _check_system_content(data: dict[str, Any]) -> None:
    # vLLM only warns about non-text system content; nothing to reject
    return None


def _drop_prompt_token_ids_with_media(data: dict[str, Any]) -> None:
    kv = data.get("kv_transfer_params")
    if isinstance(kv, dict) and kv.get("prompt_token_ids") is not None and has_non_text(data.get("messages")):
        kv.pop("prompt_token_ids")


_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "refusal", "thinking", "tool_reference"})
_MEDIA_PART_KEYS = frozenset({"input_image", "image_url", "image_embeds", "audio_embeds", "video_embeds",
                              "prompt_embeds", "image_pil", "audio_url", "input_audio", "video_url"})


def has_non_text(messages: Any) -> bool:
    """Whether any message carries media parts (or prompt-embeds reasoning), as vLLM judges it."""
    if not isinstance(messages, list):
        return False
    for message in messages:
        if not isinstance(message, dict):
            continue
        for name in ("reasoning", "reasoning_content"):
            reasoning = message.get(name)
            if isinstance(reasoning, dict) and reasoning.get("type") == "prompt_embeds":
                return True
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, dict):
                part_type = part.get("type", "text")
                if (any(key in part for key in _MEDIA_PART_KEYS) or not isinstance(part_type, str)
                        or part_type not in _TEXT_PART_TYPES):
                    return True
    return False


def _normalize_messages(data: dict[str, Any]) -> None:
    messages = data.get("messages")
    if not isinstance(messages, list):
        return
    for message in messages:
        if not isinstance(message, dict):
            continue
        tool_calls = message.get("tool_calls")
        if tool_calls is not None and not isinstance(tool_calls, list) and isinstance(tool_calls, (tuple,)):
            message["tool_calls"] = list(tool_calls)
        reasoning_content = message.pop("reasoning_content", None)
        if reasoning_content is not None and message.get("reasoning") is None:
            message["reasoning"] = reasoning_content


def _check_tool_usage(data: dict[str, Any]) -> None:
    if data.get("tools") == []:
        raise VLLMValidationError("`tools` must not be an empty array. Either provide at least one tool "
                                  "or omit the field entirely.", parameter="tools")
    if "tool_choice" not in data and data.get("tools"):
        data["tool_choice"] = "auto"
    tool_choice = data.get("tool_choice")
    if "tool_choice" not in data or tool_choice == "none" or tool_choice is None:
        return
    if data.get("tools") is None:
        raise VLLMValidationError("When using `tool_choice`, `tools` must be set.", parameter="tool_choice")
    if tool_choice not in ("auto", "required") and not isinstance(tool_choice, dict):
        raise VLLMValidationError(f"Invalid value for `tool_choice`: {shown(tool_choice)}! "
                                  'Only named tools, "none", "auto" or "required" are supported.',
                                  parameter="tool_choice")
    if isinstance(tool_choice, dict):
        usage = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'
        function = tool_choice.get("function")
        if not isinstance(function, dict):
            raise VLLMValidationError(f"Invalid value for `function`: `{shown(function)}` in `tool_choice`! {usage}",
                                      parameter="tool_choice.function")
        if "name" not in function:
            raise VLLMValidationError(f"Expected field `name` in `function` in `tool_choice`! {usage}",
                                      parameter="tool_choice.function.name")
        name = function["name"]
        if not isinstance(name, str) or not name:
            raise VLLMValidationError(f"Invalid `name` in `function`: `{shown(name)}` in `tool_choice`! {usage}",
                                      parameter="tool_choice.function.name")
        tools = data["tools"]
        for tool in tools if isinstance(tools, list) else ():
            fn = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(fn, dict) and fn.get("name") == name:
                return
        raise VLLMValidationError("The tool specified in `tool_choice` does not match any of the specified "
                                  "`tools`", parameter="tool_choice")


def _check_structured_outputs_count(data: dict[str, Any]) -> None:
    structured = data.get("structured_outputs")
    if structured is None:
        return
    count = count_structured_constraints(structured)
    if count > 1:
        raise VLLMValidationError("You can only use one kind of constraints for structured outputs "
                                  "('json', 'regex' or 'choice').")
    if count > 0 and data.get("tool_choice", "none") not in ("none", "auto", "required"):
        raise VLLMValidationError("You can only either use constraints for structured outputs or tools, not both.")


def _check_logprobs(data: dict[str, Any]) -> None:
    if data.get("logprob_token_ids") and data.get("use_beam_search"):
        raise VLLMValidationError("`logprob_token_ids` is not supported with beam search.",
                                  parameter="logprob_token_ids")
    if data.get("logprob_token_ids") and not data.get("logprobs"):
        raise VLLMValidationError("when using `logprob_token_ids`, `logprobs` must be set to true.",
                                  parameter="logprob_token_ids")
    for name in ("prompt_logprobs", "top_logprobs"):
        value = data.get(name)
        if value is not None and not isinstance(value, (int, float)):
            raise VLLMValidationError(f"`{name}` must be an integer.", parameter=name, value=value)
    prompt_logprobs = data.get("prompt_logprobs")
    if prompt_logprobs is not None:
        if data.get("stream") and (prompt_logprobs > 0 or prompt_logprobs == -1):
            raise VLLMValidationError("`prompt_logprobs` are not available when `stream=True`.",
                                      parameter="prompt_logprobs")
        if prompt_logprobs < 0 and prompt_logprobs != -1:
            raise VLLMValidationError("`prompt_logprobs` must be a positive value or -1.",
                                      parameter="prompt_logprobs", value=prompt_logprobs)
    top_logprobs = data.get("top_logprobs")
    if top_logprobs is not None:
        if top_logprobs < 0 and top_logprobs != -1:
            raise VLLMValidationError("`top_logprobs` must be a positive value or -1.",
                                      parameter="top_logprobs", value=top_logprobs)
        if (top_logprobs == -1 or top_logprobs > 0) and not data.get("logprobs"):
            raise VLLMValidationError("when using `top_logprobs`, `logprobs` must be set to true.",
                                      parameter="top_logprobs")
