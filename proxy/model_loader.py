"""Read a model directory (or a Hugging Face repo id from the local cache) into `ModelInfo`.

Offline by design: a repo id is only looked up in the local HF cache; nothing is downloaded.
"""

from __future__ import annotations

import json
import os
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from core.model import ModelInfo
from core.tokenizer import Tokenizer


class ModelLoadError(Exception):
    pass


def _read_json(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    with path.open(encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, dict) else None


def resolve_model_dir(model: str) -> Path:
    """A local directory, else `org/name` in the HF hub cache (latest snapshot)."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    cache = Path(os.environ.get("HF_HUB_CACHE")
                 or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub")
    repo_dir = cache / ("models--" + model.replace("/", "--"))
    snapshots = repo_dir / "snapshots"
    if snapshots.is_dir():
        ref = repo_dir / "refs" / "main"
        if ref.is_file():
            candidate = snapshots / ref.read_text().strip()
            if candidate.is_dir():
                return candidate
        entries = sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
        if entries:
            return entries[0]
    raise ModelLoadError(f"model {model!r} is neither a directory nor in the local Hugging Face cache "
                         f"({cache}); this server never downloads models")


def read_chat_template_arg(value: str | None) -> str | None:
    """`--chat-template` takes a file path or the template text itself, as in vLLM."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if path.is_file():
        return path.read_text(encoding="utf-8")
    if any(ch in value for ch in "{}\n"):
        return value
    raise ModelLoadError(f"--chat-template {value!r} is neither a readable file nor a template")


def load_tokenizer(tokenizer_dir: Path) -> Tokenizer:
    tokenizer_file = tokenizer_dir / "tokenizer.json"
    if not tokenizer_file.is_file():
        raise ModelLoadError(f"no tokenizer.json in {tokenizer_dir} (only fast tokenizers are supported)")
    config = _read_json(tokenizer_dir / "tokenizer_config.json") or {}
    if "chat_template" not in config:
        # newer checkpoints keep the template next to the config
        for name in ("chat_template.jinja", "chat_template.json"):
            candidate = tokenizer_dir / name
            if candidate.is_file():
                text = candidate.read_text(encoding="utf-8")
                config["chat_template"] = json.loads(text).get("chat_template") if name.endswith(".json") else text
                break
    return Tokenizer(tokenizer_file.read_text(encoding="utf-8"), config)


def is_mistral_format(tokenizer_dir: Path) -> bool:
    """vLLM's `auto` choice of the mistral tokenizer mode: consolidated weights and a Mistral
    tokenizer file in the directory (Mistral's own releases)."""
    names = [p.name for p in tokenizer_dir.iterdir()] if tokenizer_dir.is_dir() else []
    return (any(fnmatch(n, "consolidated*.safetensors") for n in names)
            and any(n == "tekken.json" or fnmatch(n, "tokenizer.model.v*") for n in names))


def load_mistral_tokenizer(tokenizer_dir: Path) -> Tokenizer:
    """`--tokenizer-mode mistral`: the directory's tekken.json or tokenizer.model.v* through
    mistral-common, in test mode, as vLLM loads it (core/renderers/mistral.py)."""
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    from mistral_common.tokens.tokenizers.utils import get_one_valid_tokenizer_file

    from core.renderers.mistral import TOKENIZER_FILES, MistralModeTokenizer

    try:
        path = get_one_valid_tokenizer_file([str(p) for p in tokenizer_dir.iterdir()])
    except (ValueError, OSError):
        raise ModelLoadError(f"--tokenizer-mode mistral needs a Mistral tokenizer file ({TOKENIZER_FILES}) "
                             f"in {tokenizer_dir}; there is none") from None
    if not path.endswith(".json"):
        from mistral_common.imports import is_sentencepiece_installed

        if not is_sentencepiece_installed():
            raise ModelLoadError(f"--tokenizer-mode mistral with a SentencePiece tokenizer ({Path(path).name}) needs "
                                 "the sentencepiece package (pip install sentencepiece)")
    try:
        return MistralModeTokenizer(MistralTokenizer.from_file(path, mode=ValidationMode.test),
                                    grammar_templates=mistral_grammar_templates())
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from None


def mistral_grammar_templates() -> dict[str, str]:
    """mistral-common's Lark grammar templates (its guidance/data), which vLLM renders for Tekken v11+."""
    from importlib import resources

    data = resources.files("mistral_common") / "guidance" / "data"
    return {variant: (data / f"{variant}_grammar.lark.jinja").read_text(encoding="utf-8")
            for variant in ("base", "think")}


def load_model(model: str, *, tokenizer: str | None = None, served_model_names: list[str] | None = None,
               max_model_len: int | None = None, chat_template: str | None = None,
               tokenizer_mode: str = "auto") -> ModelInfo:
    model_dir = resolve_model_dir(model)
    tokenizer_dir = resolve_model_dir(tokenizer) if tokenizer else model_dir
    if (tokenizer_mode or "auto").lower() == "auto" and is_mistral_format(tokenizer_dir):
        tokenizer_mode = "mistral"
    if (tokenizer_mode or "").lower() == "mistral":
        tok = load_mistral_tokenizer(tokenizer_dir)  # a --chat-template is never used in this mode
    else:
        tok = load_tokenizer(tokenizer_dir)
    template = read_chat_template_arg(chat_template)
    if template is not None:
        tok.chat_template = template
    try:
        return ModelInfo.build(
            tokenizer=tok,
            served_model_names=served_model_names or [model],
            hf_config=_read_json(model_dir / "config.json"),
            generation_config=_read_json(model_dir / "generation_config.json"),
            max_model_len=max_model_len,
            tokenizer_mode=tokenizer_mode,
        )
    except ValueError as exc:  # a renderer mode we do not support: one line at start-up
        raise ModelLoadError(str(exc)) from None


def load_served_model(config: Any) -> ModelInfo:
    """The model `derender-proxy serve` (or the reference engine) serves, from its config's model
    flags (`proxy.config.ServerConfig`); without a model, the embedded Qwen3. The model's own
    parser defaults are applied to the config (gpt-oss: `--reasoning-parser openai_gptoss`)."""
    from proxy.embedded import EMBEDDED_NAME, embedded_model_dir

    if config.model is None:
        path, default_name = str(embedded_model_dir()), EMBEDDED_NAME
    else:
        path, default_name = config.model, config.model
    model = load_model(path, tokenizer=config.tokenizer,
                       served_model_names=config.served_model_name or [default_name],
                       max_model_len=config.max_model_len, chat_template=config.chat_template,
                       tokenizer_mode=getattr(config, "tokenizer_mode", "auto"))
    apply_model_parser_defaults(config, model)
    return model


def apply_model_parser_defaults(config: Any, model: ModelInfo) -> None:
    """vLLM's per-model parser defaults and checks (gpt-oss: reasoning parser openai_gptoss)."""
    from core.parsers.families.harmony import check_flags

    harmony = model.renderer == "harmony"
    if harmony and not config.reasoning_parser:
        config.reasoning_parser = "openai_gptoss"  # vLLM's GptOssForCausalLM config default
    try:
        check_flags(harmony, config.reasoning_parser, config.tool_call_parser, config.enable_auto_tool_choice)
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from None
