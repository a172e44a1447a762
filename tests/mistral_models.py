"""Tiny `--tokenizer-mode mistral` model directories, built from the mistral-common package's own
tokenizer files (no network): the ones the vLLM 0.33 oracle served (tests/oracle/make_extra_models.py
writes the same bytes into /root/vllm-oracle/models).

* ``tiny-mistral``: ``tekken_240911.json`` (Tekken v3) as ``tekken.json``;
* ``tiny-mistral-v11`` / ``tiny-mistral-v13``: the same vocabulary as a v11 / v13 Tekken: the
  version set and the special tokens listed (mistral-common's 20 classic control tokens,
  ``<SPECIAL_20>`` .. ``<SPECIAL_31>``, then ``[ARGS]`` ``[CALL_ID]``, and for v13 ``[THINK]``
  ``[/THINK]``), ids 0..35 as in Mistral's own v11 / v13 releases;
* ``tiny-mistral-sp``: ``mistral_instruct_tokenizer_241114.model.v7`` (SentencePiece v7) as
  ``tokenizer.model.v7``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

VARIANTS = ("tiny-mistral", "tiny-mistral-v11", "tiny-mistral-v13", "tiny-mistral-sp")
_NEWER_TOKENS = {"v11": ["[ARGS]", "[CALL_ID]"], "v13": ["[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]"]}


def _data(name: str) -> bytes:
    return (resources.files("mistral_common") / "data" / name).read_bytes()


def tekken_json(version: str) -> bytes:
    """tekken_240911.json as a Tekken `version` ("v3" is the file as shipped)."""
    raw = _data("tekken_240911.json")
    if version == "v3":
        return raw
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    doc = json.loads(raw)
    classic = [str(t["token_str"].value) for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS]
    names = classic + [f"<SPECIAL_{i}>" for i in range(len(classic), 32)] + _NEWER_TOKENS[version]
    doc["config"] = {**doc["config"], "version": version}
    doc["special_tokens"] = [{"rank": i, "token_str": t, "is_control": True} for i, t in enumerate(names)]
    return json.dumps(doc).encode("utf-8")


def mistral_config(vocab_size: int) -> str:
    return json.dumps({
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "vocab_size": vocab_size,
        "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-5, "rope_theta": 1000000.0,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
        "torch_dtype": "bfloat16"}, indent=1)


def write_mistral_model(path: Path, name: str) -> Path:
    """One of VARIANTS into `path` (created): its tokenizer file and a small Mistral config."""
    path.mkdir(parents=True, exist_ok=True)
    if name == "tiny-mistral-sp":
        (path / "tokenizer.model.v7").write_bytes(_data("mistral_instruct_tokenizer_241114.model.v7"))
        vocab = 32768
    else:
        version = name.rpartition("-")[2] if name != "tiny-mistral" else "v3"
        (path / "tekken.json").write_bytes(tekken_json(version))
        vocab = 131072
    (path / "config.json").write_text(mistral_config(vocab))
    return path
