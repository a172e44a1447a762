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
_FRONTIER_MODULES = ("core.parsers.families.harmony", "core.parsers.families.dsml")
_load_core_families = _load_families


def _load_families() -> None:  # noqa: F811 - extends the loader above with the frontier modules
    import importlib

    _load_core_families()
    for module in _FRONTIER_MODULES:
        importlib.import_module(module)
