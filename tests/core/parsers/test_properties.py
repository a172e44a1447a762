"""Property tests: chunking never changes the result, odd text never breaks a parser.

* well-formed outputs (reasoning, content, tool calls with arbitrary JSON arguments written
  with arbitrary spacing/escaping): any split into feeds aggregates to exactly the
  non-streaming `parse_complete` answer;
* adversarial text (tag fragments, unclosed tags, braces and quotes in strings): feeding never
  raises, every chunking gives the same aggregate as a single feed, the state stays JSON and small.
"""

from __future__ import annotations

import json
import keyword

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.parsers.helpers import make_parser

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("f", "get_x")]

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=12)
plain = st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=30)


@st.composite
def dump_style(draw, value):
    return json.dumps(value, ensure_ascii=draw(st.booleans()),
                      indent=draw(st.sampled_from([None, 0, 2])),
                      separators=draw(st.sampled_from([None, (",", ":"), (" ,", " : ")])))


@st.composite
def hermes_output(draw):
    parts = []
    if draw(st.booleans()):
        parts.append("<think>" + draw(plain) + "</think>")
    parts.append(draw(plain))
    for _ in range(draw(st.integers(0, 3))):
        args = draw(st.dictionaries(st.text(max_size=6), json_values, max_size=4))
        obj = {"name": draw(st.sampled_from(["f", "get_x"])), "arguments": args}
        if draw(st.booleans()):
            obj = {"arguments": args, "name": obj["name"]}
        body = draw(dump_style(obj))
        parts.append("<tool_call>" + draw(st.sampled_from(["", "\n"])) + body
                     + draw(st.sampled_from(["", "\n"])) + "</tool_call>" + draw(st.sampled_from(["", "\n"])))
    return "".join(parts)


