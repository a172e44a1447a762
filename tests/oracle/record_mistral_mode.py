"""Record vLLM 0.33's render and decode in `--tokenizer-mode mistral` (mistral-common's Tekken).

Server (in /root/vllm-oracle, after `tests/oracle/make_extra_models.py` wrote models/tiny-mistral:
mistral-common's tekken_240911.json, a v3 Tekken tokenizer, as tekken.json):
  8128  ./start-render033.sh tiny-mistral 8128 --tokenizer-mode mistral --tool-call-parser mistral
        --enable-auto-tool-choice

Writes tests/fixtures/oracle/render_mistral_mode.json: chat render (plain, system, multi-turn, tools
and every tool_choice, tool results, assistant tool calls with long and short ids, continue_final_message,
sampling fields, and what vLLM or mistral-common refuses), completion render, /tokenize and
/detokenize, Messages and Responses render, completion derender (no parser: the request's
skip_special_tokens), and chat derender of outputs that test the mode's decoding (control tokens
with and without skip_special_tokens, characters split over byte tokens, [TOOL_CALLS] under
tool_choice none), non-streaming and streamed 1 and 5 tokens per call.
Usage: record_mistral_mode.py   (with /work/venv's python: it needs mistral-common)
       record_mistral_mode.py reasoning   (the server restarted with --reasoning-parser mistral added:
       writes render_mistral_mode_reasoning.json)
       record_mistral_mode.py v11 | v11-reasoning | v13 | sp   (the newer tokenizers, VARIANTS: the same
       case families into render_mistral_mode_<variant>.json, plus vLLM's grammar path from Tekken v11
       and v11+ / SentencePiece outputs; servers, in /root/vllm-oracle:
  8141  ./start-render033.sh tiny-mistral-v11 8141 --tokenizer-mode mistral --tool-call-parser mistral
        --enable-auto-tool-choice   (v11-reasoning: restarted with --reasoning-parser mistral added)
  8142  ./start-render033.sh tiny-mistral-v13 8142 ... --reasoning-parser mistral
  8143  ./start-render033.sh tiny-mistral-sp 8143 ...   (sp needs the sentencepiece package)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import MODELS_DIR, Recorder  # noqa: E402
from record_parsers import TOOLS, Family  # noqa: E402

SCRIPT = "tests/oracle/record_mistral_mode.py"
MODEL, PORT = "tiny-mistral", 8128
TOKENIZER_FILE = "tekken.json"
FLAGS = ["--tokenizer-mode mistral", "--tool-call-parser mistral", "--enable-auto-tool-choice"]
# the newer tokenizers (make_extra_models.py builds their directories): model, port, tokenizer file,
# extra flags, fixture, server key, description
VARIANTS = {
    "v11": ("tiny-mistral-v11", 8141, "tekken.json", [], "render_mistral_mode_v11", "mistral-tekken-v11",
            "tekken_240911.json as a v11 Tekken ([ARGS], [CALL_ID]): vLLM builds mistral-common's grammar"),
    "v11-reasoning": ("tiny-mistral-v11", 8141, "tekken.json", ["--reasoning-parser mistral"],
                      "render_mistral_mode_v11_reasoning", "mistral-tekken-v11-reasoning",
                      "the v11 Tekken with --reasoning-parser mistral too (plain-text <think> reasoning)"),
    "v13": ("tiny-mistral-v13", 8142, "tekken.json", ["--reasoning-parser mistral"], "render_mistral_mode_v13",
            "mistral-tekken-v13", "tekken_240911.json as a v13 Tekken ([ARGS], [CALL_ID], [THINK], [/THINK]) "
            "with the mistral reasoning parser too"),
    "sp": ("tiny-mistral-sp", 8143, "tokenizer.model.v7", [], "render_mistral_mode_sp", "mistral-sp",
           "mistral-common's mistral_instruct_tokenizer_241114.model.v7 (SentencePiece v7) as tokenizer.model.v7"),
}
RENDER = "/v1/chat/completions/render"
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
LONG_CALLS = [{"id": "call_0123456789abcdef", "type": "function",
               "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
              {"id": "call_fedcba9876543210", "type": "function",
               "function": {"name": "get_time", "arguments": '{"tz": "Europe/Paris"}'}}]
HISTORY = [*USER, {"role": "assistant", "content": None, "tool_calls": LONG_CALLS},
           {"role": "tool", "tool_call_id": "call_0123456789abcdef", "content": '{"temp": 21}'},
           {"role": "tool", "tool_call_id": "call_fedcba9876543210", "content": "10:00"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def render_cases(rec: Recorder, key: str) -> None:
    def case(name: str, body: dict, description: str) -> None:
        rec.call(name, key, RENDER, {"model": MODEL, **body}, description)

    case("user_only", {"messages": USER}, "one user message")
    case("system_user", {"messages": [{"role": "system", "content": "Be brief."}, *USER]}, "system then user")
    case("multi_turn", {"messages": [{"role": "system", "content": "Be brief."}, *USER,
                                     {"role": "assistant", "content": "Sunny."},
                                     {"role": "user", "content": "And tomorrow?"}]},
         "system, user, assistant, user (the system prompt goes to the last user turn)")
    case("user_parts", {"messages": [{"role": "user", "content": [{"type": "text", "text": "A"},
                                                                   {"type": "text", "text": "B"}]}]},
         "user content as text parts")
    case("unicode", {"messages": [{"role": "user", "content": "東京 🗼 naïve — ok?"}]}, "non-ASCII text")
    case("tools_auto", {"messages": USER, "tools": TOOLS}, "tools, tool_choice auto (the default with tools)")
    case("tools_system", {"messages": [{"role": "system", "content": "Be brief."}, *USER], "tools": TOOLS},
         "tools and a system message")
    case("tool_choice_none", {"messages": USER, "tools": TOOLS, "tool_choice": "none"}, "tool_choice none")
    case("tool_choice_required", {"messages": USER, "tools": TOOLS, "tool_choice": "required"},
         "tool_choice required: a JSON-array guided decoding schema, special tokens kept")
    case("tool_choice_named", {"messages": USER, "tools": TOOLS, "tool_choice": NAMED},
         "a named tool: the schema of that tool, maxItems 1")
    case("tool_choice_auto_no_tools", {"messages": USER, "tool_choice": "auto"}, "auto without tools")
    case("parallel_false", {"messages": USER, "tools": TOOLS, "parallel_tool_calls": False},
         "parallel_tool_calls false")
    case("required_json_schema", {"messages": USER, "tools": TOOLS, "tool_choice": "required",
                                  "response_format": {"type": "json_schema", "json_schema": {
                                      "name": "w", "schema": {"type": "object"}}}},
         "required with a json_schema response_format (replaced by the tool schema)")
    case("tool_no_description", {"messages": USER, "tools": [{"type": "function", "function": {
        "name": "ping", "parameters": {"type": "object", "properties": {}}}}]}, "a tool without description")
    case("tool_no_parameters", {"messages": USER, "tools": [{"type": "function", "function": {
        "name": "ping", "description": "Ping."}}]}, "a tool without parameters")
    case("history_long_ids", {"messages": HISTORY, "tools": TOOLS},
         "assistant tool calls with long ids (vLLM keeps their last 9 characters) and their results")
    case("history_short_ids", {"messages": [*USER, {"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "r"}], "tools": TOOLS},
         "a tool-call id that is not 9 characters: mistral-common refuses it")
    case("history_nine_char_ids", {"messages": [*USER, {"role": "assistant", "content": "", "tool_calls": [
        {"id": "abcDEF123", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."}, {"role": "user", "content": "Thanks"}], "tools": TOOLS},
         "a full tool round trip with a 9-character id, then another user turn")
    case("tool_without_call", {"messages": [*USER, {"role": "tool", "tool_call_id": "abcDEF123", "content": "r"}]},
         "a tool result without a call before it")
    case("assistant_last", {"messages": [*USER, {"role": "assistant", "content": "It is"}]},
         "the assistant last with add_generation_prompt (vLLM's default): refused")
    case("continue_final", {"messages": [*USER, {"role": "assistant", "content": "It is"}],
                            "add_generation_prompt": False, "continue_final_message": True},
         "continue_final_message: the assistant's message left open")
    case("continue_final_user_last", {"messages": USER, "add_generation_prompt": False,
                                      "continue_final_message": True}, "continue_final_message with a user last")
    case("no_generation_prompt", {"messages": USER, "add_generation_prompt": False},
         "add_generation_prompt false, user last")
    case("empty_messages", {"messages": []}, "no messages")
    case("system_only", {"messages": [{"role": "system", "content": "Only a system message."}]},
         "a lone system message")
    case("two_users", {"messages": [*USER, {"role": "user", "content": "Please."}]}, "two user messages in a row")
    case("system_after_user", {"messages": [*USER, {"role": "assistant", "content": "Sunny."},
                                            {"role": "system", "content": "Now answer in French."},
                                            {"role": "user", "content": "Merci"}]},
         "a system message after the first turn")
    case("developer", {"messages": [{"role": "developer", "content": "Answer in French."}, *USER]},
         "a developer message")
    case("empty_user", {"messages": [{"role": "user", "content": ""}]}, "an empty user message")
    case("chat_template_kwargs", {"messages": USER, "chat_template_kwargs": {}},
         "chat_template_kwargs (even empty) is refused in this mode")
    case("chat_template", {"messages": USER, "chat_template": "{{ 'x' }}"}, "a request chat template is refused")
    for effort in ("high", "none", "low"):
        case(f"effort_{effort}", {"messages": USER, "reasoning_effort": effort},
             f"reasoning_effort {effort} (ignored before v15)")
    case("image_part", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]},
         "an image part (a text-only model)")
    case("sampling", {"messages": USER, "temperature": 0.2, "top_p": 0.9, "max_tokens": 7, "stop": ["\n"],
                      "seed": 3, "n": 2, "logprobs": True, "top_logprobs": 2}, "sampling fields")
    case("max_completion_tokens_too_big", {"messages": USER, "max_completion_tokens": 40000},
         "max_completion_tokens over max_model_len")
    case("include_reasoning_false", {"messages": USER, "include_reasoning": False}, "include_reasoning false")
    case("stream_usage", {"messages": USER, "stream": True, "stream_options": {"include_usage": True}},
         "stream with usage")
    case("skip_special_false", {"messages": USER, "skip_special_tokens": False}, "skip_special_tokens false asked")
    case("assistant_name_field", {"messages": [{"role": "user", "content": "Hi", "name": "bob"}]},
         "a user message with a name")
    call = {"id": "abcDEF123", "type": "function", "function": {"name": "get_weather", "arguments": "not json"}}
    case("history_arguments_not_json", {"messages": [*USER, {"role": "assistant", "tool_calls": [call]},
                                                     {"role": "tool", "tool_call_id": "abcDEF123", "content": "r"}],
                                        "tools": TOOLS}, "an earlier call whose arguments are not JSON")
    ok_call = {**call, "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    for name, arguments in (("compact", '{"city":"Oslo" ,"n":[1,2]}'), ("list", "[1, 2]"), ("empty", "")):
        odd = {**call, "function": {"name": "get_weather", "arguments": arguments}}
        case(f"history_arguments_{name}", {"messages": [*USER, {"role": "assistant", "tool_calls": [odd]},
                                                        {"role": "tool", "tool_call_id": "abcDEF123", "content": "r"}],
                                           "tools": TOOLS}, f"an earlier call's arguments: {arguments!r}")
    case("tool_result_parts", {"messages": [*USER, {"role": "assistant", "tool_calls": [ok_call]},
                                            {"role": "tool", "tool_call_id": "abcDEF123", "name": "get_weather",
                                             "content": [{"type": "text", "text": "sun"},
                                                         {"type": "text", "text": "ny"}]}], "tools": TOOLS},
         "a tool result as text parts, with a name")
    case("assistant_reasoning_field", {"messages": [*USER, {"role": "assistant", "content": "Sunny.",
                                                            "reasoning": "Easy."},
                                                    {"role": "user", "content": "Thanks"}]},
         "an earlier answer with a reasoning field")
    case("assistant_content_and_calls", {"messages": [*USER, {"role": "assistant", "content": "Checking.",
                                                              "tool_calls": [ok_call]},
                                                      {"role": "tool", "tool_call_id": "abcDEF123", "content": "r"}],
                                         "tools": TOOLS}, "an assistant message with content and a call")
    case("parallel_results_missing", {"messages": [*USER, {"role": "assistant", "tool_calls": [
        ok_call, {**ok_call, "id": "zyxWVU987"}]}, {"role": "tool", "tool_call_id": "abcDEF123", "content": "r"}],
        "tools": TOOLS}, "two calls, one result")
    case("token_offsets", {"messages": USER, "return_token_offsets": True}, "return_token_offsets: none here")
    case("logit_bias_stop_ids", {"messages": USER, "logit_bias": {"22177": 5}, "stop_token_ids": [4],
                                 "min_tokens": 2, "ignore_eos": True}, "logit_bias, stop_token_ids, min_tokens")


def completion_cases(rec: Recorder, key: str) -> None:
    def case(name: str, body: dict, description: str) -> None:
        rec.call(f"completion_{name}", key, "/v1/completions/render", {"model": MODEL, **body}, description)

    case("text", {"prompt": "Hello world, 東京!"}, "a text prompt (BOS added)")
    case("no_special", {"prompt": "Hello world", "add_special_tokens": False}, "add_special_tokens false")
    case("list", {"prompt": ["a b", "c"]}, "two text prompts")
    case("ids", {"prompt": [1, 22177, 4]}, "a token-id prompt")
    case("truncate", {"prompt": "one two three four five six seven", "truncate_prompt_tokens": 3},
         "truncate_prompt_tokens 3")
    case("special_text", {"prompt": "[INST] hi [/INST]"}, "control-token text in a prompt is plain text")
    case("token_offsets", {"prompt": "Hi there", "return_token_offsets": True}, "return_token_offsets: none here")


def output_ids(tok):
    """ids(*pieces, end=True): text pieces encoded (no BOS), ids as they are, then EOS unless end=False."""
    def ids(*pieces: int | str, end: bool = True) -> list[int]:
        out: list[int] = []
        for p in pieces:
            out += [p] if isinstance(p, int) else tok.encode(p, bos=False, eos=False)
        return out + ([tok.eos_id] if end else [])
    return ids


def tekken():
    """The oracle model's own tokenizer, through mistral-common (the ids the engine would produce)."""
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    return MistralTokenizer.from_file(str(MODELS_DIR / MODEL / TOKENIZER_FILE)).instruct_tokenizer.tokenizer


