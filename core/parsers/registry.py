"""Parser registries, keyed by vLLM's `--reasoning-parser` / `--tool-call-parser` names.

A family is registered only when it is complete (streaming, non-streaming, tests): a half-working
parser silently corrupts the content/reasoning/tool split, which is worse than a clear
"unknown parser" at start-up.
"""

from __future__ import annotations

from core.parsers.base import ReasoningParser, ToolParser

REASONING_PARSERS: dict[str, type[ReasoningParser]] = {}
TOOL_PARSERS: dict[str, type[ToolParser]] = {}


def register_reasoning(*names: str):
    def deco(cls: type[ReasoningParser]) -> type[ReasoningParser]:
        for name in names:
            REASONING_PARSERS[name] = cls
        return cls
    return deco


def register_tool(*names: str):
    def deco(cls: type[ToolParser]) -> type[ToolParser]:
        for name in names:
            TOOL_PARSERS[name] = cls
        return cls
    return deco


_LOADED = False


def _load_families() -> None:
    # importing the family modules runs their @register_* decorators (once: this is per request)
    global _LOADED
    if not _LOADED:
        import core.parsers.families  # noqa: F401
        _LOADED = True


def get_reasoning_parser(name: str) -> type[ReasoningParser]:
    _load_families()
    try:
        return REASONING_PARSERS[name]
    except KeyError:
        raise KeyError(f"unknown reasoning parser {name!r}; available: {', '.join(sorted(REASONING_PARSERS))}") from None


def get_tool_parser(name: str) -> type[ToolParser]:
    _load_families()
    try:
        return TOOL_PARSERS[name]
    except KeyError:
        raise KeyError(f"unknown tool-call parser {name!r}; available: {', '.join(sorted(TOOL_PARSERS))}") from None


# --- frontier families (branch `frontier`; the lead folds these into the name table) ---------
# gpt-oss / Harmony: `openai_gptoss` (reasoning) + `openai` (tools), core/parsers/families/harmony.py
# DeepSeek V3.2 / V4 / V4.1 (DSML): tools `deepseek_v32`, `deepseek_v4`, `deepseek_v41`, reasoning
# `deepseek_v4`, `deepseek_v41`, core/parsers/families/dsml.py
# Qwen3-grammar variants: `step3p5` (reasoning, tools), `nemotron_v3` (reasoning),
# core/parsers/families/qwen3_variants.py
_FRONTIER_MODULES = ("core.parsers.families.harmony", "core.parsers.families.dsml",
                     "core.parsers.families.qwen3_variants")
_load_core_families = _load_families


def _load_families() -> None:  # noqa: F811 - extends the loader above with the frontier modules
    import importlib

    _load_core_families()
    for module in _FRONTIER_MODULES:
        importlib.import_module(module)


# vLLM 0.33's own names: one we do not register is refused as "not supported yet" (the flag named)
VLLM_TOOL_PARSERS = frozenset((
    "apertus", "beam", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31", "deepseek_v32",
    "deepseek_v4", "deepseek_v41", "dots", "ernie45", "functiongemma", "gemma4", "gigachat3", "glm45", "glm47",
    "granite", "granite-20b-fc", "granite4", "hermes", "hf", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling",
    "internlm", "jamba", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3_json", "llama4_json",
    "llama4_pythonic", "longcat", "mimo", "minicpm5", "minimax_m2", "minimax_m3", "mistral", "muse",
    "muse_glimmer", "musespark1x", "olmo3", "openai", "phi4_mini_json", "plamo3", "poolside_v1", "pythonic",
    "qwen3_coder", "qwen3_json", "qwen3_xml", "seed_oss", "step3", "step3p5", "step5", "xlam"))
VLLM_REASONING_PARSERS = frozenset((
    "beam", "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4", "deepseek_v41",
    "ernie45", "gemma4", "glm45", "glm47", "granite", "granite_thinking_parser", "hf", "holo2", "hunyuan_a13b",
    "hy_v3", "hy_v4", "inkling", "k2_horizon", "kimi_k2", "kimi_k3", "ling3", "mimo", "minicpmv", "minimax_m2",
    "minimax_m2_append_think", "minimax_m3", "mistral", "muse", "muse_glimmer", "musespark1x", "nemotron_v3",
    "olmo3", "openai_gptoss", "plamo3", "poolside_v1", "qwen3", "seed_oss", "step3", "step3p5", "step5"))
_core_get_reasoning_parser, _core_get_tool_parser = get_reasoning_parser, get_tool_parser


def get_reasoning_parser(name: str) -> type[ReasoningParser]:  # noqa: F811 - a clearer error for vLLM's names
    _load_families()
    if name not in REASONING_PARSERS and name in VLLM_REASONING_PARSERS:
        raise KeyError(f"--reasoning-parser {name} is not supported yet")
    return _core_get_reasoning_parser(name)


def get_tool_parser(name: str) -> type[ToolParser]:  # noqa: F811 - a clearer error for vLLM's names
    _load_families()
    if name not in TOOL_PARSERS and name in VLLM_TOOL_PARSERS:
        raise KeyError(f"--tool-call-parser {name} is not supported yet")
    return _core_get_tool_parser(name)
