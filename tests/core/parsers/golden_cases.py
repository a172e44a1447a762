"""The inputs of the recorded parser golden cases (what `vllm_oracle.py` was run on).

    python tests/core/parsers/golden_cases.py > /tmp/cases.json
    ORACLE_TOKENIZERS='{"qwen3": "...", "llama3": "...", "deepseek": "..."}' \\
        $ORACLE_DIR/venv033/bin/python tests/core/parsers/vllm_oracle.py /tmp/cases.json \\
        tests/core/parsers/golden/vllm033.json
"""

from __future__ import annotations

import json

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"}, "days": {"type": "integer"},
                                               "metric": {"type": "boolean"}}}}}
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "number"},
                                     "filters": {"type": "object"}, "tags": {"type": "array"}}}}}
TOOLS = [WEATHER, SEARCH]


def hermes_call(name: str, args_json: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args_json}}}\n</tool_call>'


CALL_PARIS = hermes_call("get_weather", '{"city": "Paris", "days": 3}')
CALL_UNICODE = hermes_call("search", '{"query": "天气 ☀️ \\u00e9t\\u00e9 \\"quoted\\" {not: a brace}", "limit": 2.50, '
                                     '"filters": {"a": [1, {"b": null}], "c": true}, "tags": []}')
CALL_COMPACT = '<tool_call>{"arguments":{"city":"Berlin","metric":false},"name":"get_weather"}</tool_call>'

# (text, extra request fields, chat_template_kwargs, prompt_text)
HERMES_QWEN3_TEXTS = [
    "<think>\nLet me think.\n</think>\n\nThe answer is 4.",
    "<think>\nNeed weather.\n</think>\n\n" + CALL_PARIS,
    "<think>\nTwo calls.\n</think>\n\nSure, checking." + CALL_PARIS + "\n" + CALL_UNICODE,
    "<think>\nr\n</think>\n\n" + CALL_COMPACT,
    "<think>\nr\n</think>\n\nBefore " + CALL_PARIS + " after text is dropped",
    "<think>\nbad json\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {city: Paris}}\n</tool_call>",
    "<think>\ntruncated\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
    "<think>\ntruncated early\n</think>\n\n<tool_call>\n{\"na",
    "<think>\nunclosed but complete\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}",
    "<think>\nimplicit end by a call" + CALL_PARIS,
    "<think>\nnever closed reasoning",
    "no tags at all, all reasoning",
    "<think></think>Just content",
    "<think>\nr\n</think>\n\n   \n",
    "<think>\nr\n</think>c</think>d<|im_end|>",
    "<think>\nr\n</think>\n\n" + hermes_call("get_weather", '"a string argument"'),
    "<think>\nr\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\"}\n</tool_call>",
    "<think>\nr\n</think>\n\n<tool_call>\n{\"name\": 7, \"arguments\": {}}\n</tool_call>",
    "<think>\nr\n</think>\n\n" + CALL_PARIS + "\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": 1e400, \"limit\": -0}}\n</tool_call>",
    "<think>\nr\n</think>\n\n<tool_call>\n[1, 2]\n</tool_call>",
    "<think>\nr\n</think>\n\nI wrote <tool_call without closing the tag",
    "<think>\nr\n</think>\n\n" + hermes_call("search", '{"query": "a </tool_call> inside"}'),
]


