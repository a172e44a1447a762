"""Record vLLM 0.33's own `to_sampling_params` + SamplingParams JSON for many requests (dev tool).

Run with the oracle's 0.33 interpreter (it imports vllm in-process, no server needed):

    /root/vllm-oracle/venv033/bin/python tests/oracle/record_render_sampling.py

Writes tests/fixtures/oracle/render/sampling_params.json: for each case the request body, the
max_tokens and generation-config defaults given to `to_sampling_params`, and either the
msgspec JSON vLLM's render would emit (`sampling_params`, after moving kv/ec transfer params
out of extra_args) or the error text. Also records `get_max_tokens` and the content format vLLM
detects for a few chat templates.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

import msgspec

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.completion.protocol import CompletionRequest
from vllm.entrypoints.serve.utils.api_utils import get_max_tokens
from vllm.renderers.hf import _detect_content_format

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "oracle" / "render" / "sampling_params.json"
sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import pretty  # noqa: E402

QWEN = {"temperature": 0.6, "top_k": 20, "top_p": 0.95}
LLAMA = {"temperature": 0.6, "top_p": 0.9}
MSG = [{"role": "user", "content": "hi"}]

CHAT = [
    ("default_no_genconfig", {}, 100, {}),
    ("default_qwen_genconfig", {}, 100, QWEN),
    ("stream", {"stream": True}, 40000, QWEN),
    ("max_tokens_16_is_dropped", {}, 16, {}),
    ("ints_equal_defaults", {"n": 1, "top_k": 0, "min_tokens": 0, "seed": -1}, 50, {}),
    ("floats_equal_defaults", {"temperature": 1.0, "top_p": 1.0, "min_p": 0.0, "presence_penalty": 0.0,
                               "frequency_penalty": 0.0, "repetition_penalty": 1.0}, 50, {}),
    ("int_valued_floats", {"temperature": 1, "top_p": 1, "presence_penalty": 0}, 50, {}),
    ("greedy_resets", {"temperature": 0, "top_p": 0.3, "top_k": 7, "min_p": 0.4}, 50, QWEN),
    ("greedy_from_genconfig", {}, 50, {"temperature": 0.0, "top_p": 0.5}),
    ("tiny_temperature", {"temperature": 0.001}, 50, {}),
    ("top_k_minus_one", {"top_k": -1}, 50, QWEN),
    ("stop_string", {"stop": "END"}, 50, {}),
    ("stop_list_include", {"stop": ["a", "bcd"], "include_stop_str_in_output": True}, 50, {}),
    ("stop_list_buffer", {"stop": ["a", "bcdef", "xy"]}, 50, {}),
    ("stop_token_ids_dedup", {"stop_token_ids": [5, 6, 5, 7]}, 50, {}),
    ("stop_token_ids_merged_defaults", {"stop_token_ids": [5, 6]}, 50, {"stop_token_ids": [6, 9]}),
    ("bad_words_dedup", {"bad_words": ["x", "y", "x"]}, 50, {}),
    ("logprobs", {"logprobs": True, "top_logprobs": 4}, 50, {}),
    ("logprobs_zero", {"logprobs": True}, 50, {}),
    ("logprobs_with_token_ids", {"logprobs": True, "top_logprobs": 2, "logprob_token_ids": [1, 2]}, 50, {}),
    ("prompt_logprobs", {"prompt_logprobs": 3}, 50, {}),
    ("echo_prompt_logprobs", {"echo": True, "logprobs": True, "top_logprobs": 2}, 50, {}),
    ("logit_bias_clamp", {"logit_bias": {"1": 200, "2": -300.5, "03": 1.5}}, 50, {}),
    ("logit_bias_empty", {"logit_bias": {}}, 50, {}),
    ("seed", {"seed": 99}, 50, {}),
    ("n3", {"n": 3}, 50, {}),
    ("ignore_eos_min_tokens", {"ignore_eos": True, "min_tokens": 4}, 50, {}),
    ("skip_special_false", {"skip_special_tokens": False, "spaces_between_special_tokens": False}, 50, {}),
    ("skip_special_from_defaults", {}, 50, {"skip_special_tokens": False}),
    ("xargs_and_transfer", {"vllm_xargs": {"a": 1}, "kv_transfer_params": {"k": 1},
                            "ec_transfer_params": {"e": 2}}, 50, {}),
    ("only_transfer", {"kv_transfer_params": {"k": 1}}, 50, {}),
    ("empty_transfer", {"kv_transfer_params": {}, "vllm_xargs": {}}, 50, {}),
    ("allowed_ids", {"allowed_token_ids": [3, 4]}, 50, {}),
    ("structured_json", {"structured_outputs": {"json": {"type": "object"}}}, 50, {}),
    ("structured_regex_ws", {"structured_outputs": {"regex": "a+", "disable_any_whitespace": True}}, 50, {}),
    ("response_format_json_object", {"response_format": {"type": "json_object"}}, 50, {}),
    ("response_format_schema", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object"}}}}, 50, {}),
    ("response_format_overrides_structured", {"structured_outputs": {"regex": "a"},
                                              "response_format": {"type": "json_object"}}, 50, {}),
    ("response_format_text", {"response_format": {"type": "text"}}, 50, {}),
    ("thinking_budget", {"thinking_token_budget": 12}, 50, {}),
    ("thinking_budget_unlimited", {"thinking_token_budget": -1}, 50, {}),
    ("repetition_detection", {"repetition_detection": {"max_pattern_size": 4, "min_count": 2}}, 50, {}),
    ("stream_interval", {"stream_interval": 3, "stream": True}, 50, {}),
    ("watermarking", {"watermarking": False}, 50, {}),
    ("routed_experts", {"routed_experts_prompt_start": 3}, 50, {}),
    ("err_greedy_n", {"temperature": 0, "n": 2}, 50, {}),
    ("err_temperature", {"temperature": 2.5}, 50, {}),
    ("err_top_p", {"top_p": 1.5}, 50, {}),
    ("err_min_p", {"min_p": -0.1}, 50, {}),
    ("err_presence", {"presence_penalty": -3}, 50, {}),
    ("err_frequency", {"frequency_penalty": 2.5}, 50, {}),
    ("err_repetition", {"repetition_penalty": -1}, 50, {}),
    ("err_top_k", {"top_k": -2}, 50, {}),
    ("err_min_tokens", {"min_tokens": 60}, 50, {}),
    ("err_max_tokens", {}, 0, {}),
    ("err_stop_empty", {"stop": ["a", ""]}, 50, {}),
    ("err_bad_words_empty", {"bad_words": [""]}, 50, {}),
    ("err_logit_bias_key", {"logit_bias": {"x1": 1, "2": 1, "y": 3}}, 50, {}),
    ("err_n_zero", {"n": 0}, 50, {}),
    ("err_n_huge", {"n": 20000, "temperature": 1}, 50, {}),
    ("err_xargs_int", {"vllm_xargs": {"a": 2**70}}, 50, {}),
]
COMPLETION = [
    ("default", {"prompt": "x"}, 100, QWEN),
    ("echo_max_tokens_zero", {"prompt": "x", "echo": True, "max_tokens": 0}, 0, {}),
    ("echo_logprobs", {"prompt": "x", "echo": True, "logprobs": 2}, 50, {}),
    ("logprobs_and_token_ids", {"prompt": "x", "logprobs": 3, "logprob_token_ids": [4]}, 50, {}),
    ("stream_knobs", {"prompt": "x", "stream": True, "temperature": 0.3, "stop": "Q", "n": 2}, 50, LLAMA),
    ("thinking_budget", {"prompt": "x", "thinking_token_budget": 5}, 50, {}),
]
MAX_TOKENS = [  # (max_model_len, requested, input_length, defaults, truncate_prompt_tokens)
    (100, None, 10, {}, None), (100, 50, 10, {}, None), (100, 500, 10, {}, None), (100, None, 10, {"max_tokens": 20}, None),
    (100, 30, 10, {"max_tokens": 20}, None), (100, None, 150, {}, 40), (100, None, 150, {}, -1), (100, None, 90, {}, 95),
    (100, None, 101, {}, None),
]
TEMPLATES = {
    "string_content": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}",
    "loop_over_content": "{% for m in messages %}{% for part in m['content'] %}{{ part['text'] }}{% endfor %}{% endfor %}",
    "loop_over_content_attr": "{% for message in messages %}{% for c in message.content %}{{ c.text }}{% endfor %}"
                              "{% endfor %}",
    "alias_content": "{% for m in messages %}{% set content = m.content %}{% for item in content %}{{ item }}"
                     "{% endfor %}{% endfor %}",
    "alias_messages_namespace": "{% set ns = namespace(msgs=messages) %}{% for m in ns.msgs %}"
                                "{% for p in m['content'] %}{{ p }}{% endfor %}{% endfor %}",
    "macro_param": "{% macro render(c) %}{% for p in c %}{{ p.text }}{% endfor %}{% endmacro %}"
                   "{% for m in messages %}{{ render(m.content) }}{% endfor %}",
    "content_is_string_test": "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}"
                              "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}",
    "sliced_messages": "{% for m in messages[1:] %}{% for p in m.content %}{{ p }}{% endfor %}{% endfor %}",
    "filtered_content": "{% for m in messages %}{% for p in m.content | selectattr('type') %}{{ p }}"
                        "{% endfor %}{% endfor %}",
}


def dump_sampling(params) -> dict:
    data = json.loads(msgspec.json.encode(params))
    # the render response (pydantic over the msgspec struct) drops the struct's private fields
    # (`_all_stop_token_ids`); the nested structured_outputs dataclass keeps its `_backend*`
    data = {k: v for k, v in data.items() if not k.startswith("_")}
    extra = data.get("extra_args")
    if extra:
        extra = dict(extra)
        extra.pop("kv_transfer_params", None)
        extra.pop("ec_transfer_params", None)
        if extra:
            data["extra_args"] = extra
        else:
            data.pop("extra_args")
    return data


def run(kind: str, model, cases) -> list[dict]:
    out = []
    for name, body, max_tokens, defaults in cases:
        full = {"messages": MSG, **body} if kind == "chat" else body
        case = {"name": f"{kind}_{name}", "kind": kind, "request": full, "max_tokens": max_tokens,
                "defaults": defaults}
        try:
            request = model.model_validate(json.loads(json.dumps(full)))
            case["sampling_params"] = dump_sampling(request.to_sampling_params(max_tokens, dict(defaults)))
        except Exception as exc:  # noqa: BLE001
            case["error"] = str(exc)
            case["error_type"] = type(exc).__name__
        out.append(case)
    return out


def main() -> None:
    cases = run("chat", ChatCompletionRequest, CHAT) + run("completion", CompletionRequest, COMPLETION)
    max_tokens = []
    for args in MAX_TOKENS:
        try:
            max_tokens.append({"args": list(args), "result": get_max_tokens(*args[:4], None,
                                                                            truncate_prompt_tokens=args[4])})
        except Exception as exc:  # noqa: BLE001
            max_tokens.append({"args": list(args), "error": str(exc)})
    formats = {name: _detect_content_format(t, default="string") for name, t in TEMPLATES.items()}
    for name in ("tiny-qwen3", "tiny-llama3"):
        config = json.loads((Path("/root/vllm-oracle/models") / name / "tokenizer_config.json").read_text())
        formats[name] = _detect_content_format(config["chat_template"], default="string")
    doc = {"topic": "render_sampling_params", "vllm_versions": ["0.33.0"],
           "description": "vLLM 0.33's to_sampling_params JSON, get_max_tokens and content-format detection, "
                          "computed in-process by vLLM's own code",
           "recorded": {"script": "tests/oracle/record_render_sampling.py",
                        "date": datetime.date.today().isoformat()},
           "cases": cases, "max_tokens": max_tokens, "templates": TEMPLATES, "content_formats": formats}
    OUT.write_text(pretty(doc) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
