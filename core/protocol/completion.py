"""CompletionRequest: the OpenAI (legacy) completion request with vLLM 0.33's extras and validators.

`prompt` is a string, a list of strings, a list of token ids, or a list of token-id lists.
`max_tokens` defaults to 16 and `null` also means 16 (docs/vllm-wire-spec.md §2.2). Validators run in vLLM's order.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from core.protocol.common import (
    INT64_MAX,
    INT64_MIN,
    MAX_COMPLETION_PROMPTS,
    AnyResponseFormat,
    MMPayload,
    OpenAIBaseModel,
    RepetitionDetectionParams,
    StopParam,
    StreamOptions,
    StructuredOutputsParams,
    ThinkingTokenBudget,
    VLLMValidationError,
    check_response_format,
    check_stream_options,
    count_structured_constraints,
    random_uuid,
    resolve_return_mm_kwargs_alias,
    structured_outputs_from_response_format,
    validate_cache_salt,
)

COMPLETION_DEFAULT_SAMPLING_PARAMS: dict[str, Any] = {
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
}

TokenId = Annotated[int, Field(ge=0)]


class CompletionRequest(OpenAIBaseModel):
    model: str | None = None
    prompt: list[TokenId] | list[list[TokenId]] | str | list[str] | None = None
    echo: bool | None = False
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    logprobs: int | None = None
    max_tokens: int | None = 16
    n: int = 1
    presence_penalty: float | None = None
    seed: int | None = Field(None, ge=INT64_MIN, le=INT64_MAX)
    stop: StopParam = Field(default_factory=list)  # (a factory: a [] default is deep-copied per request)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    suffix: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    user: str | None = None

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
    allowed_token_ids: list[int] | None = None
    prompt_logprobs: int | None = None
    logprob_token_ids: list[int] | None = None
    bad_words: list[str] = Field(default_factory=list)

    prompt_embeds: bytes | list[bytes] | None = None
    add_special_tokens: bool = True
    response_format: AnyResponseFormat | None = None
    structured_outputs: StructuredOutputsParams | None = None
    priority: int = Field(default=0, ge=INT64_MIN, le=INT64_MAX)
    request_id: str = Field(default_factory=random_uuid)
    session_id: str | None = None
    return_tokens_as_token_ids: bool | None = None
    return_token_ids: bool | None = None
    return_weight_versions: bool = False
    routed_experts_prompt_start: int = Field(default=0, ge=0)
    return_token_offsets: bool | None = False
    mm_payload: MMPayload = "tensors"
    return_mm_kwargs: bool | None = None
    cache_salt: str | None = Field(default=None, min_length=1, max_length=1024)
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    vllm_xargs: dict[str, str | int | float | list[str | int | float]] | None = None
    repetition_detection: RepetitionDetectionParams | None = None
    thinking_token_budget: ThinkingTokenBudget = None
    stream_interval: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _check_request(cls, data: Any) -> Any:
        """vLLM's before-validators, in the order pydantic runs them there (last defined first)."""
        if not isinstance(data, dict):
            return data
        _check_prompt_list_length(data)
        _check_prompt_present(data)
        check_stream_options(data)
        _check_logprobs(data)
        _check_structured_outputs_count(data)
        check_response_format(data)
        if data.get("max_tokens") is None:
            data = {**data, "max_tokens": 16}
        validate_cache_salt(data.get("cache_salt"))
        return resolve_return_mm_kwargs_alias(data)

    def extract_structured_outputs(self) -> StructuredOutputsParams | None:
        return structured_outputs_from_response_format(self.structured_outputs, self.response_format)


def _check_prompt_present(data: dict[str, Any]) -> None:
    prompt = data.get("prompt")
    embeds = data.get("prompt_embeds")
    prompt_empty = prompt is None or (isinstance(prompt, str) and prompt == "")
    embeds_empty = embeds is None or (isinstance(embeds, list) and len(embeds) == 0)
    if prompt_empty and embeds_empty:
        raise VLLMValidationError("Either prompt or prompt_embeds must be provided and non-empty.",
                                  parameter="prompt")


def _check_prompt_list_length(data: dict[str, Any]) -> None:
    prompt = data.get("prompt")
    if (isinstance(prompt, list) and prompt and not all(isinstance(p, int) for p in prompt)
            and len(prompt) > MAX_COMPLETION_PROMPTS):
        raise VLLMValidationError(
            f"prompt list length {len(prompt)} exceeds the maximum allowed count of {MAX_COMPLETION_PROMPTS}. "
            "To increase this limit, set the VLLM_MAX_COMPLETION_PROMPTS environment variable.",
            parameter="prompt")
    embeds = data.get("prompt_embeds")
    if isinstance(embeds, list) and len(embeds) > MAX_COMPLETION_PROMPTS:
        raise VLLMValidationError(
            f"prompt_embeds list length {len(embeds)} exceeds the maximum allowed count of "
            f"{MAX_COMPLETION_PROMPTS}. To increase this limit, set the VLLM_MAX_COMPLETION_PROMPTS "
            "environment variable.", parameter="prompt_embeds")


def _check_structured_outputs_count(data: dict[str, Any]) -> None:
    structured = data.get("structured_outputs")
    if structured is None:
        return
    if count_structured_constraints(structured) > 1:
        raise VLLMValidationError("You can only use one kind of constraints for structured outputs "
                                  "('json', 'regex' or 'choice').", parameter="structured_outputs")


def _check_logprobs(data: dict[str, Any]) -> None:
    if data.get("logprob_token_ids") and data.get("use_beam_search"):
        raise VLLMValidationError("`logprob_token_ids` is not supported with beam search.",
                                  parameter="logprob_token_ids")
    if data.get("use_beam_search") and data.get("echo") and data.get("logprobs") is not None:
        raise VLLMValidationError("`echo` with `logprobs` is not supported with beam search because beam "
                                  "search does not compute prompt logprobs.", parameter="echo")
    if data.get("logprob_token_ids") and data.get("echo") and data.get("max_tokens") == 0:
        raise VLLMValidationError("`logprob_token_ids` is not supported when `echo=True` and `max_tokens=0` "
                                  "because no output tokens are generated.", parameter="logprob_token_ids")
    if data.get("logprob_token_ids") and data.get("logprobs") is None:
        raise VLLMValidationError("when using `logprob_token_ids`, `logprobs` must be set.",
                                  parameter="logprob_token_ids")
    for name in ("prompt_logprobs", "logprobs"):
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
    logprobs = data.get("logprobs")
    if logprobs is not None and logprobs < 0 and logprobs != -1:
        raise VLLMValidationError("`logprobs` must be a positive value or -1.", parameter="logprobs",
                                  value=logprobs)