def other_api_cases(rec: Recorder, key: str) -> None:
    """The Anthropic Messages and Responses render routes in this mode."""
    tool = {"name": "get_weather", "description": "Weather.", "input_schema": {
        "type": "object", "properties": {"city": {"type": "string"}}}}
    rec.call("messages_plain", key, "/v1/messages/render", {"model": MODEL, "max_tokens": 20, "messages": USER},
             "Messages API: one user message")
    rec.call("messages_tools", key, "/v1/messages/render", {
        "model": MODEL, "max_tokens": 20, "system": "Be brief.", "messages": USER, "tools": [tool]},
        "Messages API: system and a tool")
    rec.call("responses_plain", key, "/v1/responses/render", {"model": MODEL, "input": "Hello"},
             "Responses API: a string input")
    rec.call("responses_tools", key, "/v1/responses/render", {
        "model": MODEL, "instructions": "Be brief.", "input": USER, "tools": [
            {"type": "function", "name": "get_weather", "parameters": tool["input_schema"]}]},
        "Responses API: instructions and a function tool")


def tokenize_cases(rec: Recorder, key: str) -> None:
    def case(name: str, path: str, body: dict, description: str) -> None:
        rec.call(name, key, path, {"model": MODEL, **body}, description)

    case("tokenize_prompt", "/tokenize", {"prompt": "Hi 🗼 [INST]", "return_token_strs": True},
         "a prompt: BOS added, token strings (a partial character shows U+FFFD)")
    case("tokenize_no_special", "/tokenize", {"prompt": "Hi", "add_special_tokens": False}, "without BOS")
    case("tokenize_chat", "/tokenize", {"messages": USER, "tools": TOOLS, "return_token_strs": True},
         "a chat with tools: mistral-common's prompt")
    case("tokenize_chat_refused", "/tokenize", {"messages": [*USER, {"role": "tool", "tool_call_id": "abcDEF123",
                                                                      "content": "r"}]},
         "a chat mistral-common refuses")
    case("detokenize", "/detokenize", {"tokens": [1, 3, 1240, 1159, 9, 22177, 2]},
         "control tokens kept, two bytes of a character as one U+FFFD")