def split(text, cuts):
    bounds = [0, *sorted(set(c % (len(text) + 1) for c in cuts)), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def run(parser, chunks, prompt=None):
    state = parser.start(prompt)
    reasoning, content, calls = "", "", {}
    biggest = 0
    for chunk in chunks:
        state = json.loads(json.dumps(state))
        biggest = max(biggest, len(json.dumps(state)))
        for delta in (parser.feed(state, chunk, []),):
            if delta:
                reasoning += delta["reasoning"] or ""
                content += delta["content"] or ""
                for c in delta["tool_calls"]:
                    slot = calls.setdefault(c["index"], ["", ""])
                    slot[0] += c["function"].get("name") or ""
                    slot[1] += c["function"].get("arguments") or ""
    delta = parser.finish(state)
    if delta:
        reasoning += delta["reasoning"] or ""
        content += delta["content"] or ""
        for c in delta["tool_calls"]:
            slot = calls.setdefault(c["index"], ["", ""])
            slot[0] += c["function"].get("name") or ""
            slot[1] += c["function"].get("arguments") or ""
    return reasoning, content, [tuple(calls[i]) for i in sorted(calls)], biggest


@SETTINGS
@given(text=hermes_output(), cuts=st.lists(st.integers(0, 10**6), max_size=12))
def test_hermes_qwen3_any_chunking_equals_non_streaming(qwen3, text, cuts):
    parser = make_parser(qwen3, "qwen3", "hermes", {"tools": TOOLS})
    reasoning, content, calls = parser.parse_complete(text, [], None)
    got = run(parser, split(text, cuts))
    assert got[0] == (reasoning or "")
    assert got[1] == (content or "")
    assert got[2] == [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


@SETTINGS
@given(text=hermes_output(), cuts=st.lists(st.integers(0, 10**6), max_size=12))
def test_hermes_alone_any_chunking_equals_non_streaming(qwen3, text, cuts):
    parser = make_parser(qwen3, None, "hermes", {"tools": TOOLS})
    reasoning, content, calls = parser.parse_complete(text, [], None)
    got = run(parser, split(text, cuts))
    assert got[1] == (content or "")
    assert got[2] == [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


@SETTINGS
@given(body=plain, end=st.booleans(), tail=plain, start=st.booleans(), cuts=st.lists(st.integers(0, 10**6), max_size=8))
def test_deepseek_r1_any_chunking_equals_non_streaming(qwen3, body, end, tail, start, cuts):
    text = ("<think>" if start else "") + body + ("</think>" + tail if end else "")
    parser = make_parser(qwen3, "deepseek_r1", None, {})
    reasoning, content, _ = parser.parse_complete(text, [], None)
    got = run(parser, split(text, cuts))
    assert got[0] == (reasoning or "") and got[1] == (content or "")
    assert got[0] + ("</think>" if end else "") + got[1] == text.removeprefix("<think>")


ADVERSARIAL = st.lists(st.sampled_from(
    ["<think>", "</think>", "<tool_call>", "</tool_call>", "<", "</", "<tool", "_call>", "think>", "{", "}",
     '"', "\\", '"name"', '"arguments"', ":", ",", "[", "]", '"f"', "1", "e", "\n", " ", "x", "é", "😀",
     "<|im_end|>", "<|im_start|>", "null", "\\u00", "\\ud83d", "<|endoftext|>", "<|box_start|>", "<|", "|>",
     "<|im_", "end|>"]), max_size=40).map("".join)


@SETTINGS
@given(text=ADVERSARIAL, cuts=st.lists(st.integers(0, 10**6), max_size=12),
       combo=st.sampled_from([("qwen3", "hermes"), ("deepseek_r1", "hermes"), (None, "hermes"),
                              ("qwen3", None), ("deepseek_r1", None)]),
       choice=st.sampled_from(["auto", "required", "none"]))
def test_adversarial_text_never_raises_and_chunking_invariant(qwen3, text, cuts, combo, choice):
    request = {"tools": TOOLS, "tool_choice": choice} if combo[1] else {}
    parser = make_parser(qwen3, combo[0], combo[1], request)
    whole = run(parser, [text])
    chunked = run(parser, split(text, cuts))
    assert chunked[:3] == whole[:3]
    parser.parse_complete(text, [], None)
    assert chunked[3] < 1024 + 4 * len(text)
    if combo == ("qwen3", None) or combo == (None, None):
        pass
    if combo[0] is None and choice == "none":
        assert chunked[1] == text  # nothing is lost on the plain path


@st.composite
def llama_output(draw):
    objs = []
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(["parameters", "arguments"]))
        obj = {"name": draw(st.sampled_from(["f", "get_x"])), key: draw(st.dictionaries(st.text(max_size=6), json_values, max_size=4))}
        objs.append(draw(dump_style(obj)))
    return draw(st.sampled_from(["", "<|python_tag|>", " "])) + draw(st.sampled_from(["; ", ";", "\n"])).join(objs)


@SETTINGS
@given(text=llama_output(), cuts=st.lists(st.integers(0, 10**6), max_size=12))
def test_llama3_json_any_chunking_equals_non_streaming(llama3, text, cuts):
    parser = make_parser(llama3, None, "llama3_json", {"tools": TOOLS})
    _, content, calls = parser.parse_complete(text, [], None)
    got = run(parser, split(text, cuts))
    assert got[1] == (content or "")
    assert got[2] == [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


DS_MARKERS = ["<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"]
raw_args = st.text(alphabet=st.characters(blacklist_characters="<｜`"), max_size=30)


@st.composite
def deepseek_output(draw, v31):
    b, e, cb, ce, sep = DS_MARKERS
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(["f", "get_x"]))
        args = draw(raw_args)
        calls.append(cb + name + sep + args + ce if v31 else cb + "function" + sep + name + "\n```json\n" + args + "\n```" + ce)
    return draw(plain) + b + ("" if v31 else "\n").join(calls) + e + draw(plain)


@SETTINGS
@given(data=st.data(), cuts=st.lists(st.integers(0, 10**6), max_size=12), v31=st.booleans())
def test_deepseek_tools_any_chunking_equals_non_streaming(deepseek, data, cuts, v31):
    text = data.draw(deepseek_output(v31))
    parser = make_parser(deepseek, None, "deepseek_v31" if v31 else "deepseek_v3", {"tools": TOOLS})
    _, content, calls = parser.parse_complete(text, [], None)
    got = run(parser, split(text, cuts))
    assert got[1] == (content or "")
    assert got[2] == [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


@SETTINGS
@given(text=st.one_of(ADVERSARIAL, st.lists(st.sampled_from(DS_MARKERS + ["function", "\n```json\n", "\n```", "x", "{", "\n", "<|python_tag|>", ";"]), max_size=30).map("".join)),
       cuts=st.lists(st.integers(0, 10**6), max_size=12),
       combo=st.sampled_from([("deepseek", "deepseek_v3", "deepseek_v3"), ("deepseek", "deepseek_r1", "deepseek_v31"),
                              ("llama3", None, "llama3_json"), ("deepseek", "deepseek_v3", None)]))
def test_other_families_adversarial(parser_models, text, cuts, combo):
    parser = make_parser(parser_models[combo[0]], combo[1], combo[2], {"tools": TOOLS} if combo[2] else {},
                         {"thinking": True})
    whole = run(parser, [text])
    chunked = run(parser, split(text, cuts))
    assert chunked[:3] == whole[:3]
    parser.parse_complete(text, [], None)


XML_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "s": {"type": "string"}, "i": {"type": "integer"}, "o": {"type": "object"}, "b": {"type": "boolean"}}}}},
    {"type": "function", "function": {"name": "get_x", "parameters": {"type": "object"}}}]
