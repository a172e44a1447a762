"""Record vLLM 0.33's DeepSeek V3.2 / V4 render and derender answers (renderer modes deepseek_v32 / deepseek_v4).

Servers (in /root/vllm-oracle; flags from common.sh's parser_flags):
  8132  ./start-render033.sh tiny-deepseek-v32 8132
        (--tokenizer-mode deepseek_v32 --tool-call-parser deepseek_v32 --reasoning-parser deepseek_v3 --enable-auto-tool-choice)
  8133  ./start-render033.sh tiny-deepseek-v4 8133
        (--tokenizer-mode deepseek_v4 --tool-call-parser deepseek_v4 --reasoning-parser deepseek_v4 --enable-auto-tool-choice)
  8134  tiny-deepseek-v41 = tests/frontier_models.write_deepseek_model("v41", models/tiny-deepseek-v41);
        ./start-render033.sh tiny-deepseek-v41 8134 --tokenizer-mode deepseek_v41 --tool-call-parser deepseek_v41
        --reasoning-parser deepseek_v41 --enable-auto-tool-choice

Writes tests/fixtures/oracle/render_deepseek_v32.json / render_deepseek_v4.json (chat render) and
parsers_deepseek_v32.json / parsers_deepseek_v4.json (derender, non-streaming and streamed).
Usage: record_deepseek.py [render] [derender] [v32] [v4] [v41]   (default: all)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from oracle_client import Recorder, Tok  # noqa: E402

from tests.core.parsers.dsml_cases import FAMILIES, block, invoke  # noqa: E402
from record_parsers import TOOLS, Family  # noqa: E402

SCRIPT = "tests/oracle/record_deepseek.py"
RENDER = "/v1/chat/completions/render"
SERVERS = {
    "v32": ("tiny-deepseek-v32", 8132, ["--tokenizer-mode deepseek_v32", "--tool-call-parser deepseek_v32",
                                         "--reasoning-parser deepseek_v3", "--enable-auto-tool-choice"]),
    "v4": ("tiny-deepseek-v4", 8133, ["--tokenizer-mode deepseek_v4", "--tool-call-parser deepseek_v4",
                                       "--reasoning-parser deepseek_v4", "--enable-auto-tool-choice"]),
    "v41": ("tiny-deepseek-v41", 8134, ["--tokenizer-mode deepseek_v41", "--tool-call-parser deepseek_v41",
                                         "--reasoning-parser deepseek_v41", "--enable-auto-tool-choice"]),
}
USER = [{"role": "user", "content": "What is the weather in Hangzhou?"}]
CALLS = [{"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                           "arguments": '{"city": "杭州", "unit": "c"}'}},
         {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": '{"tz": "Asia/Shanghai"}'}}]
HISTORY = [{"role": "system", "content": "You are helpful."}, *USER,
           {"role": "assistant", "content": "Checking.", "reasoning": "Need tools.", "tool_calls": CALLS},
           {"role": "tool", "tool_call_id": "call_2", "content": "10:00"},
           {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'}]
STRICT = {"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def render_cases(rec: Recorder, key: str, model: str) -> None:
    def case(name, body, description):
        rec.call(name, key, RENDER, {"model": model, **body}, description)

    thinking = {"chat_template_kwargs": {"thinking": True}}
    no_thinking = {"chat_template_kwargs": {"thinking": False}}
    case("user_only", {"messages": USER}, "one user message (the mode's default thinking)")
    case("thinking_on", {"messages": USER, **thinking}, "thinking true")
    case("thinking_off", {"messages": USER, **no_thinking}, "thinking false")
    case("enable_thinking", {"messages": USER, "chat_template_kwargs": {"enable_thinking": True}}, "enable_thinking")
    case("system_user", {"messages": [{"role": "system", "content": "Be brief."}, *USER]}, "system then user")
    case("tools", {"messages": USER, "tools": TOOLS}, "tools: a system message with the DSML tool schemas")
    case("system_tools", {"messages": [{"role": "system", "content": "Be brief."}, *USER], "tools": TOOLS},
         "tools with a system message")
    case("history_tools", {"messages": HISTORY, "tools": TOOLS}, "an assistant tool call, results out of order")
    case("history_tools_thinking", {"messages": HISTORY, "tools": TOOLS, **thinking}, "the same, thinking")
    case("history_final", {"messages": [*USER, {"role": "assistant", "content": "Sunny.", "reasoning": "Easy."},
                                        {"role": "user", "content": "Tomorrow?"}], **thinking},
         "an earlier answer's reasoning is dropped")
    case("history_final_no_thinking", {"messages": [*USER, {"role": "assistant", "content": "Sunny."},
                                                    {"role": "user", "content": "Tomorrow?"}], **no_thinking},
         "multi-turn without thinking")
    case("assistant_last", {"messages": [*USER, {"role": "assistant", "content": "Sunny.", "reasoning": "x"}]},
         "the assistant's message last")
    case("developer", {"messages": [{"role": "developer", "content": "Answer in French."}, *USER]},
         "a developer message")
    case("user_parts", {"messages": [{"role": "user", "content": [{"type": "text", "text": "A"},
                                                                   {"type": "text", "text": "B"}]}]},
         "user content as text parts")
    for effort in ("low", "medium", "high", "max", "none"):
        case(f"effort_{effort}", {"messages": USER, "reasoning_effort": effort}, f"reasoning_effort {effort}")
    case("required", {"messages": USER, "tools": TOOLS, "tool_choice": "required"}, "tool_choice required")
    case("named", {"messages": USER, "tools": TOOLS, "tool_choice": {"type": "function",
                                                                       "function": {"name": "get_time"}}},
         "a named tool")
    case("none", {"messages": USER, "tools": TOOLS, "tool_choice": "none"}, "tool_choice none")
    case("auto_no_parallel", {"messages": USER, "tools": TOOLS, "parallel_tool_calls": False},
         "auto, parallel_tool_calls false")
    case("auto_strict", {"messages": USER, "tools": [STRICT]}, "auto with a strict tool")
    case("json_schema", {"messages": USER, "response_format": {"type": "json_schema", "json_schema": {
        "name": "w", "schema": {"type": "object"}}}}, "response_format json_schema")
    case("include_reasoning_false", {"messages": USER, "include_reasoning": False}, "include_reasoning false")
    case("untrusted_template", {"messages": USER, "chat_template": "{{ 'x' }}"}, "a request template: refused")
    case("tool_without_call", {"messages": [*USER, {"role": "tool", "tool_call_id": "x", "content": "r"}]},
         "a tool result without a call before it")
    for name, body, description in [
            ("fim", {"prompt": "def f(x):", "suffix": "    return y", "max_tokens": 5}, "completion with suffix (FIM)"),
            ("fim_list", {"prompt": ["a", "b"], "suffix": "z"}, "two prompts with a suffix"),
            ("fim_ids", {"prompt": [1, 2, 3], "suffix": "z"}, "token-id prompt with a suffix"),
            ("fim_echo", {"prompt": "x", "suffix": "z", "echo": True}, "echo with a suffix")]:
        rec.call(f"completion_{name}", key, "/v1/completions/render", {"model": model, **body}, description)
    case("effort_xhigh", {"messages": USER, "reasoning_effort": "xhigh"}, "reasoning_effort xhigh")
    case("effort_number", {"messages": USER, "chat_template_kwargs": {"reasoning_effort": 30}},
         "a numeric effort in the template kwargs (V4.1)")
    case("mid_system", {"messages": [*USER, {"role": "assistant", "content": "Sunny."},
                                     {"role": "system", "content": "Now answer in French."}]},
         "a system message after the first turn")
    case("system_last", {"messages": [{"role": "system", "content": "Only a system message."}]},
         "a lone system message")
    case("image_part", {"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {
        "data": "x", "format": "wav"}}]}]}, "a content part the encoder does not know")
    case("reasoning_history_tool_only", {"messages": [*HISTORY[1:], {"role": "assistant", "content": "Done.",
                                                                     "reasoning": "ok"}], "tools": TOOLS},
         "a tool round trip then an answer, tools present (thinking kept)")


def record_render(versions) -> None:
    for version, (model, port, flags) in SERVERS.items():
        if version not in versions:
            continue
        rec = Recorder(f"render_deepseek_{version}", f"vLLM 0.33 chat render of {model} "
                       f"(renderer mode deepseek_{version})", SCRIPT)
        key = rec.server(f"ds{version}-parsers", port, model, flags)
        render_cases(rec, key, model)
        rec.write()


def dsml(fam: str, calls: list[tuple[str, dict]]) -> str:
    f = FAMILIES[fam]
    return block(f, *(invoke(f, name, args) for name, args in calls))


def scenarios(fam: str) -> list[tuple[str, dict, str, str]]:
    """(name, request, output text, description); the output ends with EOS unless cut by length."""
    weather = dsml(fam, [("get_weather", {"city": "杭州", "unit": "c"})])
    two = dsml(fam, [("get_weather", {"city": "Oslo"}), ("get_time", {"tz": "UTC", "n": 3, "ok": True,
                                                                        "list": [1, "a"]})])
    tools = {"messages": USER, "tools": TOOLS}
    think = {"chat_template_kwargs": {"thinking": True}}
    nothink = {"chat_template_kwargs": {"thinking": False}}
    return [
        ("content_only", {"messages": USER, **nothink}, "It is sunny.", "plain content, thinking off"),
        ("reasoning_content", {"messages": USER, **think}, "Let me think.</think>It is sunny.",
         "thinking on: reasoning until </think> (the prompt opened <think>)"),
        ("reasoning_default", {"messages": USER}, "Hmm.</think>Sunny.", "the mode's default thinking"),
        ("call", {**tools, **nothink}, weather, "one DSML call"),
        ("call_after_reasoning", {**tools, **think}, "I should call the tool.</think>\n\n" + weather,
         "reasoning then a call"),
        ("content_then_call", {**tools, **nothink}, "Let me check.\n\n" + weather, "content before the block"),
        ("two_calls", {**tools, **nothink}, two, "two invokes, typed parameters"),
        ("text_after_block", {**tools, **nothink}, weather + "\nDone.", "text after the block"),
        ("call_in_reasoning", {**tools, **think}, "thinking " + weather, "the block starts inside reasoning"),
        ("unknown_tool", {**tools, **nothink}, dsml(fam, [("nope", {"x": 1})]), "a tool not in the request"),
        ("missing_string_attr", {**tools, **nothink},
         block(FAMILIES[fam], invoke(FAMILIES[fam], "get_weather", {"city": "Oslo"}, string_attr=False)),
         "a parameter without string attribute"),
        ("truncated_call", {**tools, **nothink}, weather[:-40], "length inside the call"),
        ("tool_choice_none", {**tools, "tool_choice": "none", **nothink}, weather, "tool_choice none"),
        ("tool_choice_required", {**tools, "tool_choice": "required", **nothink}, weather, "required"),
        ("tool_choice_named", {**tools, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                               **nothink}, weather, "named"),
        ("parallel_false", {**tools, "parallel_tool_calls": False, **nothink}, two, "parallel_tool_calls false"),
        ("unicode", {"messages": USER, **nothink}, "東京 🌞 naïve", "non-ASCII content"),
        ("think_tags_in_content", {"messages": USER, **nothink}, "a <think>b</think> c", "think tags, thinking off"),
    ]


def record_derender(versions) -> None:
    for version, (model, port, flags) in SERVERS.items():
        if version not in versions:
            continue
        rec = Recorder(f"parsers_deepseek_{version}", f"vLLM 0.33 derender on {model} with "
                       + " ".join(flags), SCRIPT)
        tok = Tok(model)
        f = Family(rec, f"ds{version}-parsers", port, model, flags, tok, eos=1)
        for name, req, text, description in scenarios(version):
            finish = "length" if name.startswith("truncated") else "stop"
            f.scenario(name, req, text, description, finish=finish)
        rec.write()


def ensure_v41_model() -> None:
    """The oracle has no tiny-deepseek-v41: write tests/frontier_models.py's into its models dir."""
    from oracle_client import MODELS_DIR

    from tests.frontier_models import write_deepseek_model

    if not (MODELS_DIR / "tiny-deepseek-v41" / "tokenizer.json").exists():
        write_deepseek_model("v41", MODELS_DIR / "tiny-deepseek-v41")


if __name__ == "__main__":
    args = sys.argv[1:]
    ensure_v41_model()  # before starting its server: run this once, then start 8134
    todo = [a for a in args if a in ("render", "derender")] or ["render", "derender"]
    chosen = [a for a in args if a in SERVERS] or list(SERVERS)
    if "render" in todo:
        record_render(chosen)
    if "derender" in todo:
        record_derender(chosen)