def completion_derender_cases(rec: Recorder, key: str) -> None:
    """/v1/completions/derender: no parser, so skip_special_tokens is the request's (default true),
    the mode's byte-joining path."""
    tok = tekken()
    enc = lambda text: tok.encode(text, bos=False, eos=False)  # noqa: E731
    inst, tool_calls, eos = tok.get_special_token("[INST]"), tok.get_special_token("[TOOL_CALLS]"), tok.eos_id
    prompt = tok.encode("Tokyo is", bos=True, eos=False)
    outputs = [
        ("bytes", enc(" 🗼🌞 and 東京") + [eos], "stop", {}, "characters over byte tokens, skipping special tokens"),
        ("bytes_no_skip", enc(" 🗼🌞 and 東京") + [eos], "stop", {"skip_special_tokens": False},
         "the same without skip_special_tokens: each byte piece U+FFFD"),
        ("controls", enc(" a") + [inst, tool_calls] + enc(" b") + [eos], "stop", {},
         "[INST] dropped, [TOOL_CALLS] kept"),
        ("controls_no_skip", enc(" a") + [inst, tool_calls] + enc(" b") + [eos], "stop",
         {"skip_special_tokens": False}, "the same without skip_special_tokens"),
        ("cut_mid_character", enc(" ok 🗼")[:-2], "length", {}, "cut inside a character"),
    ]
    for name, ids, finish, extra, description in outputs:
        choice = {"index": 0, "finish_reason": finish, "stop_reason": eos if finish == "stop" else None,
                  "token_ids": ids}
        body = {"model": MODEL, "generate_responses": [{"request_id": "generate-tokens-cmpl-m1",
                                                        "output_mode": "tokens", "choices": [choice]}],
                "prompt_tokens": [len(prompt)], "prompt_token_ids": [prompt],
                "completion_request": {"model": MODEL, "prompt": "Tokyo is", **extra}}
        rec.call(f"completion_derender_{name}", key, "/v1/completions/derender", body, description)


