"""Parser names: the frontier families are registered; a name vLLM 0.33 knows and we do not is a
one-line "not supported yet" naming the flag (never silently another parser)."""

from __future__ import annotations

import pytest

from core.parsers import registry
from core.render import RenderOptions


@pytest.mark.parametrize("name", ["openai_gptoss", "deepseek_v4", "deepseek_v41", "step3p5", "nemotron_v3",
                                  "seed_oss", "minimax_m2",
                                  "minimax_m2_append_think", "granite_thinking_parser",
                                  "gemma4", "step3", "minimax_m3", "kimi_k3", "olmo3", "ernie45",
                                  "hunyuan_a13b", "k2_horizon"])
def test_reasoning_registered(name):
    assert registry.get_reasoning_parser(name).name == name


@pytest.mark.parametrize("name", ["openai", "deepseek_v32", "deepseek_v4", "deepseek_v41", "step3p5", "seed_oss",
                                  "minimax_m2", "granite4", "gemma4", "step3",
                                  "minimax_m3", "kimi_k3", "phi4_mini_json",
                                  "internlm", "jamba", "longcat", "ernie45",
                                  "hunyuan_a13b", "k2_horizon", "olmo3"])
def test_tools_registered(name):
    assert registry.get_tool_parser(name).name == name


def test_vllm_names_we_lack_are_not_supported_yet():
    missing_tools = sorted(registry.VLLM_TOOL_PARSERS - set(registry.TOOL_PARSERS))
    missing_reasoning = sorted(registry.VLLM_REASONING_PARSERS - set(registry.REASONING_PARSERS))
    assert "seed_oss" not in missing_tools and "seed_oss" not in missing_reasoning
    assert "minimax_m2" not in missing_tools and "minimax_m2" not in missing_reasoning
    assert "minimax_m2_append_think" not in missing_reasoning
    assert "granite4" not in missing_tools and "granite_thinking_parser" not in missing_reasoning
    assert "gemma4" not in missing_tools and "gemma4" not in missing_reasoning
    assert "step3" not in missing_tools and "step3" not in missing_reasoning
    assert "minimax_m3" not in missing_tools and "minimax_m3" not in missing_reasoning
    assert "kimi_k3" not in missing_tools and "kimi_k3" not in missing_reasoning
    assert "k2_horizon" not in missing_tools and "k2_horizon" not in missing_reasoning
    assert not {"phi4_mini_json", "internlm", "jamba"} & set(missing_tools)
    assert "longcat" not in missing_tools
    assert "olmo3" not in missing_reasoning and "olmo3" not in missing_tools
    assert "ernie45" not in missing_tools and "ernie45" not in missing_reasoning
    assert "hunyuan_a13b" not in missing_tools and "hunyuan_a13b" not in missing_reasoning
    for name in missing_tools:
        with pytest.raises(ValueError, match=f"^--tool-call-parser {name} is not supported yet$"):
            RenderOptions.build(tool_call_parser=name, enable_auto_tool_choice=True)
    for name in missing_reasoning:
        with pytest.raises(ValueError, match=f"^--reasoning-parser {name} is not supported yet$"):
            RenderOptions.build(reasoning_parser=name)
    with pytest.raises(ValueError, match="unknown reasoning parser 'bogus'"):
        RenderOptions.build(reasoning_parser="bogus")
