"""What `/inference/v1/generate` answers (docs/vllm-wire-spec.md §2.3), as derender INPUT.

`GenerateTokensResponse` (non-streaming) and `GenerateTokensStreamResponse` (one SSE
payload), with vLLM 0.33's field names, defaults and validators. Logprobs are accepted in
both the 0.33 shape (`token_id`) and the legacy `"token_id:N"` shape (docs/vllm-wire-spec.md §0.2): a legacy
entry is rewritten to the 0.33 shape before validation, so everything downstream sees one
shape. A missing `output_mode` means "tokens"; "text" / "derender" responses are refused (they
are already detokenized, re-decoding would undo the engine's stop-string cut).

These are validated once per request at the raw endpoints. The front door does not build
them per SSE chunk: it hands the engine's dicts straight to the derender state machines.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, NonNegativeInt, TypeAdapter, ValidationError, field_validator,
                      model_validator)
from pydantic.dataclasses import dataclass as pydantic_dataclass

from core.protocol.common import random_uuid

_LEGACY_PREFIX = "token_id:"


class _AllowExtra(BaseModel):
    """vLLM's OpenAIBaseModel: unknown keys are kept (and dumped after the declared ones)."""

    model_config = ConfigDict(extra="allow")


class PromptTokenUsageInfo(_AllowExtra):
    cached_tokens: int | None = None
    created_cache_tokens: int | None = None
    multimodal_tokens: dict[str, int] | None = None


class CompletionTokenUsageInfo(_AllowExtra):
    reasoning_tokens: int = 0


class UsageInfo(_AllowExtra):
    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = 0
    prompt_tokens_details: PromptTokenUsageInfo | None = None
    completion_tokens_details: CompletionTokenUsageInfo | None = None


class SpeculativeDecodingMetrics(_AllowExtra):
    mean_acceptance_length: float
    draft_acceptance_rate: float
    acceptance_histogram: list[int]


class PerRequestMetrics(_AllowExtra):
    time_to_first_token_ms: float | None = None
    generation_time_ms: float | None = None
    queue_time_ms: float | None = None
    mean_itl_ms: float | None = None
    tokens_per_second: float | None = None
    speculative_decoding: SpeculativeDecodingMetrics | None = None