def derender_cases(rec: Recorder, key: str = "mistral-tekken", flags: list[str] | None = None,
                   family: type[Family] = Family) -> None:
    """Decoding in this mode, in parsers_*.json's form (Family: non-streaming, 1 and 5 tokens per call)."""
    tok = tekken()
    eos = tok.eos_id
    inst, inst_end, tool_calls = (tok.get_special_token(t) for t in ("[INST]", "[/INST]", "[TOOL_CALLS]"))

    ids = output_ids(tok)

    f = family(rec, key, PORT, MODEL, flags or ["--served-model-name tiny-mistral", *FLAGS],
               None, eos)  # type: ignore[arg-type]
    emoji = tok.encode("🗼🌞", bos=False, eos=False)
    call = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    tools = {"messages": USER, "tools": TOOLS}
    scenarios = [
        ("content", {"messages": USER}, ids("It is sunny."), "plain content ended by EOS"),
        ("control_tokens_skipped", {"messages": USER}, ids("A", inst, "B", inst_end, "C"),
         "[INST] / [/INST] in the output: dropped"),
        ("control_tokens_not_skipped", {"messages": USER, "skip_special_tokens": False},
         ids("A", inst, "B", inst_end, "C"), "skip_special_tokens false: Mistral's decode drops them still"),
        ("tool_calls_token_kept", {"messages": USER}, ids("x", tool_calls, "y"),
         "[TOOL_CALLS] stays in the text when skipping special tokens (no tools: content)"),
        ("tool_call", tools, ids(tool_calls, call), "a call ([TOOL_CALLS] then the JSON list)"),
        ("tool_calls_choice_none", {**tools, "tool_choice": "none"}, ids(tool_calls, call),
         "a call under tool_choice none: content, marker included"),
        ("tool_choice_named", {**tools, "tool_choice": NAMED}, ids(call), "a named tool: a bare JSON list"),
        ("byte_split_characters", {"messages": USER}, ids("Tokyo ", *emoji, " ok"),
         f"emoji over byte tokens {emoji}"),
        ("byte_then_control", {"messages": USER, "skip_special_tokens": False},
         ids("a", *emoji[:1], inst, *emoji[1:], "b"), "a control token between the bytes of a character"),
    ]
    for name, req, out, description in scenarios:
        f.scenario(f"derender_{name}", req, "", description, ids=out)
    f.scenario("derender_length_mid_character", {"messages": USER}, "", "cut inside a character",
               finish="length", ids=ids("ok ", *emoji[:1], end=False))
    f.scenario("derender_logprobs", {"messages": USER, "logprobs": True, "top_logprobs": 2}, "",
               "logprob token texts of this mode", ids=ids("Tokyo ", *emoji[:2]), logprobs=True)


