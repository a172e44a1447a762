"""Renderer selection (vLLM's --tokenizer-mode and architecture defaults) and its start-up errors."""

from __future__ import annotations

import pytest

from core.renderers import renderer_for
from proxy.model_loader import ModelLoadError, load_model
from tests.frontier_models import deepseek_model, write_deepseek_model


def test_modes_and_architectures():
    assert renderer_for({"model_type": "qwen3"}) == "hf"
    assert renderer_for({"model_type": "gpt_oss"}) == "harmony"
    assert renderer_for({"architectures": ["DeepseekV32ForCausalLM"]}) == "deepseek_v32"
    assert renderer_for({"architectures": ["DeepseekV4ForConditionalGeneration"]}) == "deepseek_v4"
    assert renderer_for({"architectures": ["DeepseekV41ForCausalLM"]}) == "deepseek_v41"
    assert renderer_for({"architectures": ["DeepseekV32ForCausalLM"]}, "hf") == "hf"  # explicit wins
    assert renderer_for({}, "deepseek_v4") == "deepseek_v4"
    assert renderer_for({}, "HF") == "hf"  # vLLM lower-cases the mode
    assert renderer_for({"architectures": ["KimiK3ForConditionalGeneration"]}) == "kimi_k3"
    assert renderer_for({}, "kimi_k3") == "kimi_k3"


@pytest.mark.parametrize("mode", ["kimi_audio", "cohere", "inkling", "alpamayo2_super"])
def test_modes_vllm_knows_are_refused_as_not_supported_yet(mode):
    with pytest.raises(ValueError, match=f"--tokenizer-mode {mode} is not supported yet"):
        renderer_for({}, mode)


def test_architecture_implied_mode_is_refused_and_unknown_mode_named():
    with pytest.raises(ValueError, match="--tokenizer-mode kimi_audio .implied by the architecture "
                                         "MoonshotKimiaForCausalLM. is not supported yet"):
        renderer_for({"architectures": ["MoonshotKimiaForCausalLM"]})
    with pytest.raises(ValueError, match="--tokenizer-mode bogus: unknown tokenizer mode"):
        renderer_for({}, "bogus")


def test_the_loader_turns_it_into_a_one_line_start_up_error(tmp_path):
    path = write_deepseek_model("v4", tmp_path / "v4")
    with pytest.raises(ModelLoadError, match="--tokenizer-mode cohere is not supported yet"):
        load_model(str(path), tokenizer_mode="cohere")
    assert load_model(str(path), tokenizer_mode="hf").renderer == "hf"


def test_deepseek_encoder_refusals_are_400s():
    from core.render import RenderOptions, render_chat
    from core.errors import RequestError
    from core.protocol.chat import ChatCompletionRequest

    model = deepseek_model("v32")
    request = ChatCompletionRequest(messages=[{"role": "tool", "tool_call_id": "x", "content": "r"}])
    with pytest.raises((RequestError, ValueError), match="No tool calls but found tool output|Invalid messages"):
        render_chat(model, RenderOptions.build(), request)
