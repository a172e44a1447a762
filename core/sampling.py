"""`sampling_params` as vLLM 0.33's render writes it (docs/vllm-wire-spec.md §3.1, 3.2).

vLLM builds a msgspec `SamplingParams` struct with `omit_defaults=True` and serializes it. The
omission test is by identity, which gives a precise, slightly odd rule that clients see in the
key set (and compare as parsed dicts):

* ints equal to the default (small ints are cached objects) are dropped: `n:1`, `top_k:0`,
  `min_tokens:0`, `max_tokens:16`, `routed_experts_prompt_start:0`;
* the float knobs coming from the request, the generation config or the API defaults table are
  always emitted, except where SamplingParams itself resets them (greedy sampling sets
  `top_p`, `top_k` and `min_p` back to their defaults, which are then dropped);
* `None`/`False` defaults are dropped; `stop`, `stop_token_ids`, `bad_words` and
  `skip_reading_prefix_cache` are always present.

The dict is built directly, in the struct's field order, without any intermediate object.
Validation messages are SamplingParams' own (`_verify_args`).
"""

from __future__ import annotations

import math
from typing import Any

from core.errors import shown
from core.protocol.common import MAX_N_SEQUENCES, VLLMValidationError

OUTPUT_KIND_DELTA = 1
OUTPUT_KIND_FINAL_ONLY = 2

_SAMPLING_EPS = 1e-5
_MIN_TEMPERATURE = 1e-2

# the 7 knobs that fall back to generation_config, then to the OpenAI defaults (docs/vllm-wire-spec.md §3.1)
DEFAULT_KNOBS: dict[str, Any] = {
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
}


def get_max_tokens(max_model_len: int, requested: int | None, input_length: int,
                   defaults: dict[str, Any], truncate_prompt_tokens: int | None = None) -> int:
    """min(room left in the context, requested or generation-config max_tokens)."""
    if truncate_prompt_tokens is not None:
        input_length = min(input_length, max_model_len if truncate_prompt_tokens == -1 else truncate_prompt_tokens)
    if max_model_len < input_length:
        raise VLLMValidationError(
            f"Input length ({input_length}) exceeds model's maximum context length ({max_model_len}).")
    room = max_model_len - input_length
    fallback = requested if requested is not None else defaults.get("max_tokens")
    return room if fallback is None else min(room, fallback)


