"""Chat renderers for prompt formats that are not Jinja templates, chosen as vLLM 0.33 chooses them.

* `harmony`: gpt-oss (config.json `model_type: gpt_oss`), whatever the tokenizer mode
  (vLLM's `use_harmony`); `core/renderers/harmony.py`.
* vLLM's `--tokenizer-mode` renderer modes, given explicitly or implied by the architecture
  (vLLM's `ModelConfig` defaults `auto` to the architecture's mode): `deepseek_v32`, `deepseek_v4`,
  `deepseek_v41`
  (`core/renderers/deepseek.py`: DeepSeek's Python prompt encoders, the prompt then tokenized
  like a chat template's output);
* `kimi_k3`: Kimi K3's XTML encoder (`encoding_k3.py` in the model repository, which vLLM reaches
  through the tokenizer's `apply_chat_template`), tokenized segment by segment
  (`core/renderers/kimi_k3.py`); the tokenizer is the Hugging Face one, as vLLM's mode loads it;
* `mistral`: Mistral's own tokenizer and prompt format through mistral-common
  (`core/renderers/mistral.py`; Tekken and SentencePiece tokenizers). The I/O layer picks it as vLLM
  does when the mode is `auto` (a model directory with `consolidated*.safetensors` and a
  Mistral tokenizer file) and loads the tokenizer.

`renderer_for` is called once at model load; a mode vLLM accepts and we do not is a one-line
start-up error naming `--tokenizer-mode` (a ValueError), never silently the Jinja template.
"""

from __future__ import annotations

from typing import Any

# vLLM 0.33's tokenizer modes: those we render, and the rest (accepted by vLLM, refused here)
SUPPORTED_MODES = ("auto", "hf", "deepseek_v32", "deepseek_v4", "deepseek_v41", "kimi_k3", "mistral")
UNSUPPORTED_MODES = ("alpamayo2_super", "cohere", "inkling", "kimi_audio", "terratorch")
# vLLM's ModelConfig: the architecture's renderer mode when the mode is "auto"
ARCHITECTURE_MODES = {
    "Alpamayo2Super": "alpamayo2_super",
    "MoonshotKimiaForCausalLM": "kimi_audio",
    "KimiK3ForConditionalGeneration": "kimi_k3",
    "DeepseekV32ForCausalLM": "deepseek_v32",
    "DeepseekV4ForCausalLM": "deepseek_v4",
    "DeepseekV4ForConditionalGeneration": "deepseek_v4",
    "DeepseekV41ForCausalLM": "deepseek_v41",
    "InklingForCausalLM": "inkling",
    "InklingForConditionalGeneration": "inkling",
}


def resolve_mode(hf_config: dict[str, Any], tokenizer_mode: str | None) -> str:
    mode = (tokenizer_mode or "auto").lower()
    if mode not in SUPPORTED_MODES and mode not in UNSUPPORTED_MODES:
        known = ", ".join(sorted((*SUPPORTED_MODES, *UNSUPPORTED_MODES)))
        raise ValueError(f"--tokenizer-mode {tokenizer_mode}: unknown tokenizer mode (vLLM 0.33 knows {known})")
    if mode == "auto":
        architectures = hf_config.get("architectures") or []
        arch = architectures[0] if isinstance(architectures, list) and architectures else None
        mode = ARCHITECTURE_MODES.get(arch, "auto")
        if mode in UNSUPPORTED_MODES:
            raise ValueError(f"--tokenizer-mode {mode} (implied by the architecture {arch}) is not supported yet")
    if mode in UNSUPPORTED_MODES:
        raise ValueError(f"--tokenizer-mode {mode} is not supported yet")
    return mode


def renderer_for(hf_config: dict[str, Any], tokenizer_mode: str | None = "auto") -> str:
    """The renderer of a model: "harmony", a renderer mode, or "hf" (the chat template)."""
    mode = resolve_mode(hf_config, tokenizer_mode)
    if hf_config.get("model_type") == "gpt_oss":
        return "harmony"
    return "hf" if mode in ("auto", "hf") else mode