def reasoning_cases() -> None:
    """The same server with `--reasoning-parser mistral` too (a v3 Tekken has no [THINK]: no reasoning)."""
    rec = Recorder("render_mistral_mode_reasoning", "vLLM 0.33 in --tokenizer-mode mistral with the mistral "
                   "tool and reasoning parsers on tiny-mistral (Tekken v3, no [THINK] token)", SCRIPT)
    flags = ["--served-model-name tiny-mistral", *FLAGS, "--reasoning-parser mistral"]
    key = rec.server("mistral-tekken-reasoning", PORT, MODEL, flags)
    for name, body, description in [
            ("user_only", {"messages": USER}, "one user message"),
            ("tools_auto", {"messages": USER, "tools": TOOLS}, "tools"),
            ("tool_choice_none", {"messages": USER, "tools": TOOLS, "tool_choice": "none"}, "tool_choice none"),
            ("tool_choice_required", {"messages": USER, "tools": TOOLS, "tool_choice": "required"}, "required"),
            ("effort_high", {"messages": USER, "reasoning_effort": "high"}, "reasoning_effort high"),
            ("include_reasoning_false", {"messages": USER, "include_reasoning": False}, "include_reasoning false")]:
        rec.call(name, key, RENDER, {"model": MODEL, **body}, description)
    derender_cases(rec, key="mistral-tekken-reasoning", flags=flags)
    rec.write()


