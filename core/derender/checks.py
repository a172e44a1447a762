"""Request checks that run before any decode, with vLLM's exact messages (docs/vllm-wire-spec.md §2.4, 2.5).

A derender payload is caller-supplied and may be huge: every length is checked against the
server's limits before the tokenizer or a parser touches it, so a bad request costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.errors import bad_request, model_not_found
from core.model import ModelInfo

CHAT_REQUEST_REQUIRED = (
    "chat_request is required when a tool or reasoning parser is configured because plain "
    "detokenization would leak raw parser markup into content.")
PROMPT_IDS_REQUIRED = (
    "prompt_token_ids is required when a tool or reasoning parser is configured. Without it "
    "parse_delta cannot tell whether the prompt left reasoning open (e.g. a chat template that "
    "pre-opens <think>) and would misclassify reasoning content as plain content.")


def check_model(model: ModelInfo, requested: str | None) -> None:
    if not model.is_served(requested):
        raise model_not_found(requested or "", model.served_model_names)


def check_bounds(responses: Sequence[Any], *, max_model_len: int, max_logprobs: int, max_n: int) -> None:
    """vLLM's `_validate_derender_bounds` over pydantic GenerateTokensResponse objects."""
    if len(responses) > max_n:
        raise bad_request(f"generate_responses count ({len(responses)}) exceeds server maximum ({max_n}). "
                          "Set VLLM_MAX_N_SEQUENCES to increase this limit.")
    for gen in responses:
        if len(gen.choices) > max_n:
            raise bad_request(f"choices count ({len(gen.choices)}) in response '{gen.request_id}' "
                              f"exceeds server maximum ({max_n}).")
        for choice in gen.choices:
            if choice.token_ids and len(choice.token_ids) > max_model_len:
                raise bad_request(f"token_ids length ({len(choice.token_ids)}) in choice {choice.index} "
                                  f"exceeds max_model_len ({max_model_len}).")
            content = choice.logprobs.content if choice.logprobs is not None else None
            if content:
                if len(content) > max_model_len:
                    raise bad_request(f"logprobs.content length ({len(content)}) in choice {choice.index} "
                                      f"exceeds max_model_len ({max_model_len}).")
                if max_logprobs >= 0:
                    for entry in content:
                        if entry.top_logprobs and len(entry.top_logprobs) > max_logprobs:
                            raise bad_request(f"top_logprobs count ({len(entry.top_logprobs)}) in choice "
                                              f"{choice.index} exceeds max_logprobs ({max_logprobs}).")
        if gen.prompt_logprobs and len(gen.prompt_logprobs) > max_model_len:
            raise bad_request(f"prompt_logprobs length ({len(gen.prompt_logprobs)}) in response "
                              f"'{gen.request_id}' exceeds max_model_len ({max_model_len}).")


def check_prompt_ids(prompt_token_ids: Sequence[Sequence[int] | None], max_model_len: int) -> None:
    for ids in prompt_token_ids:
        if ids is not None and len(ids) > max_model_len:
            raise bad_request(f"prompt_token_ids length ({len(ids)}) exceeds max_model_len ({max_model_len}).")