xml_value = st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=20)


@st.composite
def engine_output(draw, glm):
    parts = [draw(plain).strip() or "x"]
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(["f", "get_x"]))
        params = []
        for key in draw(st.lists(st.sampled_from(["s", "i", "o", "b", "z"]), max_size=4, unique=True)):
            value = draw(st.one_of(xml_value, st.integers().map(str), st.sampled_from(['{"a": 1}', "true", "0"])))
            params.append(f"<arg_key>{key}</arg_key><arg_value>{value}</arg_value>" if glm
                          else f"<parameter={key}>\n{value}\n</parameter>\n")
        body = "".join(params)
        parts.append(f"<tool_call>{name}\n{body}</tool_call>" if glm
                     else f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>")
    return "".join(parts)


@SETTINGS
@given(data=st.data(), cuts=st.lists(st.integers(0, 10**6), max_size=12), glm=st.booleans())
def test_engine_families_any_chunking_equals_non_streaming(qwen3, data, cuts, glm):
    text = data.draw(engine_output(glm))
    parser = make_parser(qwen3, "glm45" if glm else "qwen3", "glm45" if glm else "qwen3_xml", {"tools": XML_TOOLS},
                         {"enable_thinking": False} if not glm else {"enable_thinking": False})
    _, content, calls = parser.parse_complete(text, [], None)
    got = run(parser, split(text, cuts))
    assert got[1] == (content or "")
    assert got[2] == [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


ENGINE_PIECES = ["<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", ">", "f", "s",
                 "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "\n", " ", "x", "<think>", "</think>", "1",
                 "<|im_end|>", "<"]


@SETTINGS
@given(text=st.lists(st.sampled_from(ENGINE_PIECES), max_size=40).map("".join),
       cuts=st.lists(st.integers(0, 10**6), max_size=12),
       combo=st.sampled_from([("qwen3", "qwen3_xml"), (None, "qwen3_xml"), ("glm45", "glm45"), (None, "glm45"),
                              ("glm45", None)]))
def test_engine_families_adversarial(qwen3, text, cuts, combo):
    parser = make_parser(qwen3, combo[0], combo[1], {"tools": XML_TOOLS} if combo[1] else {})
    whole = run(parser, [text])
    chunked = run(parser, split(text, cuts))
    assert chunked[:3] == whole[:3]
    parser.parse_complete(text, [], None)


KIMI_PIECES = ["<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
               "<|tool_call_argument_begin|>", "<|tool_call_end|>", "functions.f:0", "get_x:1", " ", "{", "}", "\n",
               "<think>", "</think>", "x", '"a"', "<|tool_call"]


@SETTINGS
@given(text=st.lists(st.sampled_from(KIMI_PIECES), max_size=40).map("".join),
       cuts=st.lists(st.integers(0, 10**6), max_size=12),
       combo=st.sampled_from([("kimi_k2", "kimi_k2"), (None, "kimi_k2"), ("kimi_k2", None)]))
def test_kimi_k2_adversarial_and_chunking(kimi, text, cuts, combo):
    parser = make_parser(kimi, combo[0], combo[1], {"tools": TOOLS} if combo[1] else {})
    whole = run(parser, [text])
    chunked = run(parser, split(text, cuts))
    assert chunked[:3] == whole[:3]
    _, content, calls = parser.parse_complete(text, [], None)
    if "<|tool_calls_section_begin|>" not in text and combo[1]:
        assert not calls


py_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=10),
                                   st.floats(allow_nan=False, allow_infinity=False)),
                         lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                 st.dictionaries(st.text(max_size=5), inner, max_size=3)), max_leaves=8)