@pydantic_dataclass
class Logprob:
    """A prompt logprob (vLLM's `vllm.logprobs.Logprob`)."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


class PlaceholderRangeInfo(BaseModel):
    offset: int = Field(ge=0)
    length: int = Field(gt=0)


@pydantic_dataclass
class WeightVersionSpan:
    version: str
    start: int
    end: int


def _legacy_to_token_id(value: Any) -> Any:
    """Rewrite a legacy `{"token": "token_id:N", ...}` candidate to `{"token_id": N, ...}`."""
    if isinstance(value, dict) and "token_id" not in value:
        token = value.get("token")
        if isinstance(token, str) and token.startswith(_LEGACY_PREFIX):
            rest = token[len(_LEGACY_PREFIX):]
            if rest.lstrip("-").isdigit():
                value = {k: v for k, v in value.items() if k not in ("token", "bytes")}
                value["token_id"] = int(rest)
                value.setdefault("logprob", -9999.0)
    return value


class GenerateLogProb(BaseModel):
    token_id: int
    logprob: float
    rank: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _accept_legacy(cls, value: Any) -> Any:
        return _legacy_to_token_id(value)


class GenerateLogProbsContent(GenerateLogProb):
    top_logprobs: list[GenerateLogProb] = []


class GenerateLogProbs(BaseModel):
    content: list[GenerateLogProbsContent] | None = None

    def content_dicts(self) -> list[dict[str, Any]] | None:
        """The normalized form `core.logprobs` resolves (no per-entry pydantic access later)."""
        if self.content is None:
            return None
        return [{"token_id": e.token_id, "logprob": e.logprob,
                 "top_logprobs": [{"token_id": c.token_id, "logprob": c.logprob} for c in e.top_logprobs]}
                for e in self.content]


def _no_negative_ids(v: list[int] | None) -> list[int] | None:
    if v is not None and any(t < 0 for t in v):
        raise ValueError("token_ids must not contain negative values")
    return v


class GenerateTokensChoice(BaseModel):
    index: int
    finish_reason: str | None = "stop"
    stop_reason: int | str | None = None
    token_ids: list[int] | None = None
    routed_experts: str | None = None
    sampling_mask: list[list[int]] | None = None
    weight_versions: list[WeightVersionSpan] | None = None
    logprobs: GenerateLogProbs | None = None

    _check_ids = field_validator("token_ids")(classmethod(lambda cls, v: _no_negative_ids(v)))


class GenerateTokensStreamChoice(BaseModel):
    index: int
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    token_ids: list[int] | None = None
    routed_experts: str | None = None
    sampling_mask: list[list[int]] | None = None
    weight_versions: list[WeightVersionSpan] | None = None
    logprobs: GenerateLogProbs | None = None


class GenerateTokensResponse(BaseModel):
    request_id: str = Field(default_factory=random_uuid)
    model: str | None = None
    created: int | None = None
    usage: UsageInfo | None = None
    prompt_logprobs: list[dict[int, Logprob] | None] | None = None
    prompt_token_id_logprobs: str | None = None
    prompt_token_ids: list[NonNegativeInt] | None = None
    mm_placeholders: dict[str, list[PlaceholderRangeInfo]] | None = None
    metrics: PerRequestMetrics | None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    output_mode: Literal["tokens"] = "tokens"
    choices: list[GenerateTokensChoice]


class GenerateTokensStreamResponse(BaseModel):
    request_id: str = Field(default_factory=random_uuid)
    usage: UsageInfo | None = None
    prompt_token_ids: list[NonNegativeInt] | None = None
    mm_placeholders: dict[str, list[PlaceholderRangeInfo]] | None = None
    metrics: PerRequestMetrics | None = None
    output_mode: Literal["tokens"] = "tokens"
    choices: list[GenerateTokensStreamChoice]


# -- output helpers: the passthrough fields as vLLM dumps them ----------------------------

def dump_prompt_logprobs(value: list[dict[int, Logprob] | None] | None) -> list[dict[str, Any] | None] | None:
    """`prompt_logprobs` as vLLM re-serializes it: str keys, full Logprob objects."""
    if value is None:
        return None
    return [None if pos is None else
            {str(k): {"logprob": v.logprob, "rank": v.rank, "decoded_token": v.decoded_token}
             for k, v in pos.items()}
            for pos in value]


def dump_metrics(metrics: PerRequestMetrics | None) -> dict[str, Any] | None:
    return None if metrics is None else metrics.model_dump()


# Logprob entries validated per pydantic call when pre-validating a large body. One pydantic
# call holds the GIL from start to end (~90 us per entry with 20 candidates), so a 2000-entry
# list validated in one go stalls every other thread, the event loop included, for ~200 ms even
# when the work runs in the thread pool. Slices of this size let the GIL change hands between them.
LOGPROB_SLICE = 128
_CONTENT_LIST = TypeAdapter(list[GenerateLogProbsContent])


def prevalidate_logprobs(data: Any) -> None:
    """Replace large `logprobs.content` lists in a derender body by validated entries, slice by slice.

    Valid slices become `GenerateLogProbsContent` instances, which the whole-body validation then
    accepts without re-validating them. A slice that fails is left as sent, so the whole-body
    validation reports the error exactly as vLLM does. Never raises.
    """
    if not isinstance(data, dict):
        return
    responses = [data.get("generate_response"), data.get("generate_chunk")]
    if isinstance(data.get("generate_responses"), list):
        responses += data["generate_responses"]
    for response in responses:
        choices = response.get("choices") if isinstance(response, dict) else None
        for choice in choices if isinstance(choices, list) else ():
            logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
            content = logprobs.get("content") if isinstance(logprobs, dict) else None
            if not isinstance(content, list) or len(content) <= LOGPROB_SLICE:
                continue
            for start in range(0, len(content), LOGPROB_SLICE):
                part = content[start:start + LOGPROB_SLICE]
                try:
                    content[start:start + LOGPROB_SLICE] = _CONTENT_LIST.validate_python(part)
                except ValidationError:
                    continue