def _resolve_knobs(request: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, default in DEFAULT_KNOBS.items():
        value = getattr(request, name)
        out[name] = value if value is not None else defaults.get(name, default)
    return out


def _logit_bias(logit_bias: dict[str, float] | None) -> dict[str, float] | None:
    if logit_bias is None:
        return None
    converted: dict[int, float] = {}
    invalid: list[str] = []
    for token, bias in logit_bias.items():
        try:
            token_id = int(token)
        except (TypeError, ValueError):
            invalid.append(token)
            continue
        converted[token_id] = min(100.0, max(-100.0, bias))
    if invalid:
        raise VLLMValidationError("logit_bias contains key(s) that cannot be converted to integer token IDs: "
                                  f"{shown(invalid, quote=True)}", parameter="logit_bias", value=invalid)
    return {str(k): v for k, v in converted.items()}


def build_sampling_params(*, n: int | None, knobs: dict[str, Any], watermarking: bool | None, seed: int | None,
                          stop: str | list[str] | None, stop_token_ids: list[int] | None,
                          bad_words: list[str] | None, thinking_token_budget: int | None,
                          include_stop_str_in_output: bool, ignore_eos: bool, max_tokens: int | None,
                          min_tokens: int, logprobs: int | None, prompt_logprobs: int | None,
                          logprob_token_ids: list[int] | None, skip_special_tokens: bool,
                          spaces_between_special_tokens: bool, output_kind: int, stream_interval: int | None,
                          structured_outputs: dict[str, Any] | None, logit_bias: dict[str, float] | None,
                          allowed_token_ids: list[int] | None, extra_args: dict[str, Any] | None,
                          repetition_detection: dict[str, Any] | None, routed_experts_prompt_start: int
                          ) -> dict[str, Any]:
    """SamplingParams.from_optional + __post_init__ + _verify_args, emitted as vLLM's JSON."""
    n = 1 if n is None else n
    presence = 0.0 if knobs["presence_penalty"] is None else knobs["presence_penalty"]
    frequency = 0.0 if knobs["frequency_penalty"] is None else knobs["frequency_penalty"]
    repetition = 1.0 if knobs["repetition_penalty"] is None else knobs["repetition_penalty"]
    temperature = 1.0 if knobs["temperature"] is None else knobs["temperature"]
    top_p = 1.0 if knobs["top_p"] is None else knobs["top_p"]
    top_k = knobs["top_k"]
    min_p = knobs["min_p"]
    bias = _logit_bias(logit_bias)

    # __post_init__
    if 0 < temperature < _MIN_TEMPERATURE:
        temperature = _MIN_TEMPERATURE
    if seed == -1:
        seed = None
    stop_list = [] if stop is None else ([stop] if isinstance(stop, str) else list(stop))
    stop_ids = [] if stop_token_ids is None else list(dict.fromkeys(stop_token_ids))
    bad = [] if bad_words is None else list(dict.fromkeys(bad_words))
    buffer_length = max(len(s) for s in stop_list) - 1 if stop_list and not include_stop_str_in_output else 0
    _verify(n=n, extra_args=extra_args, presence=presence, frequency=frequency, repetition=repetition,
            temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, max_tokens=max_tokens,
            min_tokens=min_tokens, stream_interval=stream_interval, logprobs=logprobs,
            prompt_logprobs=prompt_logprobs, stop=stop_list, bad_words=bad)
    greedy = temperature < _SAMPLING_EPS
    if greedy and n > 1:
        raise VLLMValidationError(f"n must be 1 when using greedy sampling, got {n}.")

    out: dict[str, Any] = {}
    if n != 1:
        out["n"] = n
    out["presence_penalty"] = presence
    out["frequency_penalty"] = frequency
    out["repetition_penalty"] = repetition
    out["temperature"] = temperature
    if watermarking is not None:
        out["watermarking"] = watermarking
    if not greedy:  # greedy resets these to the (omitted) defaults
        out["top_p"] = top_p
        if top_k != 0 or isinstance(top_k, float):
            out["top_k"] = top_k
        out["min_p"] = min_p
    if seed is not None:
        out["seed"] = seed
    out["stop"] = stop_list
    out["stop_token_ids"] = stop_ids
    if ignore_eos:
        out["ignore_eos"] = True
    if max_tokens is None:
        out["max_tokens"] = None
    elif max_tokens != 16:
        out["max_tokens"] = max_tokens
    if min_tokens != 0:
        out["min_tokens"] = min_tokens
    if logprobs is not None:
        out["logprobs"] = logprobs
    if prompt_logprobs is not None:
        out["prompt_logprobs"] = prompt_logprobs
    if logprob_token_ids is not None:
        out["logprob_token_ids"] = logprob_token_ids
    if not skip_special_tokens:
        out["skip_special_tokens"] = False
    if not spaces_between_special_tokens:
        out["spaces_between_special_tokens"] = False
    if include_stop_str_in_output:
        out["include_stop_str_in_output"] = True
    out["output_kind"] = output_kind
    if stream_interval is not None:
        out["stream_interval"] = stream_interval
    out["skip_clone"] = True
    if buffer_length != 0:
        out["output_text_buffer_length"] = buffer_length
    if structured_outputs is not None:
        out["structured_outputs"] = structured_outputs
    if bias is not None:
        out["logit_bias"] = bias
    if allowed_token_ids is not None:
        out["allowed_token_ids"] = allowed_token_ids
    if extra_args is not None:
        out["extra_args"] = extra_args
    out["bad_words"] = bad
    out["skip_reading_prefix_cache"] = prompt_logprobs is not None
    if thinking_token_budget is not None:
        out["thinking_token_budget"] = thinking_token_budget
    if repetition_detection is not None:
        out["repetition_detection"] = repetition_detection
    if routed_experts_prompt_start != 0:
        out["routed_experts_prompt_start"] = routed_experts_prompt_start
    return out


def _verify(*, n: int, extra_args: dict[str, Any] | None, presence: float, frequency: float, repetition: float,
            temperature: float, top_p: float, top_k: int, min_p: float, max_tokens: int | None, min_tokens: int,
            stream_interval: int | None, logprobs: int | None, prompt_logprobs: int | None, stop: list[str],
            bad_words: list[str]) -> None:
    if not isinstance(n, int):
        raise VLLMValidationError(f"n must be an int, but is of type {type(n)}")
    if n < 1:
        raise VLLMValidationError(f"n must be at least 1, got {n}.")
    if n > MAX_N_SEQUENCES:
        raise VLLMValidationError(f"n must be at most {MAX_N_SEQUENCES}, got {n}. To increase this limit, set the "
                                  "VLLM_MAX_N_SEQUENCES environment variable.")
    if extra_args:
        _verify_extra_args(extra_args)
    if not -2.0 <= presence <= 2.0:
        raise VLLMValidationError(f"presence_penalty must be in [-2, 2], got {presence}.")
    if not -2.0 <= frequency <= 2.0:
        raise VLLMValidationError(f"frequency_penalty must be in [-2, 2], got {frequency}.")
    if not math.isfinite(repetition):
        raise VLLMValidationError(f"repetition_penalty must be a finite number, got {repetition}.")
    if repetition <= 0.0:
        raise VLLMValidationError(f"repetition_penalty must be greater than zero, got {repetition}.")
    if not math.isfinite(temperature):
        raise VLLMValidationError(f"temperature must be a finite number, got {temperature}.",
                                  parameter="temperature", value=temperature)
    if temperature < 0.0:
        raise VLLMValidationError(f"temperature must be non-negative, got {temperature}.",
                                  parameter="temperature", value=temperature)
    if temperature > 2.0:
        raise VLLMValidationError(f"temperature must be in [0, 2], got {temperature}.",
                                  parameter="temperature", value=temperature)
    if not 0.0 < top_p <= 1.0:
        raise VLLMValidationError(f"top_p must be in (0, 1], got {top_p}.", parameter="top_p", value=top_p)
    if top_k < -1:
        raise VLLMValidationError(f"top_k must be 0 (disable), or at least 1, got {top_k}.")
    if not isinstance(top_k, int):
        raise VLLMValidationError(f"top_k must be an integer, got {type(top_k).__name__}")
    if not 0.0 <= min_p <= 1.0:
        raise VLLMValidationError(f"min_p must be in [0, 1], got {min_p}.")
    if max_tokens is not None and max_tokens < 1:
        raise VLLMValidationError(f"max_tokens must be at least 1, got {max_tokens}.", parameter="max_tokens",
                                  value=max_tokens)
    if min_tokens < 0:
        raise VLLMValidationError(f"min_tokens must be greater than or equal to 0, got {min_tokens}.")
    if max_tokens is not None and min_tokens > max_tokens:
        raise VLLMValidationError(f"min_tokens must be less than or equal to max_tokens={max_tokens}, "
                                  f"got {min_tokens}.")
    if stream_interval is not None and stream_interval < 1:
        raise VLLMValidationError(f"stream_interval must be at least 1, got {stream_interval}.",
                                  parameter="stream_interval", value=stream_interval)
    if logprobs is not None and logprobs != -1 and logprobs < 0:
        raise VLLMValidationError(f"logprobs must be non-negative or -1, got {logprobs}.", parameter="logprobs",
                                  value=logprobs)
    if prompt_logprobs is not None and prompt_logprobs != -1 and prompt_logprobs < 0:
        raise VLLMValidationError(f"prompt_logprobs must be non-negative or -1, got {prompt_logprobs}.",
                                  parameter="prompt_logprobs", value=prompt_logprobs)
    if any(not s for s in stop):
        raise VLLMValidationError("stop cannot contain an empty string.")
    if any(not w for w in bad_words):
        raise VLLMValidationError(f"bad_words cannot contain an empty string. Got bad_words={bad_words}")


def _verify_extra_args(extra_args: dict[str, Any]) -> None:
    pending: list[Any] = [extra_args]
    while pending:
        value = pending.pop()
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
            raise VLLMValidationError("extra_args integers must be between -2**63 and 2**64 - 1.",
                                      parameter="extra_args")
        if isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, (list, tuple)):
            pending.extend(value)