@st.composite
def pythonic_output(draw):
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(["f", "get_x", "search2"]))
        names = st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))
        kwargs = draw(st.dictionaries(names, py_values, max_size=3))
        calls.append(f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")")
    return "[" + draw(st.sampled_from([", ", ","])).join(calls) + "]"


@SETTINGS
@given(text=pythonic_output(), cuts=st.lists(st.integers(0, 10**6), max_size=12))
def test_pythonic_any_chunking_equals_non_streaming(llama3, text, cuts):
    parser = make_parser(llama3, None, "pythonic", {"tools": TOOLS})
    _, content, calls = parser.parse_complete(text, [], None)
    got = run(parser, split(text, cuts))
    assert got[1] == (content or "")
    assert got[2] == [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


@SETTINGS
@given(text=st.lists(st.sampled_from(["[", "]", "(", ")", "f", "a=", "'", '"', "1", ",", " ", "{", "}", "x", "\\",
                                      "<|python_start|>", "<|python_end|>", "=="]), max_size=30).map("".join),
       cuts=st.lists(st.integers(0, 10**6), max_size=12), name=st.sampled_from(["pythonic", "llama4_pythonic"]))
def test_pythonic_adversarial(llama3, text, cuts, name):
    parser = make_parser(llama3, None, name, {"tools": TOOLS})
    whole = run(parser, [text])
    chunked = run(parser, split(text, cuts))
    assert chunked[:3] == whole[:3]
    parser.parse_complete(text, [], None)


@st.composite
def mistral_v11_output(draw):
    parts = [draw(plain).strip() or "x"]
    for _ in range(draw(st.integers(1, 3))):
        args = json.dumps(draw(st.dictionaries(st.text(max_size=5), json_values, max_size=3)), ensure_ascii=False)
        sep = draw(st.sampled_from(["[ARGS]", ""]))
        parts.append("[TOOL_CALLS]" + draw(st.sampled_from(["f", "get_x"])) + sep + (args if sep or args.startswith("{") else args))
    return "".join(parts)


@SETTINGS
@given(text=mistral_v11_output(), cuts=st.lists(st.integers(0, 10**6), max_size=12))
def test_mistral_v11_any_chunking_equals_non_streaming(parser_models, text, cuts):
    parser = make_parser(parser_models["mistral13"], "mistral", "mistral", {"tools": TOOLS})
    _, content, calls = parser.parse_complete(text, [], None)
    got = run(parser, split(text, cuts))
    assert got[1] == (content or "")
    assert got[2] == [(c["function"]["name"], c["function"]["arguments"]) for c in calls]


MISTRAL_PIECES = ["[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]", "[", "]", "{", "}", '"name"', '"arguments"', ":", ",",
                  '"f"', "1", " ", "\n", "x", "null", "[TOOL"]


@SETTINGS
@given(text=st.lists(st.sampled_from(MISTRAL_PIECES), max_size=40).map("".join), cuts=st.lists(st.integers(0, 10**6), max_size=12),
       combo=st.sampled_from([("mistral13", "mistral", "mistral"), ("mistral13", None, "mistral"),
                              ("mistral3", None, "mistral"), ("mistral13", "mistral", None)]),
       choice=st.sampled_from(["auto", "required", "none"]))
def test_mistral_adversarial(parser_models, text, cuts, combo, choice):
    parser = make_parser(parser_models[combo[0]], combo[1], combo[2], {"tools": TOOLS, "tool_choice": choice} if combo[2] else {})
    whole = run(parser, [text])
    chunked = run(parser, split(text, cuts))
    assert chunked[:3] == whole[:3]
    parser.parse_complete(text, [], None)
