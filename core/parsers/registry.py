"""The parser tables, keyed by vLLM's `--reasoning-parser` / `--tool-call-parser` names.

A family is listed only when it is complete (streaming, non-streaming, tests): a half-working
parser silently corrupts the content/reasoning/tool split, which is worse than a clear
"unknown parser" at start-up. The tables are plain dicts of the family classes: the family
modules never import this one.
"""

from __future__ import annotations

from core.parsers.base import ReasoningParser, ToolParser
from core.parsers.families.deepseek import DeepSeekV3ToolParser, DeepSeekV31ToolParser
from core.parsers.families.dsml import (
    DeepSeekV4ReasoningParser,
    DeepSeekV4ToolParser,
    DeepSeekV32ToolParser,
    DeepSeekV41ReasoningParser,
    DeepSeekV41ToolParser,
)
from core.parsers.families.ernie45 import Ernie45ReasoningParser, Ernie45ToolParser
from core.parsers.families.gemma4 import Gemma4ReasoningParser, Gemma4ToolParser
from core.parsers.families.glm45 import Glm45ReasoningParser, Glm45ToolParser
from core.parsers.families.granite4 import (
    Granite4ToolParser,
    GraniteThinkingReasoningParser,
)
from core.parsers.families.harmony import HarmonyReasoningParser, HarmonyToolParser
from core.parsers.families.hermes import HermesToolParser, LongcatToolParser
from core.parsers.families.hunyuan_a13b import HunyuanA13BReasoningParser, HunyuanA13BToolParser
from core.parsers.families.internlm import InternLMToolParser
from core.parsers.families.jamba import JambaToolParser
from core.parsers.families.k2_horizon import K2HorizonReasoningParser, K2HorizonToolParser
from core.parsers.families.kimi_k2 import KimiK2ReasoningParser, KimiK2ToolParser
from core.parsers.families.kimi_k3 import KimiK3ReasoningParser, KimiK3ToolParser
from core.parsers.families.llama import Llama3JsonToolParser
from core.parsers.families.minimax import (
    MiniMaxM2AppendThinkReasoningParser,
    MiniMaxM2ReasoningParser,
    MiniMaxM2ToolParser,
)
from core.parsers.families.minimax_m3 import (
    MiniMaxM3ReasoningParser,
    MiniMaxM3ToolParser,
)
from core.parsers.families.mistral import MistralReasoningParser, MistralToolParser
from core.parsers.families.olmo3 import Olmo3ReasoningParser, Olmo3ToolParser
from core.parsers.families.phi4_mini import Phi4MiniJsonToolParser
from core.parsers.families.pythonic import Llama4PythonicToolParser, PythonicToolParser
from core.parsers.families.qwen3 import Qwen3ReasoningParser, Qwen3XmlToolParser
from core.parsers.families.qwen3_variants import (
    NemotronV3ReasoningParser,
    SeedOssReasoningParser,
    SeedOssToolParser,
    Step3p5ReasoningParser,
    Step3p5ToolParser,
)
from core.parsers.families.step3 import Step3ReasoningParser, Step3ToolParser
from core.parsers.families.think import (
    DeepSeekR1ReasoningParser,
    DeepSeekV3ReasoningParser,
    GraniteReasoningParser,
)

REASONING_PARSERS: dict[str, type[ReasoningParser]] = {
    "deepseek_r1": DeepSeekR1ReasoningParser,
    "deepseek_v3": DeepSeekV3ReasoningParser,
    "deepseek_v4": DeepSeekV4ReasoningParser,
    "deepseek_v41": DeepSeekV41ReasoningParser,
    "ernie45": Ernie45ReasoningParser,
    "gemma4": Gemma4ReasoningParser,
    "glm45": Glm45ReasoningParser,
    "glm47": Glm45ReasoningParser,
    "granite": GraniteReasoningParser,
    "granite_thinking_parser": GraniteThinkingReasoningParser,
    "hunyuan_a13b": HunyuanA13BReasoningParser,
    "k2_horizon": K2HorizonReasoningParser,
    "kimi_k2": KimiK2ReasoningParser,
    "kimi_k3": KimiK3ReasoningParser,
    "minimax_m2": MiniMaxM2ReasoningParser,
    "minimax_m2_append_think": MiniMaxM2AppendThinkReasoningParser,
    "minimax_m3": MiniMaxM3ReasoningParser,
    "mistral": MistralReasoningParser,
    "nemotron_v3": NemotronV3ReasoningParser,
    "olmo3": Olmo3ReasoningParser,
    "openai_gptoss": HarmonyReasoningParser,
    "qwen3": Qwen3ReasoningParser,
    "seed_oss": SeedOssReasoningParser,
    "step3": Step3ReasoningParser,
    "step3p5": Step3p5ReasoningParser,
}

TOOL_PARSERS: dict[str, type[ToolParser]] = {
    "deepseek_v3": DeepSeekV3ToolParser,
    "deepseek_v31": DeepSeekV31ToolParser,
    "deepseek_v32": DeepSeekV32ToolParser,
    "deepseek_v4": DeepSeekV4ToolParser,
    "deepseek_v41": DeepSeekV41ToolParser,
    "ernie45": Ernie45ToolParser,
    "gemma4": Gemma4ToolParser,
    "glm45": Glm45ToolParser,
    "glm47": Glm45ToolParser,
    "granite4": Granite4ToolParser,
    "hermes": HermesToolParser,
    "hunyuan_a13b": HunyuanA13BToolParser,
    "qwen3_json": HermesToolParser,
    "internlm": InternLMToolParser,
    "jamba": JambaToolParser,
    "k2_horizon": K2HorizonToolParser,
    "kimi_k2": KimiK2ToolParser,
    "kimi_k3": KimiK3ToolParser,
    "llama3_json": Llama3JsonToolParser,
    "llama4_json": Llama3JsonToolParser,
    "llama4_pythonic": Llama4PythonicToolParser,
    "longcat": LongcatToolParser,
    "minimax_m2": MiniMaxM2ToolParser,
    "minimax_m3": MiniMaxM3ToolParser,
    "mistral": MistralToolParser,
    "olmo3": Olmo3ToolParser,
    "openai": HarmonyToolParser,
    "phi4_mini_json": Phi4MiniJsonToolParser,
    "pythonic": PythonicToolParser,
    "qwen3_coder": Qwen3XmlToolParser,
    "qwen3_xml": Qwen3XmlToolParser,
    "seed_oss": SeedOssToolParser,
    "step3": Step3ToolParser,
    "step3p5": Step3p5ToolParser,
}


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


def get_reasoning_parser(name: str) -> type[ReasoningParser]:
    """The family for a `--reasoning-parser` name; a name vLLM 0.33 knows and we do not yet is
    "not supported yet", any other "unknown" (KeyError, a start-up error naming the flag)."""
    if name in REASONING_PARSERS:
        return REASONING_PARSERS[name]
    if name in VLLM_REASONING_PARSERS:
        raise KeyError(f"--reasoning-parser {name} is not supported yet")
    raise KeyError(f"unknown reasoning parser {name!r}; available: {', '.join(sorted(REASONING_PARSERS))}")


def get_tool_parser(name: str) -> type[ToolParser]:
    """As `get_reasoning_parser`, for `--tool-call-parser`."""
    if name in TOOL_PARSERS:
        return TOOL_PARSERS[name]
    if name in VLLM_TOOL_PARSERS:
        raise KeyError(f"--tool-call-parser {name} is not supported yet")
    raise KeyError(f"unknown tool-call parser {name!r}; available: {', '.join(sorted(TOOL_PARSERS))}")
