"""sampling_params JSON, max_tokens and content-format detection against vLLM 0.33's own code.

The expected values were computed by vLLM itself (tests/oracle/record_render_sampling.py runs
`to_sampling_params` + msgspec serialization, `get_max_tokens` and `_detect_content_format`
in-process with vLLM 0.33) and stored in tests/fixtures/oracle/render/sampling_params.json.
"""

from __future__ import annotations

import pytest

from core.chat_template import load_template
from core.errors import RequestError
from core.protocol.chat import ChatCompletionRequest
from core.protocol.completion import CompletionRequest
from core.sampling import chat_sampling_params, completion_sampling_params, get_max_tokens, hoist_transfer_params
from tests.oracle_fixtures import load_document

DOC = load_document("render/sampling_params")


@pytest.mark.parametrize("case", DOC["cases"], ids=[c["name"] for c in DOC["cases"]])
def test_sampling_params_equal_vllm(case):
    model = ChatCompletionRequest if case["kind"] == "chat" else CompletionRequest
    build = chat_sampling_params if case["kind"] == "chat" else completion_sampling_params
    try:
        request = model.model_validate(case["request"])
        params = build(request, case["max_tokens"], dict(case["defaults"]))
        hoist_transfer_params(params)
    except RequestError as exc:
        assert "error" in case, f"vLLM accepted it: {case.get('sampling_params')}"
        assert exc.message == case["error"]
        assert exc.status == 400
        return
    assert "error" not in case, f"vLLM refused it: {case['error']}"
    assert params == case["sampling_params"]
    # key order is the struct's field order, as msgspec writes it
    assert list(params) == list(case["sampling_params"])


@pytest.mark.parametrize("entry", DOC["max_tokens"], ids=[str(e["args"]) for e in DOC["max_tokens"]])
def test_max_tokens_rule_equals_vllm(entry):
    max_model_len, requested, input_length, defaults, truncate = entry["args"]
    if "error" in entry:
        with pytest.raises(RequestError) as info:
            get_max_tokens(max_model_len, requested, input_length, defaults, truncate)
        assert info.value.message == entry["error"]
    else:
        assert get_max_tokens(max_model_len, requested, input_length, defaults, truncate) == entry["result"]


@pytest.mark.parametrize("name", sorted(DOC["templates"]))
def test_content_format_detection_equals_vllm(name):
    assert load_template(DOC["templates"][name]).content_format == DOC["content_formats"][name]


def test_model_templates_are_string_format(qwen3, llama3):
    assert load_template(qwen3.tokenizer.chat_template).content_format == DOC["content_formats"]["tiny-qwen3"]
    assert load_template(llama3.tokenizer.chat_template).content_format == DOC["content_formats"]["tiny-llama3"]