def cases() -> list[dict]:
    out: list[dict] = []

    def add(tokenizer, reasoning, tool, text, request=None, kwargs=None, prompt_text=None, tag="", auto=True):
        case = {"tokenizer": tokenizer, "reasoning_parser": reasoning, "tool_parser": tool, "text": text,
                "request": request or {}, "chat_template_kwargs": kwargs or {}, "tag": tag}
        if not auto:
            case["enable_auto_tools"] = False
        if prompt_text is not None:
            case["prompt_text"] = prompt_text
        out.append(case)

    auto = {"tools": TOOLS}
    for text in HERMES_QWEN3_TEXTS:
        add("qwen3", "qwen3", "hermes", text, auto, tag="hermes+qwen3")
    # request semantics
    both = "<think>\nr\n</think>\n\nHi " + CALL_PARIS + CALL_UNICODE
    add("qwen3", "qwen3", "hermes", both, {"tools": TOOLS, "parallel_tool_calls": False}, tag="parallel false")
    add("qwen3", "qwen3", "hermes", both, {"tools": TOOLS, "include_reasoning": False}, tag="include_reasoning false")
    add("qwen3", "qwen3", "hermes", both, {"tools": TOOLS, "tool_choice": "none"}, tag="tool_choice none")
    add("qwen3", "qwen3", "hermes", both, {}, tag="no tools")
    named = {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    add("qwen3", "qwen3", "hermes", '<think>\nr\n</think>\n\n{"city": "Paris",  "days": 3}', named, tag="named")
    add("qwen3", "qwen3", "hermes", "<think>\nr\n</think>\n\n  ", named, tag="named whitespace")
    req = {"tools": TOOLS, "tool_choice": "required"}
    add("qwen3", "qwen3", "hermes", '<think>\nr\n</think>\n\n[{"name": "get_weather", "parameters": {"city": "Rome"}}, '
        '{"name":"search","parameters":{"query":"x","filters":{"k":[1,2]}}}]', req, tag="required")
    add("qwen3", "qwen3", "hermes", '<think>\nr\n</think>\n\n[{"name": "get_weather"}]', req, tag="required no parameters")
    add("qwen3", "qwen3", "hermes", '<think>\nr\n</think>\n\nnot json', req, tag="required invalid")
    # qwen3 reasoning rules
    for text in ["<think>a<think>b</think>c", "r<|im_end|>more</think>c", "<think>r</think>c<think>x",
                 "<think>\n\n</think>\n\nx", "plain"]:
        add("qwen3", "qwen3", None, text, tag="qwen3")
    for text in ["<think>r" + CALL_PARIS + " tail", "<think>r</think>c" + CALL_PARIS]:
        add("qwen3", "qwen3", None, text, tag="qwen3 without tool parser")
        add("qwen3", "qwen3", "hermes", text, auto, auto=False, tag="qwen3 hermes without auto tool choice")
    for text in ["<think>a</think>b", "c</think>d<|im_end|>", ""]:
        add("qwen3", "qwen3", "hermes", text, auto, {"enable_thinking": False}, tag="thinking off")
    closed = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    opened = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    add("qwen3", "qwen3", "hermes", "Answer</think> more", auto, prompt_text=closed, tag="prompt closed")
    add("qwen3", "qwen3", "hermes", "Reasoning</think> answer", auto, prompt_text=opened, tag="prompt open")
    add("qwen3", "qwen3", "hermes", "<think>x</think>" + CALL_PARIS, auto, prompt_text=closed, tag="prompt closed call")
    # deepseek_r1 with the Qwen3 tokenizer (same tags) and with hermes
    for text in ["<think>\nr\n</think>\n\ncontent", "pre-opened reasoning</think>\n\nanswer", "only reasoning",
                 "abc<think>def</think>ghi", "r</think>a</think>b", "<think></think>", ""]:
        add("qwen3", "deepseek_r1", None, text, tag="deepseek_r1")
    add("qwen3", "deepseek_r1", "hermes", "Thinking</think>\n\n" + CALL_PARIS, auto, tag="deepseek_r1+hermes")
    add("qwen3", None, "hermes", "Plain " + CALL_UNICODE, auto, tag="hermes alone")
    add("qwen3", None, "qwen3_json", CALL_PARIS, auto, tag="qwen3_json")
    # render side: structural tags (text irrelevant)
    strict = [{"type": "function", "function": {**WEATHER["function"], "strict": True}}, SEARCH]
    for request in ({"tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": False},
                    {"tools": strict, "tool_choice": "auto"},
                    {"tools": strict, "tool_choice": "auto", "response_format": {"type": "json_object"}},
                    {"tools": TOOLS, "tool_choice": "auto", "response_format": {"type": "json_object"}},
                    {"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}},
                    {"tools": strict, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                     "parallel_tool_calls": False},
                    {"tools": TOOLS, "tool_choice": "none"}):
        add("qwen3", "qwen3", "hermes", "x", request, tag="adjust")
    # deepseek_v3 reasoning on DeepSeek's own tokenizer
    for kwargs in ({}, {"thinking": True}):
        for text in ["<think>r</think>c", "r</think>c", "c"]:
            add("deepseek", "deepseek_v3", None, text, kwargs=kwargs, tag="deepseek_v3")
    # llama3_json / llama4_json (Llama-3 tokenizer)
    for text in ['{"name": "get_weather", "parameters": {"city": "Paris"}}',
                 '<|python_tag|>{"name": "search", "arguments": {"query": "q"}}; {"name": "get_weather", "parameters": {}}',
                 '  {"name": "get_weather", "parameters": {"city": "Nice"}, "arguments": {"city": "Lyon"}}',
                 '[{"name": "get_weather", "parameters": {"city": "Rome"}}]', "Hello {x}", "<|python_tag|>",
                 '{"name": "get_weather", "parameters": {"city": "Par', '{"name": "get_weather"}', "   "]:
        add("llama3", None, "llama3_json", text, auto, tag="llama3_json")
    add("llama3", None, "llama4_json", '{"name": "get_weather", "parameters": {"days": 2}}', auto, tag="llama4_json")
    for request in ({"tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": False},
                    {"tools": TOOLS, "tool_choice": "required"},
                    {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "search"}}},
                    {"tools": strict, "tool_choice": "auto"}):
        add("llama3", None, "llama3_json", "x", request, tag="adjust")
    # deepseek_v3 / deepseek_v31 tools (DeepSeek tokenizer)
    b, e, cb, ce, sep = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
    v3 = cb + "function" + sep + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + ce
    v3b = cb + "function" + sep + "search\n```json\n{\n  \"query\": \"多行\"\n}\n```" + ce
    for text in ["Sure." + b + v3 + "\n" + v3b + e + " after", b + v3 + e, "no calls", b + cb + "function" + sep + "get_weather\n```json\n{\"ci",
                 b + cb + "other" + sep + "x\n```json\n{}\n```" + ce + e, b + e, "text" + b + v3]:
        add("deepseek", None, "deepseek_v3", text, auto, tag="deepseek_v3 tools")
    add("deepseek", "deepseek_v3", "deepseek_v3", "<think>r</think>ok" + b + v3 + e, auto, {"thinking": True},
        tag="deepseek_v3 both")
    v31 = cb + "get_weather" + sep + "{\"city\": \"Paris\"}" + ce
    v31b = cb + "search" + sep + "{\n\"query\": \"q\"\n}" + ce
    for text in ["Sure." + b + v31 + v31b + e + " after", b + v31 + e, "plain", b + cb + "get_weather" + sep + "{\"ci",
                 b + cb + "bad\nname" + sep + "{}" + ce + e]:
        add("deepseek", None, "deepseek_v31", text, auto, tag="deepseek_v31 tools")
    add("deepseek", "deepseek_r1", "deepseek_v31", "r</think>" + b + v31 + e, auto, tag="deepseek_v31+r1")
    for parser in ("deepseek_v3", "deepseek_v31"):
        for request in ({"tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": False},
                        {"tools": TOOLS, "tool_choice": "required"},
                        {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "search"}}}):
            add("deepseek", None, parser, "x", request, tag="adjust")
    # qwen3_xml / qwen3_coder (Qwen3 tokenizer), schema coercion
    xml_tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}, "ratio": {"type": "number"},
        "opts": {"type": "object"}, "tags": {"type": "array"}, "maybe": {"type": ["string", "null"]},
        "unit": {"enum": ["c", "f"]}, "any": {}}}}},
        {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}]

    def xml(name, params):
        body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params)
        return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"
    full = xml("get_weather", [("city", "Paris"), ("days", "3"), ("metric", "true"), ("ratio", "1.50"), ("opts", '{"a": 1}'),
                               ("tags", "[1, 2]"), ("maybe", "null"), ("unit", "c"), ("any", "[1]")])
    xml_texts = [
        full, "Hello " + xml("get_weather", [("city", "Paris")]) + " after",
        xml("get_weather", [("city", "Paris")]) + "\n" + xml("run", [("code", "print('x')\n\nend \"q\" \\ 天")]),
        "<tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter><parameter=days>x3</parameter></function></tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", "<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>",
        "<tool_call>\n<function=unknown_tool>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
        "  \n" + xml("run", [("code", "x")]),
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
        "plain text no calls", "\n\nplain  ", "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n\n\nx\n\n\n</parameter>\n</function>\n</tool_call>",
        "text <tool_call>\n{\"name\": \"get_weather\"}\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=days>\n3.5\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n<parameter=city>\n42\n</parameter>\n</function>\n</tool_call>",
        "Hi \n" + xml("get_weather", [("city", "Paris")]), "A" + full + " mid " + full + " end", "<tool_call>\n<function=get_wea",
        "<tool_call>\n<function= get_weather >\n<parameter= city >\nx\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nx\n</parameter>\n</tool_call>", "x</think>y" + full, "<think>x</think>y",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\na\n</parameter>\n<parameter=city>\nb\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n<parameter=city>\nP",
        "<tool_call>\n<function=get_weather>\nstray<parameter=city>\nx > y < z\n</parameter>\n</function>\n</tool_call>",
        "x<|im_end|>y", "a<tool_call>b", "a <tool_call>b",
        "<tool_call>\n<function=get_weather>\n<parameter=days>\nseven\n</parameter>\n<parameter=opts>\n{bad\n</parameter>\n</function>\n</tool_call>",
    ]
    for text in xml_texts:
        add("qwen3", None, "qwen3_xml", text, {"tools": xml_tools}, tag="qwen3_xml")
    add("qwen3", None, "qwen3_coder", full, {"tools": xml_tools}, tag="qwen3_coder")
    add("qwen3", None, "qwen3_xml", full, {}, tag="qwen3_xml no tools")
    for text in ["<think>r</think>\n\n" + full, "<think>r" + full, "<think>r</think>c</think>d", "<think>r</think>x<|im_end|>y",
                 "<think>r</think>\n\nAnswer \n"]:
        add("qwen3", "qwen3", "qwen3_xml", text, {"tools": xml_tools}, tag="qwen3_xml+qwen3")
    add("qwen3", "deepseek_r1", "qwen3_xml", "r</think>c</think>d" + full, {"tools": xml_tools}, tag="qwen3_xml+r1")
    for request in ({"tools": xml_tools, "tool_choice": "auto", "parallel_tool_calls": False},
                    {"tools": xml_tools, "tool_choice": "required"},
                    {"tools": xml_tools, "tool_choice": {"type": "function", "function": {"name": "run"}}}):
        add("qwen3", None, "qwen3_xml", "x", request, tag="adjust")
    # granite (text markers; the Qwen3 tokenizer is fine for plain text)
    for text in ["Here is my thought process: a. Here is my response: b.", "Here's my thought process:\nx\nHere's my response:",
                 "pre Here is my thought process: a Here is my response: b", "Here is my thought process: unanswered",
                 "plain", "Here is my response: only"]:
        add("qwen3", "granite", None, text, tag="granite")
    # glm45 (Qwen3 tokenizer: <tool_call>/<think> are single tokens, <arg_key>/<arg_value> plain text)
    glm_tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "opts": {"type": "object"}}}}}]
    gc = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n"
          "<arg_value>3</arg_value>\n</tool_call>")
    for text in ["<think>r \n</think>  Hi \n" + gc + " after " + gc + " end",
                 "<think>r</think><tool_call>unknown_fn\n<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
                 "<think>r</think><tool_call>get_weather</tool_call>",
                 "<think>r</think><tool_call> get_weather <arg_key> city </arg_key>  <arg_value>\nx \"q\"\n</arg_value></tool_call>",
                 "<think>r</think><tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par",
                 "<think>r</think><tool_call>get_weather\n<arg_key>opts</arg_key>\n<arg_value>{\"a\": 1}</arg_value><arg_key>days</arg_key><arg_value>x</arg_value></tool_call>",
                 "<think>r</think>c<think>more</think>d", "<think>r<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>P</arg_value></tool_call>",
                 "r only", "<think>r</think>x</think>y", "<think>r</think><tool_call>get_wea", "<think>r</think>" + gc + "<tool_call>unknown</tool_call>",
                 "<think>r</think>text <tool_call>unknown</tool_call> more", "<think>\nweather tool\n</think>Let me check.\n" + gc]:
        add("qwen3", "glm45", "glm45", text, {"tools": glm_tools}, tag="glm45")
    for text in ["a</think>b<think>c" + gc, "x" + gc]:
        add("qwen3", None, "glm45", text, {"tools": glm_tools}, tag="glm45 tools only")
    for text in ["<think>r </think>c " + gc, "r </think> c", "a<think>b</think>c"]:
        add("qwen3", "glm45", None, text, tag="glm45 reasoning only")
    add("qwen3", "glm45", "glm45", "<think>r</think>c" + gc, {"tools": glm_tools}, {"enable_thinking": False}, tag="glm45 no thinking")
    for request in ({"tools": glm_tools, "tool_choice": "auto", "parallel_tool_calls": False},
                    {"tools": glm_tools, "tool_choice": "required"},
                    {"tools": glm_tools, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}):
        add("qwen3", None, "glm45", "x", request, tag="adjust")
    # pythonic / llama4_pythonic (Llama-3 tokenizer)
    for text in ["[get_weather(city='Paris', days=3)]", "[get_weather(city='Par', metric=True), search(query=\"a [b] (c)\", "
                 "limit=-2.5, filters={'x': [1, None, (2, 3)]}, tags={'t'})]", "[search()]", "[get_weather('Paris', city='x')]",
                 "Sure! [get_weather(city='Paris')]", "[get_weather(city='Paris',,)]", "[1, 2, 3]", "[get_weather(city='Par",
                 "[get_weather(city=null, days=true, x=f'y')]", "[get_weather(city=foo)]", "[]", " [search()]",
                 "[a.b(c=1)]", "[search(query='it\\'s \"q\" 東京')]"]:
        add("llama3", None, "pythonic", text, auto, tag="pythonic")
    add("llama3", None, "llama4_pythonic", "<|python_start|>[search(query='x')]<|python_end|>", auto, tag="llama4_pythonic")
    for request in ({"tools": TOOLS, "tool_choice": "required"}, {"tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": False},
                    {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "search"}}},
                    {"tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": False}):
        add("llama3", None, "pythonic", "x", request, tag="adjust")
    add("llama3", None, "pythonic", '[{"name": "search", "parameters": {"query": "q"}}]', {"tools": TOOLS, "tool_choice": "required"},
        tag="pythonic required")
    add("llama3", None, "pythonic", '{"query": "q"}', {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "search"}}},
        tag="pythonic named")
    # mistral, Hugging Face tokenizer mode (Qwen3 + Mistral's control tokens; see parser_models.with_added_tokens)
    m13 = ["[THINK]r \n[/THINK]  Hi \n[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]search[ARGS] {\"query\":\"q\"} trailing",
           "Hi[TOOL_CALLS]get_weather{\"city\": \"X\"}", "[THINK]r", "[THINK]r[TOOL_CALLS]get_weather[ARGS]{}", "plain",
           "[THINK]a[/THINK]b[/THINK]c", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Pa", "[TOOL_CALLS]unknown[ARGS]{\"a\": 1}",
           "[TOOL_CALLS][ARGS]{\"a\": 1}", "[TOOL_CALLS]get_weather[ARGS]not json ", "  \n[TOOL_CALLS]get_weather[ARGS]{\"city\": \"P\"}",
           "a[THINK]b[/THINK]c", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"P\"} after text", "[TOOL_CALLS]get_weather[ARGS]42 x",
           "[TOOL_CALLS]get_weather", "[THINK]x[THINK]y [/THINK] z"]
    for text in m13:
        add("mistral13", "mistral", "mistral", text, auto, tag="mistral v13")
    for text in m13[:3]:
        add("mistral13", None, "mistral", text, auto, tag="mistral v13 tools only")
    for text in ["[THINK]r[/THINK]c", "c[THINK]r"]:
        add("mistral13", "mistral", None, text, tag="mistral reasoning only")
        add("mistral3", "mistral", None, text, tag="mistral reasoning, no [THINK] token")
    m3 = ['Hi[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "search", "arguments": {"query": "天"}}]',
          '[TOOL_CALLS] [{"name": "get_weather", "arguments": "{\\"a\\": 1}"}] tail', '[TOOL_CALLS]{"name": "get_weather"}',
          '[TOOL_CALLS][1, {"x": 1}]', "[TOOL_CALLS]bad json", "plain", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Pa',
          '[TOOL_CALLS][TOOL_CALLS][{"name": "f"}][TOOL_CALLS]x', '[TOOL_CALLS][{"arguments": 5, "name": 7}, {"arguments": null, "name": "g"}]',
          'Hi [TOOL_CALLS][{"arguments": {"k": [1, 2]}, "name": "search"}]']
    for text in m3:
        add("mistral3", None, "mistral", text, auto, tag="mistral pre-v11")
    bare = '[{"name": "get_weather", "arguments": {"city": "P"}}]'
    add("mistral3", None, "mistral", bare, {"tools": TOOLS, "tool_choice": "required"}, tag="mistral pre-v11 required")
    add("mistral3", None, "mistral", "  " + bare, {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        tag="mistral pre-v11 named")
    add("mistral3", None, "mistral", '[TOOL_CALLS]' + bare, {"tools": TOOLS, "tool_choice": "none"}, tag="mistral pre-v11 none")
    for tok in ("mistral13", "mistral3"):
        for request in ({"tools": TOOLS, "tool_choice": "required"}, {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "search"}}},
                        {"tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": False}, {"tools": TOOLS, "tool_choice": "none"}):
            add(tok, None, "mistral", "x", request, tag="adjust")
    # kimi_k2 (the oracle's tiny-kimi tokenizer)
    sb, se, cb, ab, ce = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                          "<|tool_call_argument_begin|>", "<|tool_call_end|>")
    k0 = cb + "functions.get_weather:0" + ab + '{"city": "Paris",  "days":3}' + ce
    k1 = cb + "functions.search:1" + ab + ' {"query": "天气"} ' + ce
    for text in ["<think>r \n</think>  Hi \n" + sb + k0 + k1 + se + " after", "<think>r</think>" + sb + k0 + se, "r only",
                 "<think>r</think>x</think>y", sb + k0 + se, "<think>r" + sb + k0 + se,
                 "<think>r</think>" + sb + cb + "functions.get_weather:0" + ab + '{"city": "Pa',
                 "<think>r</think>" + sb + cb + "get_weather:3" + ab + "{}" + ce + se,
                 "<think>r</think>" + sb + cb + "functions.get_weather" + ab + "{}" + ce + se,
                 "<think>r</think>" + sb + cb + "functions.unknown:0" + ab + "{bad json" + ce + se,
                 "<think>r</think>" + sb + cb + "functions.get_weather:0" + ab + ce + se,
                 "<think>r</think>  \n" + sb + k0 + se, "<think>r</think>a" + sb + "junk" + k0 + "junk2" + se + "b",
                 "<think>r</think>" + sb + k0 + se + "tail" + sb + k1 + se]:
        add("kimi", "kimi_k2", "kimi_k2", text, auto, tag="kimi_k2")
    for text in ["a</think>b" + sb + k0 + se, "<think>x</think>y"]:
        add("kimi", None, "kimi_k2", text, auto, tag="kimi_k2 tools only")
    for text in ["<think>r </think>c" + sb + k0 + se, "r </think> c"]:
        add("kimi", "kimi_k2", None, text, tag="kimi_k2 reasoning only")
    add("kimi", "kimi_k2", "kimi_k2", "<think>r</think>c" + sb + k0 + se, auto, {"thinking": False}, tag="kimi_k2 no thinking")
    for request in ({"tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": False},
                    {"tools": TOOLS, "tool_choice": "required"},
                    {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "search"}}}):
        add("kimi", None, "kimi_k2", "x", request, tag="adjust")
    # request semantics for every tool family: one reply with reasoning (where the family has it),
    # content and two calls, under each tool_choice / parallel / include_reasoning variant
    two_calls = {
        ("qwen3", "qwen3", "qwen3_xml"): "<think>r</think>Sure." + xml("get_weather", [("city", "Paris")]) + xml("run", [("code", "x")]),
        ("qwen3", "glm45", "glm45"): "<think>r</think>Sure." + gc + gc,
        ("llama3", None, "llama3_json"): '{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "search", "parameters": {"query": "q"}}',
        ("llama3", None, "pythonic"): "[get_weather(city='Paris'), search(query='q')]",
        ("deepseek", "deepseek_r1", "deepseek_v3"): "r</think>Sure." + b + v3 + "\n" + v3b + e,
        ("deepseek", "deepseek_r1", "deepseek_v31"): "r</think>Sure." + b + v31 + v31b + e,
        ("kimi", "kimi_k2", "kimi_k2"): "<think>r</think>Sure." + sb + k0 + k1 + se,
        ("mistral13", "mistral", "mistral"): "[THINK]r[/THINK]Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"P\"}[TOOL_CALLS]search[ARGS]{}",
        ("mistral3", None, "mistral"): 'Sure.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "P"}}, {"name": "search", "arguments": {}}]',
    }
    named = {"type": "function", "function": {"name": "get_weather"}}
    for (tok, reasoning, tool), text in two_calls.items():
        tools = xml_tools if tool == "qwen3_xml" else glm_tools if tool == "glm45" else TOOLS
        for extra in ({"tool_choice": "none"}, {"tool_choice": "required"}, {"tool_choice": named},
                      {"parallel_tool_calls": False}, {"include_reasoning": False}):
            add(tok, reasoning, tool, text, {"tools": tools, **extra}, tag=f"semantics {tool} {sorted(extra)}")
    return out


