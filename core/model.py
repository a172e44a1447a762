"""What the server knows about its model: tokenizer, context length, sampling defaults, EOS ids.

Built from already-read file contents (`proxy.model_loader` does the reading), so this module
stays sans-IO. The rules follow how vLLM derives the same values (docs/vllm-wire-spec.md §3.1):

* `max_model_len`: the explicit flag, else the smallest of the usual length keys of config.json;
* sampling defaults: generation_config.json's values that differ from transformers'
  GenerationConfig defaults (vLLM reads `to_diff_dict()`), for the knobs vLLM takes from it;
* EOS: the tokenizer's `eos_token` is the primary EOS; generation_config's `eos_token_id`
  adds further stop ids.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass, field
from typing import Any

from core.tokenizer import Tokenizer

# config.json keys vLLM considers for the context length; the minimum of those present wins
MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                "max_sequence_length", "max_seq_length", "seq_len")
# transformers' GenerationConfig defaults: a value equal to these is not a "diff"
GENERATION_DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 1.0, "min_p": None,
                       "repetition_penalty": 1.0, "max_new_tokens": None}
# the knobs vLLM takes from generation_config.json (get_diff_sampling_param)
GENERATION_KNOBS = ("repetition_penalty", "temperature", "top_k", "top_p", "min_p", "max_new_tokens")
# used when nothing says otherwise (transformers' own fallback for unknown models)
FALLBACK_MAX_MODEL_LEN = 2048


@dataclass
class ModelInfo:
    tokenizer: Tokenizer
    served_model_names: list[str]
    max_model_len: int
    # request-independent sampling defaults, keyed by SamplingParams names (max_tokens, not max_new_tokens)
    sampling_defaults: dict[str, Any] = field(default_factory=dict)
    # generation_config eos ids other than the primary one: they act as stop_token_ids
    extra_eos_token_ids: list[int] = field(default_factory=list)
    model_type: str | None = None
    hf_config: dict[str, Any] = field(default_factory=dict)
    # how chats are rendered: "hf" (the Jinja chat template), "harmony" (gpt-oss) or a non-Jinja
    # renderer mode of vLLM's `--tokenizer-mode` (core/renderers/)
    renderer: str = "hf"

    @property
    def name(self) -> str:
        return self.served_model_names[0]

    @property
    def primary_eos_token_id(self) -> int | None:
        return self.tokenizer.eos_token_id

    @functools.cached_property
    def eos_token_ids(self) -> list[int]:
        """Every id that ends generation by default: primary EOS first, then generation-config ones
        (read on every request's derender: computed once; the fields it reads never change)."""
        ids = [] if self.primary_eos_token_id is None else [self.primary_eos_token_id]
        return ids + [i for i in self.extra_eos_token_ids if i not in ids]

    @functools.cached_property
    def eos_token_id_set(self) -> frozenset[int]:
        """`eos_token_ids` as a set (the ids a stream holds back by default, per request)."""
        return frozenset(self.eos_token_ids)

    @property
    def max_token_id(self) -> int:
        """The highest id a prompt or an engine may use: vLLM's renderer bound, the larger of the
        tokenizer's highest id and config.json's `vocab_size - 1` (embedding padding rows count)."""
        vocab_size = self.hf_config.get("vocab_size") if isinstance(self.hf_config, dict) else None
        return max(self.tokenizer.max_token_id, vocab_size - 1 if isinstance(vocab_size, int) else 0)

    def is_served(self, model: str | None) -> bool:
        """A missing or empty model is always accepted (docs/vllm-wire-spec.md §1)."""
        return not model or model in self.served_model_names

    @classmethod
    def build(cls, *, tokenizer: Tokenizer, served_model_names: list[str],
              hf_config: dict[str, Any] | None = None,
              generation_config: dict[str, Any] | None = None,
              max_model_len: int | None = None, tokenizer_mode: str = "auto") -> ModelInfo:
        from core.renderers import renderer_for

        hf_config = hf_config or {}
        return cls(
            tokenizer=tokenizer,
            served_model_names=served_model_names,
            max_model_len=max_model_len or derive_max_model_len(hf_config, tokenizer),
            sampling_defaults=sampling_defaults(generation_config or {}),
            extra_eos_token_ids=extra_eos_ids(generation_config or {}, tokenizer.eos_token_id),
            model_type=hf_config.get("model_type"),
            hf_config=hf_config,
            renderer=renderer_for(hf_config, tokenizer_mode),
        )


def derive_max_model_len(hf_config: dict[str, Any], tokenizer: Tokenizer) -> int:
    configs = [hf_config]
    if isinstance(hf_config.get("text_config"), dict):  # multimodal wrappers nest it
        configs.append(hf_config["text_config"])
    found = [c[k] for c in configs for k in MAX_LEN_KEYS if isinstance(c.get(k), int) and c[k] > 0]
    if found:
        return min(found)
    model_max = tokenizer.config.get("model_max_length")
    if isinstance(model_max, int) and 0 < model_max < 10**9:
        return model_max
    return FALLBACK_MAX_MODEL_LEN


def sampling_defaults(generation_config: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in GENERATION_KNOBS:
        value = generation_config.get(key)
        if value is None or value == GENERATION_DEFAULTS.get(key):
            continue
        out["max_tokens" if key == "max_new_tokens" else key] = value
    return out


def extra_eos_ids(generation_config: dict[str, Any], primary: int | None) -> list[int]:
    eos = generation_config.get("eos_token_id")
    if eos is None:
        return []
    ids = [eos] if isinstance(eos, int) else [i for i in eos if isinstance(i, int)]
    return [i for i in dict.fromkeys(ids) if i != primary]