def _merged_stop_token_ids(requested: list[int] | None, defaults: dict[str, Any]) -> list[int] | None:
    default_ids = defaults.get("stop_token_ids")
    if not default_ids:
        return requested
    if not requested:
        return list(default_ids)
    return list(dict.fromkeys([*requested, *default_ids]))


def _extra_args(request: Any) -> dict[str, Any] | None:
    extra: dict[str, Any] = dict(request.vllm_xargs) if request.vllm_xargs else {}
    if request.kv_transfer_params:
        extra["kv_transfer_params"] = request.kv_transfer_params
    if request.ec_transfer_params:
        extra["ec_transfer_params"] = request.ec_transfer_params
    return extra or None


def _skip_special(request: Any, defaults: dict[str, Any]) -> bool:
    value = request.skip_special_tokens
    return defaults.get("skip_special_tokens", True) if value is None else value


def _common(request: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    structured = request.extract_structured_outputs()
    detection = request.repetition_detection
    return dict(
        n=request.n, knobs=_resolve_knobs(request, defaults), watermarking=request.watermarking,
        seed=request.seed, stop=request.stop,
        stop_token_ids=_merged_stop_token_ids(request.stop_token_ids, defaults),
        bad_words=request.bad_words, thinking_token_budget=request.thinking_token_budget,
        include_stop_str_in_output=request.include_stop_str_in_output, ignore_eos=request.ignore_eos,
        min_tokens=request.min_tokens, logprob_token_ids=request.logprob_token_ids or None,
        skip_special_tokens=_skip_special(request, defaults),
        spaces_between_special_tokens=request.spaces_between_special_tokens,
        output_kind=OUTPUT_KIND_DELTA if request.stream else OUTPUT_KIND_FINAL_ONLY,
        stream_interval=request.stream_interval,
        structured_outputs=None if structured is None else structured.as_wire(),
        logit_bias=request.logit_bias, allowed_token_ids=request.allowed_token_ids,
        extra_args=_extra_args(request),
        repetition_detection=None if detection is None else detection.as_wire(),
        routed_experts_prompt_start=request.routed_experts_prompt_start)


def chat_sampling_params(request: Any, max_tokens: int, defaults: dict[str, Any]) -> dict[str, Any]:
    """ChatCompletionRequest.to_sampling_params, as JSON."""
    prompt_logprobs = request.prompt_logprobs
    if prompt_logprobs is None and request.echo:
        prompt_logprobs = request.top_logprobs
    logprobs = request.top_logprobs if request.logprobs and not request.logprob_token_ids else None
    return build_sampling_params(max_tokens=max_tokens, logprobs=logprobs, prompt_logprobs=prompt_logprobs,
                                 **_common(request, defaults))


def completion_sampling_params(request: Any, max_tokens: int, defaults: dict[str, Any]) -> dict[str, Any]:
    """CompletionRequest.to_sampling_params, as JSON (echo with max_tokens 0 asks for one token)."""
    prompt_logprobs = request.prompt_logprobs
    if prompt_logprobs is None and request.echo:
        prompt_logprobs = request.logprobs
    echo_only = request.echo and request.max_tokens == 0
    return build_sampling_params(max_tokens=1 if echo_only else max_tokens,
                                 logprobs=None if request.logprob_token_ids else request.logprobs,
                                 prompt_logprobs=prompt_logprobs, **_common(request, defaults))


def hoist_transfer_params(params: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Move kv/ec transfer params out of extra_args to the GenerateRequest top level."""
    extra = params.get("extra_args")
    if not extra:
        return None, None
    extra = dict(extra)
    kv = extra.pop("kv_transfer_params", None)
    ec = extra.pop("ec_transfer_params", None)
    if extra:
        params["extra_args"] = extra
    else:
        params.pop("extra_args")
    return kv, ec
