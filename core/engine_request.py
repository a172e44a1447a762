"""What the front door sends a tokens-only engine for a rendered request (sans-IO).

A rendered GenerateRequest (`core.render`) is what vLLM's render server would return; the engine
request differs from it in a few deliberate ways:

* no stop strings (a tokens-only engine answers 400 to them, docs/vllm-wire-spec.md §0.3: the proxy matches them);
* an explicit `max_tokens` (vLLM's JSON omits 16, SamplingParams' default, and an engine that does
  not see the key generates up to max_model_len: docs/vllm-wire-spec.md §2.3), which the proxy also enforces;
* no model alias (the engine may serve another name), no usage events (the proxy counts);
* a unique request id per engine request (clients may reuse an `X-Request-Id`; the engine aborts
  by id, so one client's disconnect can never abort another's generation).
"""

from __future__ import annotations

import secrets
from typing import Any

DEFAULT_MAX_TOKENS = 16  # SamplingParams' default, which vLLM's JSON form leaves out

# Sampling keys that only shape the generated tokens: the prompt-logprobs side request (one token,
# nobody reads it) leaves them out, so it is never rejected for them (min_tokens > max_tokens 1)
# and never pays for them (a structured-output grammar, output logprobs, n sequences).
GENERATION_ONLY = ("n", "logprobs", "logprob_token_ids", "min_tokens", "structured_outputs")


def max_tokens(gen: dict[str, Any]) -> int:
    """The number of tokens the engine may generate per choice for this rendered request."""
    value = gen["sampling_params"].get("max_tokens")
    return DEFAULT_MAX_TOKENS if value is None else int(value)


def engine_body(gen: dict[str, Any], stream: bool) -> dict[str, Any]:
    """The engine request for a rendered GenerateRequest (see the module docstring)."""
    body = dict(gen)
    body["request_id"] = f"{gen['request_id']}-{secrets.token_hex(4)}"
    params = dict(gen["sampling_params"])
    params.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
    if params.get("stop"):
        params["stop"] = []
    params.pop("output_text_buffer_length", None)
    params["output_kind"] = 1 if stream else 2
    body["sampling_params"] = params
    body["stream"] = stream
    body["stream_options"] = None
    body["model"] = None
    return body


def prompt_logprobs_body(gen: dict[str, Any]) -> dict[str, Any]:
    """The non-streamed engine request that only fetches one prompt's logprobs (streamed echo).

    `max_tokens: 1` because the engine must generate at least one token (docs/vllm-wire-spec.md §2.2 does the same for
    echo with max_tokens 0); its own id, so an abort of it never touches the streamed request."""
    params = {k: v for k, v in gen["sampling_params"].items() if k not in GENERATION_ONLY}
    params["max_tokens"] = 1
    return engine_body({**gen, "request_id": f"{gen['request_id']}-prompt-logprobs", "sampling_params": params},
                       stream=False)


def completion_stream_body(gen: dict[str, Any]) -> dict[str, Any]:
    """The streamed engine request of a completion: without `prompt_logprobs`, which a tokens-only
    engine never puts in stream events (docs/vllm-wire-spec.md §2.3) and completion chunks never carry; computing them
    would be wasted work, and their `skip_reading_prefix_cache` would bypass the prefix cache."""
    body = engine_body(gen, stream=True)
    params = body["sampling_params"]  # engine_body's own copy
    if params.pop("prompt_logprobs", None) is not None:
        params["skip_reading_prefix_cache"] = False
    return body


def check_prompt_vocabulary(max_token_id: int, gens: list[dict[str, Any]]) -> None:
    """Prompt ids a client sent as ids must exist: a tokens-only engine has no tokenizer to check
    them (vLLM 0.32's engine process dies on one), so answer `vllm serve`'s 400 here."""
    from core.errors import RequestError

    for gen in gens:
        highest = max(gen["token_ids"], default=0)
        if highest > max_token_id:
            raise RequestError(f"Token id {highest} is out of vocabulary", 400, "BadRequestError")