class PromptFamily(Family):
    """A Family whose prompts come from a render that always succeeds: from v11 vLLM 0.33 refuses
    most chat renders (its grammar call), but the prompt does not depend on tool_choice or the
    response format, so the request is rendered with tool_choice none and a json_object format."""

    def prompt(self, req: dict) -> list[int]:
        return super().prompt({**req, "tool_choice": "none", "response_format": {"type": "json_object"}})


def grammar_cases(rec: Recorder, key: str) -> None:
    """Tekken v11+: the mistral parser's adjust_request builds mistral-common's grammar (or fails to)."""
    def case(name: str, body: dict, description: str) -> None:
        rec.call(f"grammar_{name}", key, RENDER, {"model": MODEL, **body}, description)

    schema = {"name": "w", "schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    none = {"messages": USER, "tools": TOOLS, "tool_choice": "none"}
    case("none_json_object", {**none, "response_format": {"type": "json_object"}},
         "tool_choice none with a json_object format: the JSON-only grammar")
    case("none_json_schema", {**none, "response_format": {"type": "json_schema", "json_schema": schema}},
         "tool_choice none with a json_schema format")
    case("none_json_schema_no_schema", {**none, "response_format": {"type": "json_schema",
                                                                    "json_schema": {"name": "w"}}},
         "a json_schema format without its schema")
    case("none_no_tools_json_object", {"messages": USER, "tool_choice": "none",
                                       "response_format": {"type": "json_object"}}, "none, no tools, json_object")
    case("none_structured_json", {**none, "structured_outputs": {"json": {"type": "array"}}},
         "structured_outputs.json under tool_choice none")
    case("none_structured_json_string", {**none, "structured_outputs": {"json": '{"type": "string"}'}},
         "structured_outputs.json as a string")
    case("none_structured_json_object", {**none, "structured_outputs": {"json_object": True}},
         "structured_outputs.json_object")
    case("none_text_format", {**none, "response_format": {"type": "text"}}, "a text format: no schema")
    case("none_no_format", none, "tool_choice none, no format")
    case("auto_json_object", {"messages": USER, "tools": TOOLS, "response_format": {"type": "json_object"}},
         "auto with a json_object format")
    case("no_tools_plain", {"messages": USER}, "no tools at all")
    case("structured_regex", {"messages": USER, "tools": TOOLS, "structured_outputs": {"regex": "a+"}},
         "a regex constraint: vLLM's pre-v11 path (no grammar)")
    case("structured_choice_none", {**none, "structured_outputs": {"choice": ["a", "b"]}},
         "a choice constraint under tool_choice none")
    case("structured_grammar_required", {"messages": USER, "tools": TOOLS, "tool_choice": "required",
                                         "structured_outputs": {"grammar": "start: \"a\""}},
         "a grammar constraint with tool_choice required")
    case("structural_tag_format", {"messages": USER, "tools": TOOLS, "response_format": {
        "type": "structural_tag", "structures": [{"begin": "<a>", "schema": {}, "end": "</a>"}],
        "triggers": ["<a>"]}}, "a structural_tag format: the pre-v11 path")
    case("structured_whitespace", {**none, "structured_outputs": {"json_object": True,
                                                                   "whitespace_pattern": " "}},
         "whitespace_pattern set: the pre-v11 path")
    case("required_json_object", {"messages": USER, "tools": TOOLS, "tool_choice": "required",
                                  "response_format": {"type": "json_object"}}, "required with json_object")
    case("named_unknown", {"messages": USER, "tools": TOOLS, "tool_choice": {
        "type": "function", "function": {"name": "nope"}}}, "a named tool that is not in tools")
    case("none_json_object_include_reasoning_false", {**none, "response_format": {"type": "json_object"},
                                                       "include_reasoning": False}, "include_reasoning false")
    case("none_json_object_history", {"messages": HISTORY, "tools": TOOLS, "tool_choice": "none",
                                      "response_format": {"type": "json_object"}}, "a tool-call history")
    case("none_json_object_refused", {"messages": [*USER, {"role": "tool", "tool_call_id": "abcDEF123",
                                                           "content": "r"}], "tool_choice": "none",
                                      "response_format": {"type": "json_object"}},
         "a chat mistral-common refuses: its error comes first")


def newer_derender_cases(rec: Recorder, key: str, flags: list[str]) -> None:
    """v11+ output: `[TOOL_CALLS]name[ARGS]{...}`, and reasoning (`[THINK]` from v13, `<think>` text in v11)."""
    tok = tekken()
    eos = tok.eos_id
    special = {t: tok.get_special_token(t) for t in ("[TOOL_CALLS]", "[ARGS]", "[INST]")
               if tok.is_special(t)}
    for t in ("[THINK]", "[/THINK]"):
        if tok.is_special(t):
            special[t] = tok.get_special_token(t)
    tc, args = special["[TOOL_CALLS]"], special["[ARGS]"]

    ids = output_ids(tok)

    f = PromptFamily(rec, key, PORT, MODEL, flags, None, eos)  # type: ignore[arg-type]
    tools = {"messages": USER, "tools": TOOLS}
    weather = '{"city": "Paris"}'
    scenarios = [
        ("v11_call", tools, ids(tc, "get_weather", args, weather), "[TOOL_CALLS]name[ARGS]{...}"),
        ("v11_two_calls", tools, ids(tc, "get_weather", args, weather, tc, "get_time", args, '{"tz": "UTC"}'),
         "two calls, each after its own [TOOL_CALLS]"),
        ("v11_name_brace", tools, ids(tc, "get_weather", weather), "no [ARGS]: name{...}"),
        ("v11_content_then_call", tools, ids("Let me check. ", tc, "get_weather", args, weather),
         "content before the call"),
        ("v11_trailing_text", tools, ids(tc, "get_weather", args, weather, " thanks"),
         "text after the arguments' JSON"),
        ("v11_args_not_json", tools, ids(tc, "get_weather", args, "city=Paris"), "arguments that are not JSON"),
        ("v11_choice_none", {**tools, "tool_choice": "none"}, ids(tc, "get_weather", args, weather),
         "a call under tool_choice none"),
        ("v11_no_tools", {"messages": USER}, ids(tc, "get_weather", args, weather), "a call without tools"),
        ("v11_named", {**tools, "tool_choice": NAMED}, ids(tc, "get_weather", args, weather), "a named tool"),
        ("v11_required", {**tools, "tool_choice": "required"}, ids(tc, "get_time", args, '{"tz": "UTC"}'),
         "tool_choice required"),
        ("v11_skip_false", {**tools, "skip_special_tokens": False}, ids("A", special["[INST]"], "B "),
         "skip_special_tokens false with tools"),
        ("v11_think_text", tools, ids("<think>Hmm.</think>It is sunny."), "plain-text <think> markup"),
        ("v11_think_text_then_call", tools, ids("<think>Hmm.</think>", tc, "get_weather", args, weather),
         "plain-text <think> then a call"),
    ]
    if "[THINK]" in special:
        th, the = special["[THINK]"], special["[/THINK]"]
        scenarios += [
            ("v13_think", {"messages": USER}, ids(th, "Let me think. ", the, "It is sunny."), "[THINK]...[/THINK]"),
            ("v13_think_tools", tools, ids(th, "Hmm.", the, tc, "get_weather", args, weather),
             "reasoning then a call"),
            ("v13_think_into_call", tools, ids(th, "Hmm.", tc, "get_weather", args, weather),
             "[TOOL_CALLS] ends the reasoning"),
            ("v13_content_think", {"messages": USER}, ids("Hi ", th, "x", the, " there"), "content, then reasoning"),
            ("v13_think_no_end", {"messages": USER}, ids(th, "Still thinking"), "reasoning never ended"),
            ("v13_no_reasoning", {"messages": USER, "include_reasoning": False},
             ids(th, "Hmm.", the, "Answer."), "include_reasoning false"),
            ("v13_skip_false", {"messages": USER, "skip_special_tokens": False}, ids(th, "Hmm.", the, "Answer."),
             "skip_special_tokens false"),
            ("v13_think_only_markers", {"messages": USER}, ids(the, "Answer."), "a stray [/THINK]"),
        ]
    for name, req, out, description in scenarios:
        f.scenario(f"derender_{name}", req, "", description, ids=out)
    f.scenario("derender_v11_call_length", tools, "", "a call cut by length", finish="length",
               ids=ids(tc, "get_weather", args, '{"city": "Pa', end=False))


def sentencepiece_derender_cases(rec: Recorder, key: str, flags: list[str]) -> None:
    """SentencePiece: pieces with U+2581 for spaces, byte-fallback pieces, windows decoded by
    SentencePiece (which drops a window's first leading space)."""
    tok = tekken()
    eos = tok.eos_id
    tc, inst = tok.get_special_token("[TOOL_CALLS]"), tok.get_special_token("[INST]")

    ids = output_ids(tok)

    f = Family(rec, key, PORT, MODEL, flags, None, eos)  # type: ignore[arg-type]
    tools = {"messages": USER, "tools": TOOLS}
    calls = '[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}]'
    scenarios = [
        ("sp_spaces", {"messages": USER}, ids("Hello  world\n\n  indented   end"), "runs of spaces and newlines"),
        ("sp_unicode", {"messages": USER}, ids("東京 🗼 naïve — ok"), "byte-fallback pieces"),
        ("sp_control_mid_word", {"messages": USER, "skip_special_tokens": False}, ids("Hel", inst, "lo there"),
         "[INST] inside a word, special tokens kept"),
        ("sp_call_after_space", tools, ids(tc, " " + calls), "[TOOL_CALLS] then a space and two calls"),
        ("sp_content_then_call", tools, ids("Sure thing.", tc, calls), "content, then calls"),
        ("sp_required", {**tools, "tool_choice": "required"}, ids(calls), "required: a bare JSON list"),
    ]
    for name, req, out, description in scenarios:
        f.scenario(f"derender_{name}", req, "", description, ids=out)
    f.scenario("derender_sp_logprobs", {"messages": USER, "logprobs": True, "top_logprobs": 2}, "",
               "logprob token texts (pieces)", ids=ids(" Tokyo 東京 ok"), logprobs=True)


def newer_variant(variant: str) -> None:
    """Tekken v11 / v13 or SentencePiece v7: the same case families as for Tekken v3 (into its own fixture)."""
    global MODEL, PORT, TOKENIZER_FILE
    MODEL, PORT, TOKENIZER_FILE, extra, topic, key, about = VARIANTS[variant]
    flags = [f"--served-model-name {MODEL}", *FLAGS, *extra]
    rec = Recorder(topic, f"vLLM 0.33 in --tokenizer-mode mistral on {MODEL} ({about}): chat and completion "
                   "render, /tokenize, Messages and Responses render, and derender of the mode's decoding", SCRIPT)
    key = rec.server(key, PORT, MODEL, flags)
    render_cases(rec, key)
    completion_cases(rec, key)
    tokenize_cases(rec, key)
    other_api_cases(rec, key)
    completion_derender_cases(rec, key)
    if TOKENIZER_FILE == "tekken.json":
        grammar_cases(rec, key)
        derender_cases(rec, key=key, flags=flags, family=PromptFamily)
        newer_derender_cases(rec, key, flags)
    else:
        derender_cases(rec, key=key, flags=flags)
        sentencepiece_derender_cases(rec, key, flags)
    rec.write()


def main() -> None:
    if sys.argv[1:] == ["reasoning"]:
        reasoning_cases()
        return
    if sys.argv[1:2] and sys.argv[1] in VARIANTS:
        newer_variant(sys.argv[1])
        return
    rec = Recorder("render_mistral_mode", "vLLM 0.33 in --tokenizer-mode mistral on tiny-mistral "
                   "(mistral-common's tekken_240911.json, Tekken v3): chat and completion render, and chat "
                   "derender of the mode's decoding", SCRIPT)
    key = rec.server("mistral-tekken", PORT, MODEL, ["--served-model-name tiny-mistral", *FLAGS])
    render_cases(rec, key)
    completion_cases(rec, key)
    tokenize_cases(rec, key)
    other_api_cases(rec, key)
    completion_derender_cases(rec, key)
    derender_cases(rec)
    rec.write()


if __name__ == "__main__":
    main()