def extra_cases() -> list[dict]:
    """Cases added after the first recording (`golden/vllm033_special.json`).

    Special-token text inside the output, for every family: vLLM 0.33's engine parsers (qwen3,
    qwen3_xml, glm45, kimi_k2, mistral with `[THINK]`) drop the text of every tokenizer special
    token that is not one of their markers; the classic parsers keep it. And render-side cases:
    `is_reasoning_end` with thinking off, strict tools without parameters, GLM-4.7 tag shapes.

        python tests/core/parsers/golden_cases.py extra > /tmp/extra.json
    """
    out: list[dict] = []

    def add(tokenizer, reasoning, tool, text, request=None, kwargs=None, prompt_text=None, tag=""):
        case = {"tokenizer": tokenizer, "reasoning_parser": reasoning, "tool_parser": tool, "text": text,
                "request": request or {}, "chat_template_kwargs": kwargs or {}, "tag": tag}
        if prompt_text is not None:
            case["prompt_text"] = prompt_text
        out.append(case)

    auto = {"tools": TOOLS}
    eot, box, im_end, im_start = "<|endoftext|>", "<|box_start|>", "<|im_end|>", "<|im_start|>"
    call = hermes_call("get_weather", '{"city": "Pa' + box + 'ris", "days": 3}')
    qwen_texts = [
        "<think>\nr\n</think>\n\nA" + eot + "B",
        "<think>\nr" + box + "s\n</think>\n\nC" + eot,
        "<think>\nr\n</think>\n\n" + call,
        "<think>\nr\n</think>\n\nx" + box + call + eot + im_end,
        eot + "<think>r</think>" + im_start + "c" + "<|vision_pad|><|object_ref_end|>",
        "plain" + box + " text" + eot,
    ]
    combos = [("qwen3", "hermes"), ("qwen3", None), (None, "hermes"), ("deepseek_r1", None), ("deepseek_r1", "hermes"),
              ("qwen3", "qwen3_xml"), (None, "qwen3_json"), ("granite", None)]
    for reasoning, tool in combos:
        for text in qwen_texts:
            add("qwen3", reasoning, tool, text, auto if tool else {}, tag=f"special {reasoning}+{tool}")
    for text in qwen_texts[:3]:
        add("qwen3", "qwen3", "hermes", text, auto, {"enable_thinking": False}, tag="special thinking off")
    xml_call = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nPa" + box + "ris\n</parameter>\n</function>\n"
                "</tool_call>")
    for text in ["<think>r" + eot + "</think>A" + box + xml_call, "A" + eot + xml_call]:
        add("qwen3", "qwen3", "qwen3_xml", text, auto, tag="special qwen3_xml")
        add("qwen3", None, "qwen3_xml", text, auto, tag="special qwen3_xml")
    glm_tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}}}}]
    gc = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Pa" + box + "ris</arg_value>\n</tool_call>"
    for text in ["<think>r" + eot + "</think>A" + box + "B" + gc, "A" + eot + gc + im_end]:
        add("qwen3", "glm45", "glm45", text, {"tools": glm_tools}, tag="special glm45")
        add("qwen3", None, "glm45", text, {"tools": glm_tools}, tag="special glm45")
        add("qwen3", "glm45", None, text, tag="special glm45")
    sb, se, cb, ab, ce = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                          "<|tool_call_argument_begin|>", "<|tool_call_end|>")
    k0 = cb + "functions.get_weather:0" + ab + '{"city": "Pa' + box + 'ris"}' + ce
    for text in ["<think>r" + eot + "</think>A" + box + sb + k0 + se + im_end, "A" + eot + "B"]:
        add("kimi", "kimi_k2", "kimi_k2", text, auto, tag="special kimi_k2")
        add("kimi", None, "kimi_k2", text, auto, tag="special kimi_k2")
        add("kimi", "kimi_k2", None, text, tag="special kimi_k2")
    for text in ["[THINK]r" + eot + "[/THINK]A" + box + "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Pa" + box + "ris\"}",
                 "A" + eot + "B" + im_end]:
        add("mistral13", "mistral", "mistral", text, auto, tag="special mistral v13")
        add("mistral13", None, "mistral", text, auto, tag="special mistral v13")
        add("mistral13", "mistral", None, text, tag="special mistral v13")
    add("mistral3", None, "mistral", 'A' + eot + '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "P'
        + box + '"}}]', auto, tag="special mistral pre-v11")
    for text in ['{"name": "get_weather", "parameters": {"city": "Pa<|eot_id|>ris"}}<|eot_id|>', "Hi<|begin_of_text|>there"]:
        add("llama3", None, "llama3_json", text, auto, tag="special llama3_json")
    add("llama3", None, "pythonic", "[get_weather(city='Pa<|eot_id|>ris')]<|eot_id|>", auto, tag="special pythonic")
    end = "<｜end▁of▁sentence｜>"
    b, e, cb, ce, sep = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
    v3 = cb + "function" + sep + "get_weather\n```json\n{\"city\": \"Pa" + end + "ris\"}\n```" + ce
    add("deepseek", "deepseek_v3", "deepseek_v3", "<think>r" + end + "</think>A" + end + b + v3 + e, auto, {"thinking": True},
        tag="special deepseek_v3")
    v31 = cb + "get_weather" + sep + "{\"city\": \"Pa" + end + "ris\"}" + ce
    add("deepseek", "deepseek_r1", "deepseek_v31", "r" + end + "</think>A" + end + b + v31 + e, auto, tag="special deepseek_v31")
    # qwen3_xml: `<tool_call>` blocks without a function (e.g. a hermes-style call)
    xml_call_p = "<tool_call>\n<function=get_weather>\n<parameter=city>\nP\n</parameter>\n</function>\n</tool_call>"
    for text in ["A<tool_call>\nx\n</tool_call>B", "<tool_call>\nx\n</tool_call>", "  <tool_call>\nx\n</tool_call>  ",
                 "A<tool_call>\nx\n</tool_call>B" + xml_call_p + "C", xml_call_p + "<tool_call>\nx\n</tool_call>D",
                 "A<tool_call>x", "  ", "A <tool_call>\nx</tool_call> B <tool_call>y</tool_call>",
                 "<think>\nr\n</think>\n\n" + CALL_PARIS + "\n", "Hi " + CALL_PARIS + " after " + CALL_PARIS]:
        add("qwen3", None, "qwen3_xml", text, auto, tag="qwen3_xml without function")
        add("qwen3", "qwen3", "qwen3_xml", "<think>r</think>" + text, auto, tag="qwen3_xml without function")
    # where the drop applies: thinking off, a prompt that closed reasoning, forced tool choices,
    # a classic reasoning parser in front of an engine tool parser
    add("qwen3", "qwen3", "qwen3_xml", "A" + eot + xml_call, auto, {"enable_thinking": False}, tag="special where")
    add("qwen3", "qwen3", "hermes", "A" + box + "B</think>C" + eot, auto, prompt_text=(
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"), tag="special where")
    add("qwen3", "deepseek_r1", "qwen3_xml", "r" + box + "</think>A" + eot + xml_call, auto, tag="special where")
    add("qwen3", "glm45", "glm45", "<think>r" + eot + "</think>A" + box + gc, {"tools": glm_tools}, {"enable_thinking": False},
        tag="special where")
    add("kimi", "kimi_k2", "kimi_k2", "<think>r" + eot + "</think>A" + box + "B", auto, {"thinking": False}, tag="special where")
    add("mistral3", "mistral", None, "[THINK]r" + eot + "[/THINK]A" + box + "B", tag="special where")
    add("mistral3", "mistral", "mistral", "A" + eot + "B", auto, tag="special where")
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        forced = {"tools": TOOLS, "tool_choice": choice}
        args = '{"city": "Pa' + box + 'ris"}'
        text = '[{"name": "get_weather", "parameters": ' + args + '}]' if choice == "required" else args
        add("qwen3", None, "qwen3_xml", text, forced, tag="special where forced")
        add("qwen3", "qwen3", "hermes", "<think>r</think>" + text, forced, tag="special where forced")
        add("qwen3", "glm45", "glm45", "<think>r</think>" + text, forced, tag="special where forced")
    # is_reasoning_end when thinking is off, even with <think> in the prompt's history
    history = ("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\nold\n</think>\n\nhello<|im_end|>\n"
               "<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n")
    for prompt in (history, history + "<think>\n", history + "<think>\n\n</think>\n\n"):
        for kwargs in ({"enable_thinking": False}, {}):
            add("qwen3", "qwen3", "hermes", "A</think>B", auto, kwargs, prompt_text=prompt, tag="reasoning end prompt")
    glm_prompt = "<|user|>\nhi<|assistant|>\n<think>\n"
    for kwargs in ({"enable_thinking": False}, {}):
        add("qwen3", "glm45", "glm45", "A</think>B", {"tools": glm_tools}, kwargs, prompt_text=glm_prompt,
            tag="reasoning end prompt")
    for kwargs in ({"thinking": False}, {}):
        add("kimi", "kimi_k2", "kimi_k2", "A</think>B", auto, kwargs, prompt_text=history + "<think>\n",
            tag="reasoning end prompt")
    # structural tags for a strict tool without parameters
    bare = {"type": "function", "function": {"name": "ping", "strict": True}}
    for tools in ([bare], [bare, WEATHER]):
        for choice in ("auto", "required", {"type": "function", "function": {"name": "ping"}}):
            add("qwen3", "qwen3", "hermes", "x", {"tools": tools, "tool_choice": choice}, tag="adjust strict no parameters")
    # GLM-4.7 tag shapes: one property, described/enum/typed-list values, non-plain schemas, strict tools
    def glm_tool(name, parameters=None, strict=None):
        function = {"name": name}
        if parameters is not None:
            function["parameters"] = parameters
        if strict is not None:
            function["strict"] = strict
        return {"type": "function", "function": function}
    shaped = glm_tool("shaped", {"type": "object", "properties": {
        "unit": {"type": "string", "enum": ["c", "f"]}, "one": {"enum": [1]}, "mixed": {"type": ["integer", "string", "null"]},
        "days": {"type": "integer", "description": "how many", "minimum": 1}, "free": {}, "tags": {"type": "array",
                                                                                              "items": {"type": "string"}}}})
    glm_sets = [[glm_tool("bare")], [glm_tool("empty", {"type": "object", "properties": {}})],
                [glm_tool("extra", {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True})],
                [glm_tool("anyof", {"anyOf": [{"type": "object"}]})], [shaped],
                [shaped, glm_tool("strict_one", {"type": "object", "properties": {"a": {"type": "integer"}}}, True)],
                [glm_tool("strict_bare", strict=True)]]
    for tools in glm_sets:
        named = {"type": "function", "function": {"name": tools[-1]["function"]["name"]}}
        for choice in ("auto", "required", named):
            add("qwen3", None, "glm45", "x", {"tools": tools, "tool_choice": choice}, tag="adjust glm shapes")
    return out


def render_cases() -> list[dict]:
    """Render side, `golden_render/vllm033_reasoning_ended.json`: the Mistral parser with a Hugging
    Face tokenizer never sets `_grammar_from_parser` (vLLM does so only in its mistral-common
    grammar mode), so `reasoning_ended` is the reasoning parser's `is_reasoning_end` or null."""
    out = []
    hi = [{"role": "user", "content": "hi"}]
    for tok in ("mistral13", "mistral3"):
        for reasoning in ("mistral", None):
            for choice in ("auto", "required", "none", {"type": "function", "function": {"name": "get_weather"}}):
                out.append({"tokenizer": tok, "reasoning_parser": reasoning, "tool_parser": "mistral",
                            "request": {"messages": hi, "tools": TOOLS, "tool_choice": choice}, "tag": "render mistral"})
    return out


if __name__ == "__main__":
    import sys

    which = {"extra": extra_cases, "render": render_cases}.get(sys.argv[1] if sys.argv[1:] else "", cases)
    print(json.dumps(which(), ensure_ascii=False))
