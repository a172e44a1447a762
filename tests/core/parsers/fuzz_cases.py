"""Model-like outputs per parser family, for the differential fuzz (issue 14).

Every generator takes a `random.Random`, so the hypothesis properties (`st.randoms()`, which
shrinks) and the oracle run against vLLM 0.33 (plain seeds, thousands of cases) share them.
A case is the JSON dict `vllm_oracle.py` reads:

    {"family", "tokenizer", "reasoning_parser", "tool_parser", "request", "chat_template_kwargs",
     "enable_auto_tools", "prompt_text", "text", "malformed"}

The outputs have the shapes models write and the shapes they break into: reasoning blocks
(closed, opened by the prompt, never closed), prose around 0-4 calls, unicode and `\\uXXXX`
escapes (surrogate pairs included), odd whitespace, tags inside strings, special-token text,
calls cut off or corrupted (`malformed`), under every `tool_choice`.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from random import Random
from typing import Any

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "unit": {"enum": ["c", "f"]}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "number"}, "exact": {"type": "boolean"},
        "filters": {"type": "object", "properties": {"year": {"type": "integer"}}},
        "tags": {"type": "array", "items": {"type": "string"}}, "maybe": {"type": ["string", "null"]}}}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}},
]
TOOL_NAMES = ["get_weather", "search", "ping"]
KEYS = ["city", "days", "metric", "unit", "query", "limit", "exact", "filters", "tags", "maybe", "note", "é"]

WORDS = ["Sure", "Sure!", "Let", "me", "check", "the", "weather", "in", "Paris", ".", ",", "?", "天气", "été",
         "🗼", "😀", "ok", "Done.", "x", "1", "42", "{", "}", "[", "]", '"', "'", ":", "(", ")", "<", ">", "/",
         "\\", "=", "*", "#", "-", "a", "b", "yes", "no", "null", "true"]
SPACES = ["", " ", "  ", "\n", "\n\n", " \n", "\t", "\r\n", "\u00a0", "\u3000"]
STRING_BITS = ["Paris", "New York", "天气", "été", "🗼", "😀", " ", "\n", "\t", '"', "\\", "/", "{", "}", "[", "]",
               ":", ",", "<", ">", "x", "é", "\u2028", "\x01", "null", "1"]


@dataclass(frozen=True)
class Family:
    """How one family is exercised: tokenizer, reasoning parsers to pair with, the output maker."""

    name: str
    tokenizer: str
    tool_parsers: tuple[str | None, ...]
    reasoning_parsers: tuple[str | None, ...]
    make_text: Callable[[Random, dict[str, Any]], str]
    tags: tuple[str, ...] = ()  # markup put inside strings and values
    specials: tuple[str, ...] = ("<|endoftext|>", "<|box_start|>")
    kwargs: tuple[dict[str, Any], ...] = ({},)
    prompts: tuple[str | None, ...] = (None,)


# -- building blocks ----------------------------------------------------------------------

def chance(rng: Random, p: float) -> bool:
    return rng.random() < p


def spaces(rng: Random) -> str:
    return rng.choice(SPACES)


def prose(rng: Random, tags: tuple[str, ...] = (), words: int = 6) -> str:
    out = []
    for _ in range(rng.randint(0, words)):
        if tags and chance(rng, 0.08):
            out.append(rng.choice(tags))
        else:
            out.append(rng.choice(WORDS))
        out.append(rng.choice([" ", " ", "", "\n"]))
    return "".join(out)


def text_value(rng: Random, tags: tuple[str, ...] = ()) -> str:
    bits = STRING_BITS + list(tags)
    return "".join(rng.choice(bits) for _ in range(rng.randint(0, 5)))


def json_value(rng: Random, tags: tuple[str, ...] = (), depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 2 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, 1, -7, 42, 10**20, -0])
    if kind == 3:
        return rng.choice([1.5, -0.25, 1e-7, 3.0, 2.5e10])
    if kind in (4, 5):
        return text_value(rng, tags)
    if kind in (6, 7):
        return {rng.choice(KEYS): json_value(rng, tags, depth + 1) for _ in range(rng.randint(0, 3))}
    return [json_value(rng, tags, depth + 1) for _ in range(rng.randint(0, 3))]


def arguments(rng: Random, tags: tuple[str, ...] = ()) -> dict[str, Any]:
    return {rng.choice(KEYS): json_value(rng, tags) for _ in range(rng.randint(0, 4))}


def dumps(rng: Random, value: Any) -> str:
    """JSON the way models write it: any spacing, ASCII escapes or not, odd escape spellings."""
    text = json.dumps(value, ensure_ascii=chance(rng, 0.4), indent=rng.choice([None, None, 0, 2]),
                      separators=rng.choice([None, (",", ":"), (" , ", " : "), (",\n", ": ")]))
    if chance(rng, 0.2):
        text = text.replace("/", "\\/")  # "/" only occurs inside strings
    if chance(rng, 0.3):
        text = re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), text)
    return text


def python_literal(rng: Random, value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return rng.choice([repr(value), {True: "true", False: "false", None: "null"}[value]])
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {python_literal(rng, v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        items = ", ".join(python_literal(rng, v) for v in value)
        return rng.choice([f"[{items}]", f"({items}{',' if len(value) == 1 else ''})"]) if value else "[]"
    return repr(value)


def think_block(rng: Random, start: str = "<think>", end: str = "</think>", tags: tuple[str, ...] = ()) -> str:
    body = prose(rng, tags, 8)
    shape = rng.randrange(6)
    if shape == 0:
        return ""
    if shape in (1, 2):
        return start + spaces(rng) + body + spaces(rng) + end + spaces(rng)
    if shape == 3:
        return body + end + spaces(rng)  # opened by the prompt
    if shape == 4:
        return start + body  # never closed
    return start + end + spaces(rng)


def corrupt(rng: Random, text: str, tags: tuple[str, ...]) -> str:
    """A call body broken the ways models break them: a character lost, a stray tag, a stray quote."""
    if not text:
        return text
    at = rng.randrange(len(text) + 1)
    kind = rng.randrange(3)
    if kind == 0:
        return text[:at] + text[at + 1:]
    if kind == 1 and tags:
        return text[:at] + rng.choice(tags) + text[at:]
    return text[:at] + rng.choice(['"', "}", "{", ",", ":", "\\"]) + text[at:]


def finish_text(rng: Random, case: dict[str, Any], fam: Family, text: str) -> str:
    if fam.specials and chance(rng, 0.05):  # special-token text anywhere, markup included
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice(fam.specials) + text[at:]
        case["malformed"] = True
    if chance(rng, 0.15):
        text = text[:rng.randrange(len(text) + 1)]  # cut off by max_tokens
        case["malformed"] = True
    # (no end-of-turn text: derender never hands the token that ended the output to the parser)
    return text


def calls_with_prose(rng: Random, case: dict[str, Any], fam: Family, render: Callable[[], str]) -> str:
    parts = [prose(rng, fam.tags)] if chance(rng, 0.6) else [spaces(rng)]
    for i in range(rng.choice([0, 1, 1, 1, 2, 2, 3, 4])):
        call = render()
        if chance(rng, 0.1):
            call = corrupt(rng, call, fam.tags)
            case["malformed"] = True
        parts.append(call)
        between = rng.choice([spaces(rng), spaces(rng), prose(rng, fam.tags, 3)])
        if any(tag in between for tag in fam.tags if tag.startswith("<")):
            case["malformed"] = True  # markup after a call that went out opens a broken one
        parts.append(between)
    return "".join(parts)


def forced_output(rng: Random, case: dict[str, Any]) -> str | None:
    """What structured outputs make a model write for required/named with the JSON path."""
    choice = case["request"].get("tool_choice")
    blank = ["", " ", "\n", "\n\n", "\t"]  # guided decoding writes JSON whitespace only
    if choice == "required" and chance(rng, 0.7):
        calls = [{"name": rng.choice(TOOL_NAMES), "parameters": arguments(rng)} for _ in range(rng.randint(1, 3))]
        return rng.choice(blank) + dumps(rng, calls) + rng.choice(blank)
    if isinstance(choice, dict) and chance(rng, 0.7):
        return rng.choice(blank) + dumps(rng, arguments(rng)) + rng.choice(blank)
    return None


# -- families -----------------------------------------------------------------------------

def tool_call_json(rng: Random, case: dict[str, Any], fam: Family, breaking: tuple[str, ...] = ("</tool_call>",),
                   more_shapes: bool = False) -> str:
    """One `<tool_call>{"name": ..., "arguments": ...}</tool_call>` (hermes, granite4); `breaking`:
    the tags that break the call when a string holds them; `more_shapes`: also any JSON value as
    the arguments and an extra key (the draws stay the same without them)."""
    obj: dict[str, Any] = {"name": rng.choice(TOOL_NAMES + ["unknown_tool"]), "arguments": arguments(rng, fam.tags)}
    shape = rng.randrange(14 if more_shapes else 12)
    if shape == 0:
        obj = {"arguments": obj["arguments"], "name": obj["name"]}
    elif shape == 1:
        obj = {"name": obj["name"]}
        case["malformed"] = True
    elif shape == 2:
        obj["arguments"] = text_value(rng)  # a string argument
    elif shape == 3:
        obj = {"name": obj["name"], "parameters": obj["arguments"]}
        case["malformed"] = True
    elif shape == 12:
        obj["arguments"] = json_value(rng, fam.tags)  # any JSON value (granite4: null fails the call)
        case["malformed"] = case["malformed"] or obj["arguments"] is None
    elif shape == 13:
        obj["id"] = "x"  # other keys are ignored
    closing = "" if chance(rng, 0.05) else "</tool_call>"
    body = dumps(rng, obj)
    # vLLM's format ends a call at the first </tool_call>, or at the end of the output when
    # it is never closed: a tag inside a string, or any text after an unclosed call, breaks it
    if any(tag in body for tag in breaking) or not closing:
        case["malformed"] = True
    return "<tool_call>" + rng.choice(["", "\n", " "]) + body + rng.choice(["", "\n"]) + closing


def hermes_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["hermes"]

    def call() -> str:
        return tool_call_json(rng, case, fam)

    reasoning = think_block(rng, tags=fam.tags) if case["reasoning_parser"] else ""
    body = forced_output(rng, case) or calls_with_prose(rng, case, fam, call)
    return reasoning + body


def llama_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["llama3_json"]
    objs = []
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        key = rng.choice(["parameters", "arguments"])
        obj = {"name": rng.choice(TOOL_NAMES), key: arguments(rng, fam.tags)}
        if chance(rng, 0.05):
            obj = {"name": obj["name"]}
            case["malformed"] = True
        text = dumps(rng, obj)
        if chance(rng, 0.07):
            text = corrupt(rng, text, fam.tags)
            case["malformed"] = True
        objs.append(text)
    prefix = rng.choice(["", "", "<|python_tag|>", " ", "\n", prose(rng) + " ", prose(rng) + "\n", "Sure! "])
    if not objs:
        return prefix + prose(rng, fam.tags)
    joined = rng.choice(["; ", ";", "\n", " ", ";\n"]).join(objs)
    tail = rng.choice(["", "", " ", prose(rng, fam.tags, 3)])
    if "{" in tail:
        case["malformed"] = True  # a `{` after the calls that is no object breaks them all
    return forced_output(rng, case) or prefix + joined + tail


def pythonic_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["pythonic"]
    forced = forced_output(rng, case)
    if forced is not None:
        return forced
    calls = []
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        name = rng.choice(TOOL_NAMES + ["a.b"])
        args = []
        for key, value in arguments(rng, fam.tags).items():
            if not key.isidentifier():
                continue
            literal = python_literal(rng, value)
            if chance(rng, 0.05):
                literal = rng.choice(["foo", "f'x'", "1+2", "print(1)"])
                case["malformed"] = True
            args.append(f"{key}={literal}")
        if chance(rng, 0.05):
            args.insert(0, "'positional'")
            case["malformed"] = True
        if "." in name and calls:
            case["malformed"] = True  # vLLM's call-list pattern accepts a later dotted name by accident
        calls.append(f"{name}(" + rng.choice([", ", ","]).join(args) + ")")
    if not calls:
        return prose(rng, fam.tags)
    text = "[" + rng.choice([", ", ","]).join(calls) + "]"
    if chance(rng, 0.07):
        text = corrupt(rng, text, fam.tags)
        case["malformed"] = True
    if case["tool_parser"] == "llama4_pythonic" and chance(rng, 0.5):
        text = "<|python_start|>" + text + rng.choice(["<|python_end|>", ""])
    tail = rng.choice(["", "", "\n", " ok"])
    if tail.strip():
        case["malformed"] = True
    return rng.choice(["", "", "", " ", "Sure! "]) + text + tail


def xml_value(rng: Random, tags: tuple[str, ...]) -> str:
    return rng.choice(["Paris", "3", "-2", "1.50", "true", "False", "1", "null", '{"year": 2020}', '["a", "b"]',
                       "[1, 2]", "x > y < z", "multi\nline", "", " padded ", text_value(rng, tags)])


def qwen3_xml_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["qwen3_xml"]

    def call() -> str:
        name = rng.choice(TOOL_NAMES + ["unknown_tool"])
        nl = rng.choice(["\n", "\n", ""])
        params = []
        for key in rng.sample(KEYS, rng.randint(0, 3)):
            value = xml_value(rng, fam.tags)
            close = "" if chance(rng, 0.05) else "</parameter>"
            if not close or "<" in value:
                case["malformed"] = True
            params.append(f"<parameter={rng.choice(['', ' '])}{key}>{nl}{value}{nl}{close}{nl}")
        if chance(rng, 0.05):  # a hermes-style call: no function inside
            return "<tool_call>\n" + json.dumps({"name": name, "arguments": {}}) + "\n</tool_call>"
        body = f"<function={name}>{nl}" + "".join(params) + ("" if chance(rng, 0.05) else "</function>")
        return body if chance(rng, 0.08) else f"<tool_call>{nl}{body}{nl}</tool_call>"

    reasoning = think_block(rng, tags=fam.tags) if case["reasoning_parser"] else ""
    return reasoning + calls_with_prose(rng, case, fam, call)


# Seed-OSS writes the Qwen3 XML grammar with its own wrappers (one special token each)
SEED_MARKERS = (("<think>", "<seed:think>"), ("</think>", "</seed:think>"), ("<tool_call>", "<seed:tool_call>"),
                ("</tool_call>", "</seed:tool_call>"))


def seed_oss_text(rng: Random, case: dict[str, Any]) -> str:
    text = qwen3_xml_text(rng, case)
    for qwen, seed in SEED_MARKERS:
        text = text.replace(qwen, seed)
    if chance(rng, 0.1):  # Qwen's markers are plain text to Seed-OSS (wherever they land)
        at = rng.randrange(len(text) + 1)
        text = text[:at] + rng.choice([qwen for qwen, _ in SEED_MARKERS]) + text[at:]
        case["malformed"] = True
    return text


def glm45_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["glm45"]

    def call() -> str:
        name = rng.choice(TOOL_NAMES + TOOL_NAMES + ["unknown_tool"])
        pairs = []
        for key in rng.sample(KEYS, rng.randint(0, 3)):
            close = "" if chance(rng, 0.04) else "</arg_value>"
            value = xml_value(rng, fam.tags)
            if not close or "<" in value:
                case["malformed"] = True
            gap, tail, pad = rng.choice(["", "\n", " "]), rng.choice(["", "\n"]), rng.choice(["", " "])
            pairs.append(f"<arg_key>{pad}{key}</arg_key>{gap}<arg_value>{value}{close}{tail}")
        pad, gap = rng.choice(["", " "]), rng.choice(["", "\n"])
        return f"<tool_call>{pad}{name}{gap}" + "".join(pairs) + "</tool_call>"

    reasoning = think_block(rng, tags=fam.tags) if case["reasoning_parser"] else ""
    return reasoning + calls_with_prose(rng, case, fam, call)


DS_BEGIN, DS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DS_CALL, DS_CALL_END, DS_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"


def deepseek_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES[case["family"]]
    v31 = case["tool_parser"] == "deepseek_v31"
    calls = []
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        name = rng.choice(TOOL_NAMES + ["unknown_tool"])
        args = dumps(rng, arguments(rng, fam.tags)) if chance(rng, 0.9) else text_value(rng, fam.tags)
        if any(tag in args for tag in fam.tags if "｜" in tag):
            case["malformed"] = True
        if v31:
            calls.append(DS_CALL + name + DS_SEP + args + DS_CALL_END)
        else:
            kind = "function" if chance(rng, 0.95) else "other"
            if kind != "function":
                case["malformed"] = True
            calls.append(DS_CALL + kind + DS_SEP + name + "\n```json\n" + args + "\n```" + DS_CALL_END)
        if chance(rng, 0.07):
            calls[-1] = corrupt(rng, calls[-1], ())
            case["malformed"] = True
    # (DeepSeek's call markers are special tokens: a model does not write them in prose or reasoning)
    reasoning = think_block(rng, tags=("<think>", "</think>")) if case["reasoning_parser"] else ""
    text = reasoning + prose(rng)
    if calls:
        text += DS_BEGIN + rng.choice(["", "\n"]).join(calls) + ("" if chance(rng, 0.1) else DS_END)
        text += rng.choice(["", "", " after", prose(rng, (), 3)])
    return text


KIMI_SECTION, KIMI_SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
KIMI_CALL, KIMI_ARGS, KIMI_CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"


def kimi_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["kimi_k2"]
    calls = []
    for i in range(rng.choice([0, 1, 1, 2, 3])):
        name = rng.choice(TOOL_NAMES + ["unknown_tool"])
        header = rng.choice([f"functions.{name}:{i}", f"functions.{name}:{i}", f" functions.{name}:{i} ",
                             f"functions.{name}", f"{name}:{i}"])
        args = rng.choice(["", " ", "\n"]) + dumps(rng, arguments(rng, fam.tags)) + rng.choice(["", " ", "\n"])
        calls.append(KIMI_CALL + header + KIMI_ARGS + args + ("" if chance(rng, 0.04) else KIMI_CALL_END))
        if chance(rng, 0.06):
            calls[-1] = corrupt(rng, calls[-1], fam.tags)
            case["malformed"] = True
    reasoning = think_block(rng, tags=fam.tags) if case["reasoning_parser"] else ""
    text = reasoning + prose(rng, fam.tags)
    if calls:
        text += KIMI_SECTION + "".join(calls) + ("" if chance(rng, 0.1) else KIMI_SECTION_END)
        text += rng.choice(["", "", prose(rng, fam.tags, 3)])
    return text


def mistral_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES[case["family"]]
    legacy = case["tokenizer"] == "mistral3"
    reasoning = (think_block(rng, "[THINK]", "[/THINK]", fam.tags)
                 if case["reasoning_parser"] and case["tokenizer"] == "mistral13" else "")
    text = reasoning + prose(rng, fam.tags)
    n = rng.choice([0, 1, 1, 2, 3])
    if legacy:
        if n or chance(rng, 0.2):
            objs = [{"name": rng.choice(TOOL_NAMES), "arguments": arguments(rng, fam.tags)} for _ in range(max(n, 1))]
            body = dumps(rng, objs if len(objs) > 1 or chance(rng, 0.6) else objs[0])
            if "[TOOL_CALLS]" in body:
                case["malformed"] = True
            if chance(rng, 0.07):
                body = corrupt(rng, body, fam.tags)
                case["malformed"] = True
            forced = case["request"].get("tool_choice") not in (None, "auto", "none")
            text += ("" if forced and chance(rng, 0.5) else "[TOOL_CALLS]") + spaces(rng) + body
    else:
        for _ in range(n):
            args = dumps(rng, arguments(rng, fam.tags))
            if "[TOOL_CALLS]" in args:
                case["malformed"] = True
            sep = rng.choice(["[ARGS]", "[ARGS]", ""]) if args.startswith("{") else "[ARGS]"
            call = "[TOOL_CALLS]" + rng.choice(TOOL_NAMES) + sep + rng.choice(["", " "]) + args
            if chance(rng, 0.07):
                call = corrupt(rng, call, fam.tags)
                case["malformed"] = True
            text += call + rng.choice(["", "", " ", "\n"])
        if n and chance(rng, 0.05):
            text += "[TOOL_CALLS]"
    return text


GRANITE_THINK = ["Here is my thought process:", "Here's my thought process:"]
GRANITE_RESPONSE = ["Here is my response:", "Here's my response:"]


def granite_text(rng: Random, case: dict[str, Any]) -> str:
    shape = rng.randrange(8)
    lead = rng.choice(["", "", "", " ", "\n", "pre "])
    think, response = rng.choice(GRANITE_THINK), rng.choice(GRANITE_RESPONSE)
    reasoning, content = prose(rng, (), 8), prose(rng, (), 8)
    if shape == 0:
        return prose(rng)
    if shape == 1:
        return lead + think + reasoning  # never answered
    if shape == 2:
        return lead + think + reasoning + response[:rng.randrange(1, len(response))] + content
    if shape == 3:
        return lead + response + content
    return lead + think + reasoning + response + content


_D = "｜DSML｜"
# (block opener spellings, block name, the space V4.1 puts after ｜DSML｜)
DSML_SPELLINGS = {"dsml_v32": ((f"<{_D}function_calls>",), "function_calls", ""),
                  "dsml_v4": ((f"<{_D}tool_calls>", f"<{_D}tool_calls>", f"<{_D}toolcalls>", f"<{_D}tool>"),
                              "tool_calls", ""),
                  "dsml_v41": ((f"<{_D} calls>",), " calls", " ")}


def dsml_tags(family: str) -> tuple[str, ...]:
    starts, block, sp = DSML_SPELLINGS[family]
    return (*starts, f"</{_D}{block}>", f'<{_D}{sp}invoke name="', '">', f"</{_D}{sp}invoke>",
            f"<{_D}{sp}parameter", f"</{_D}{sp}parameter>", "<think>", "</think>")


def dsml_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES[case["family"]]
    starts, block, sp = DSML_SPELLINGS[case["family"]]
    markup = [t for t in fam.tags if t not in ('">',)]

    def invoke() -> str:
        name = rng.choice(TOOL_NAMES + TOOL_NAMES + ["unknown_tool"])
        params = []
        args = arguments(rng, fam.tags)
        if chance(rng, 0.05):
            args = {rng.choice(["arguments", "input"]): args}  # a wrapper vLLM unwraps
        items = list(args.items())
        if items and chance(rng, 0.04):
            items.append((items[0][0], json_value(rng)))  # a repeated name: the answer keeps the last
        for key, value in items:
            kind = rng.randrange(5)
            if isinstance(value, str) and kind < 3:
                attr, text = ' string="true"', value
            else:
                attr, text = rng.choice([' string="false"', ' string="false"', ""]), dumps(rng, value)
            close = "" if chance(rng, 0.04) else f"</{_D}{sp}parameter>"
            if not close or any(tag in text for tag in markup):
                case["malformed"] = True
            params.append(f'<{_D}{sp}parameter name="{key}"{attr}>{text}{close}' + rng.choice(["\n", "\n", ""]))
        end = "" if chance(rng, 0.04) else f"</{_D}{sp}invoke>"
        if not end:
            case["malformed"] = True
        return f'<{_D}{sp}invoke name="{name}">' + rng.choice(["\n", ""]) + "".join(params) + end

    reasoning = think_block(rng, tags=fam.tags) if case["reasoning_parser"] else ""
    lead = prose(rng, fam.tags)
    if any(tag in lead for tag in markup):
        case["malformed"] = True
    text = reasoning + lead
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        invokes = [invoke() for _ in range(rng.choice([0, 1, 1, 2, 3]))]
        if not invokes:
            case["malformed"] = True  # a block without an invoke
        if chance(rng, 0.07):
            text += rng.choice(["", "\n"]) + "\n".join(invokes)  # a bare invoke, no block
        else:
            text += (rng.choice(starts) + "\n" + "\n".join(invokes) + "\n"
                     + ("" if chance(rng, 0.1) else f"</{_D}{block}>"))
        text += rng.choice(["", "", "\n", " Done.", prose(rng, (), 3)])
    return text


def harmony_text(rng: Random, case: dict[str, Any]) -> str:
    """gpt-oss output: Harmony messages (analysis, preambles, calls on any channel, finals)."""
    out = []
    n = rng.choice([1, 1, 2, 2, 3, 4])
    for i in range(n):
        last = i == n - 1
        start = "" if i == 0 and chance(rng, 0.8) else "<|start|>assistant"
        shape = rng.randrange(10)
        if shape < 3:  # a call
            name = rng.choice(TOOL_NAMES + ["unknown_tool"])
            recipient = rng.choice([f"functions.{name}", f"functions.{name}", name, "python"])
            channel = rng.choice(["commentary", "commentary", "analysis"])
            ctype = rng.choice([" <|constrain|>json", " <|constrain|>json", " json", "", " <|constrain|>code"])
            body = dumps(rng, arguments(rng))
            if chance(rng, 0.1):
                body = text_value(rng)  # not a JSON object: once part of it streamed, no taking it back
                case["malformed"] = True
            if chance(rng, 0.07):
                body = corrupt(rng, body, ())
                case["malformed"] = True
            if chance(rng, 0.1):  # the older header: recipient before the channel
                header = f"{start or '<|start|>assistant'} to={recipient}<|channel|>{channel}{ctype.replace('<|constrain|>', '')}"
            else:
                header = f"{start}<|channel|>{channel} to={recipient}{ctype}"
            end = rng.choice(["<|call|>", "<|call|>", "<|end|>"])
        else:
            channel = rng.choice(["analysis", "analysis", "final", "final", "commentary", "secret"])
            header = f"{start}<|channel|>{channel}"
            body = prose(rng, (), 8) if chance(rng, 0.9) else spaces(rng)
            end = "<|return|>" if channel == "final" and last else "<|end|>"
        out.append(header + "<|message|>" + body + end)
        if chance(rng, 0.03):
            out.append(prose(rng, (), 2))  # junk between messages
    return "".join(out)


MINIMAX_TAGS = ("<minimax:tool_call>", "</minimax:tool_call>", "<invoke name=", "</invoke>", "<parameter name=",
                "</parameter>", "<think>", "</think>", ">", '"')


def minimax_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["minimax"]

    def invoke() -> str:
        name, quote = rng.choice(TOOL_NAMES + TOOL_NAMES + ["unknown_tool"]), rng.choice(['"', '"', "'", ""])
        params = []
        for key in rng.sample(KEYS, rng.randint(0, 3)):
            value = xml_value(rng, fam.tags)
            close = "" if chance(rng, 0.05) else "</parameter>"
            if not close or "<" in value:
                case["malformed"] = True
            pq, gap = rng.choice(['"', '"', "'", ""]), rng.choice(["", "\n"])
            params.append(f"{gap}<parameter name={pq}{key}{pq}>{value}{close}")
        end = "" if chance(rng, 0.05) else "</invoke>"
        if not end:
            case["malformed"] = True
        return f"<invoke name={quote}{name}{quote}>" + "".join(params) + rng.choice(["\n", ""]) + end

    def call() -> str:
        invokes = "\n".join(invoke() for _ in range(rng.choice([1, 1, 2])))
        return invokes if chance(rng, 0.08) else f"<minimax:tool_call>\n{invokes}\n</minimax:tool_call>"

    # (the template opens <think> in the prompt: most outputs start inside the reasoning)
    reasoning = think_block(rng, tags=fam.tags) if case["reasoning_parser"] else ""
    return reasoning + calls_with_prose(rng, case, fam, call)


# Granite 4: JSON calls between <tool_call> tags, text around them kept (granite4), Qwen3-style
# reasoning markers (granite_thinking_parser)
GRANITE4_TAGS = ("<tool_call>", "</tool_call>", "<think>", "</think>")


def granite4_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["granite4"]

    def call() -> str:
        # (any tag inside a body fails every call: vLLM's answer is then all content)
        return tool_call_json(rng, case, fam, breaking=("<tool_call>", "</tool_call>"), more_shapes=True)

    reasoning = think_block(rng, tags=fam.tags) if case["reasoning_parser"] else ""
    if reasoning and chance(rng, 0.5):
        reasoning += "\n" * rng.randint(1, 3)  # the template's newline after </think>
    body = forced_output(rng, case) or calls_with_prose(rng, case, fam, call)
    return reasoning + body


GEMMA4_Q = '<|"|>'
GEMMA4_TAGS = ("<|tool_call>", "<tool_call|>", "<|channel>", "<channel|>", GEMMA4_Q, "{", "}", ":", "call:")


def gemma4_value(rng: Random, value: Any) -> str:
    """A value in Gemma 4's call syntax: strings between `<|"|>`, the rest bare or nested."""
    if isinstance(value, str):
        return GEMMA4_Q + value + GEMMA4_Q
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{gemma4_value(rng, v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + rng.choice([",", ", "]).join(gemma4_value(rng, v) for v in value) + "]"
    return json.dumps(value)


def gemma4_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["gemma4"]

    def call() -> str:
        name = rng.choice(TOOL_NAMES + TOOL_NAMES + ["unknown_tool"])
        args = arguments(rng, fam.tags)
        if any(tag in json.dumps(args, ensure_ascii=False) for tag in fam.tags):
            case["malformed"] = True
        body = ",".join(f"{k}:{gemma4_value(rng, v)}" for k, v in args.items())
        opener, closer = ("(", ")") if chance(rng, 0.1) else ("{", "}")
        end = "" if chance(rng, 0.05) else "<tool_call|>"
        if not end:
            case["malformed"] = True
        return f"<|tool_call>{rng.choice(['call:', 'call:', 'call:', ':'])}{name}{opener}{body}{closer}{end}"

    # reasoning: `<|channel>thought\n...<channel|>`, or opened by the template (no `<|channel>`)
    shape = rng.randrange(6) if case["reasoning_parser"] or chance(rng, 0.3) else 0
    label = "thought\n" if chance(rng, 0.8) else ""
    body = label + prose(rng, fam.tags, 8)
    reasoning = ["", f"<|channel>{body}<channel|>", f"<|channel>{body}<channel|>{spaces(rng)}",
                 f"{body}<channel|>", f"<|channel>{body}", "<|channel>thought\n<channel|>"][shape]
    if shape == 4:  # never closed: calls end it, prose stays reasoning
        return reasoning + (call() if chance(rng, 0.5) else "")
    return reasoning + calls_with_prose(rng, case, fam, call)


S3_CALLS_BEGIN, S3_CALLS_END = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"
S3_CALL_BEGIN, S3_CALL_END, S3_SEP = "<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>"
STEP3_TAGS = (S3_CALLS_BEGIN, S3_CALLS_END, S3_CALL_BEGIN, S3_CALL_END, S3_SEP, '<steptml:invoke name="',
              "</steptml:parameter>", "</think>", '">')


def step3_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["step3"]

    def invoke() -> str:
        params = []
        for key in rng.sample(KEYS, rng.randint(0, 3)):
            value = xml_value(rng, fam.tags)
            close = "" if chance(rng, 0.05) else "</steptml:parameter>"
            if not close or "<" in value:
                case["malformed"] = True
            params.append(f'<steptml:parameter name="{key}">{value}{close}')
        kind = rng.choice(["code", " function\n"]) if chance(rng, 0.05) else "function"
        end = "" if chance(rng, 0.05) else S3_CALL_END
        if not end:
            case["malformed"] = True
        name = rng.choice(TOOL_NAMES + ["unknown_tool"])
        return (f'{S3_CALL_BEGIN}{kind}{S3_SEP}<steptml:invoke name="{name}">' + "".join(params)
                + "</steptml:invoke>" + end)

    def block() -> str:
        calls = rng.choice(["", "\n"]).join(invoke() for _ in range(rng.choice([1, 1, 2, 3])))
        end = "" if chance(rng, 0.05) else S3_CALLS_END
        if not end:
            case["malformed"] = True
        return S3_CALLS_BEGIN + calls + end

    # (the prompt opens the reasoning: text before `</think>` is reasoning, a `<think>` stays text)
    reasoning = think_block(rng, tags=fam.tags) if case["reasoning_parser"] else ""
    return reasoning + calls_with_prose(rng, case, fam, block)


LONGCAT_TAGS = ("<longcat_tool_call>", "</longcat_tool_call>", "<tool_call>", "</tool_call>")


def longcat_text(rng: Random, case: dict[str, Any]) -> str:
    """hermes' calls with LongCat's markers (Qwen's own `<tool_call>` is then text)."""
    fam = FAMILIES["longcat"]

    def call() -> str:
        body = tool_call_json(rng, case, fam, breaking=("</longcat_tool_call>",))
        return "<longcat_tool_call>" + body.removeprefix("<tool_call>").removesuffix("</tool_call>") + (
            "</longcat_tool_call>" if body.endswith("</tool_call>") else "")

    return forced_output(rng, case) or calls_with_prose(rng, case, fam, call)


def olmo3_text(rng: Random, case: dict[str, Any]) -> str:
    """Reasoning in text tags (a `<think>` after the start, a second `</think>` now and then)."""
    fam = FAMILIES["olmo3"]
    text = think_block(rng, tags=fam.tags) + prose(rng, fam.tags, 10)
    if chance(rng, 0.1):
        text += "</think>" + prose(rng, fam.tags, 3)
    return text


OLMO3_TAGS = ("<function_calls>", "</function_calls>", "</think>", "\n", ")", "(")


def olmo3_tools_text(rng: Random, case: dict[str, Any]) -> str:
    """Olmo 3's tool calls: newline-separated pythonic calls in `<function_calls>` (or without it)."""
    fam = FAMILIES["olmo3_tools"]

    def call() -> str:
        name = rng.choice(TOOL_NAMES + TOOL_NAMES + ["unknown_tool", "functions.ping"])
        keys = rng.sample(KEYS, rng.randint(0, 3))
        args = ", ".join(f"{k}={python_literal(rng, json_value(rng, fam.tags))}" for k in keys)
        if chance(rng, 0.05):
            args = rng.choice(["1", "x", "city=str(1)", "city='open"]) + (", " + args if args else "")
            case["malformed"] = True
        return f"{name}({args})"

    def lines() -> str:
        return "\n".join(", ".join(call() for _ in range(rng.choice([1, 1, 1, 2])))
                         for _ in range(rng.choice([1, 1, 2, 3])))

    reasoning = think_block(rng, tags=fam.tags) if case["reasoning_parser"] else ""
    forced = forced_output(rng, case)
    if forced is not None:
        return reasoning + forced
    shape = rng.randrange(10)
    if shape < 6:
        closing = "" if chance(rng, 0.05) else "\n</function_calls>"
        before = prose(rng, fam.tags) + "\n" if chance(rng, 0.3) else spaces(rng)
        after = rng.choice(["", "", "\n" + prose(rng, fam.tags, 3)])
        return reasoning + before + "<function_calls>\n" + lines() + closing + after
    if shape < 8:
        return reasoning + spaces(rng) + lines() + rng.choice(["", "\n", "\n" + prose(rng, (), 2)])
    return reasoning + prose(rng, fam.tags, 10)


# ERNIE 4.5: Qwen3's think and tool-call markers, the answer in <response> ... </response> or calls
ERNIE45_TAGS = ("<tool_call>", "</tool_call>", "<think>", "</think>")


def ernie45_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["ernie45"]

    def call() -> str:
        return tool_call_json(rng, case, fam, breaking=("</tool_call>", "<tool_call>"), more_shapes=True)

    reasoning = think_block(rng, tags=fam.tags) if case["reasoning_parser"] else ""
    if reasoning and chance(rng, 0.5):
        reasoning += "\n" * rng.randint(1, 3)
    if chance(rng, 0.35):  # an answer wrapped as the template writes it, sometimes cut off
        answer = "<response>\n" + prose(rng, fam.tags) + ("" if chance(rng, 0.1) else "\n</response>\n")
        return reasoning + answer
    return reasoning + (forced_output(rng, case) or calls_with_prose(rng, case, fam, call))


# Hunyuan A13B: text markers around the reasoning and the answer, a JSON list of calls
HUNYUAN_TAGS = ("<tool_calls>", "</tool_calls>", "<answer>", "</think>", "[", "]")


def hunyuan_a13b_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["hunyuan_a13b"]

    def block() -> str:
        calls: list[Any] = [{"name": rng.choice(TOOL_NAMES + ["unknown_tool"]), "arguments": arguments(rng, fam.tags)}
                            for _ in range(rng.choice([1, 1, 2, 3]))]
        if chance(rng, 0.1):
            calls[0] = rng.choice([{"name": "ping"}, {"name": 3, "arguments": {}}, {"name": "ping", "arguments": [1]}])
        body = dumps(rng, calls)
        if "</tool_calls>" in body:
            case["malformed"] = True
        closing = "" if chance(rng, 0.05) else "</tool_calls>"
        return "<tool_calls>" + rng.choice(["", "\n"]) + body + closing

    shape = rng.randrange(5)
    reasoning = ["", "<think>\n" + prose(rng, fam.tags, 8) + "\n</think>\n<answer>\n",
                 "<think>\n" + prose(rng, fam.tags, 8) + "\n</think>\n<answer>\n",
                 "<think>\n\n</think>\n<answer>\n", "<think>\n" + prose(rng, fam.tags, 8)][shape]
    if shape == 4:  # cut off in the reasoning
        return reasoning
    forced = forced_output(rng, case)
    if forced:  # (structured outputs write the JSON alone)
        return forced
    answer = calls_with_prose(rng, case, fam, block)
    return reasoning + answer + ("" if chance(rng, 0.2) else "\n</answer>" + rng.choice(["", "\n", " tail"]))


M3_NS = "]<]minimax[>["
MINIMAX_M3_TAGS = (f"{M3_NS}<tool_call>", f"{M3_NS}</tool_call>", f"{M3_NS}<invoke name=", f"{M3_NS}</invoke>",
                   f"{M3_NS}<city>", f"{M3_NS}</item>", M3_NS, "<mm:think>", "</mm:think>", '">', ">")


def minimax_m3_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["minimax_m3"]

    def element(key: str, depth: int) -> str:
        if depth < 2 and chance(rng, 0.25):  # nested: an object's fields or a list's items
            child = rng.choice(["item", "item", "year", "x"])
            body = "".join(element(child, depth + 1) for _ in range(rng.randint(0, 3)))
            if chance(rng, 0.1):
                body = rng.choice(["loose ", "\n"]) + body
        else:
            body = xml_value(rng, fam.tags)
            if M3_NS in body:
                case["malformed"] = True
        close = "" if chance(rng, 0.05) else f"{M3_NS}</{key}>"
        if not close:
            case["malformed"] = True
        return f"{M3_NS}<{key}>{body}{close}"

    def invoke() -> str:
        name, quote = rng.choice(TOOL_NAMES + TOOL_NAMES + ["unknown_tool"]), rng.choice(['"', '"', "'", ""])
        params = rng.choice(["\n", ""]).join(element(key, 0) for key in rng.sample(KEYS, rng.randint(0, 3)))
        end = "" if chance(rng, 0.05) else f"\n{M3_NS}</invoke>"
        if not end:
            case["malformed"] = True
        return f"{M3_NS}<invoke name={quote}{name}{quote}>\n" + params + end

    def call() -> str:
        invokes = "\n".join(invoke() for _ in range(rng.choice([1, 1, 2])))
        return invokes if chance(rng, 0.08) else f"{M3_NS}<tool_call>\n{invokes}\n{M3_NS}</tool_call>"

    reasoning = think_block(rng, "<mm:think>", "</mm:think>", fam.tags) if case["reasoning_parser"] else ""
    return reasoning + calls_with_prose(rng, case, fam, call)


K3_O, K3_C, K3_S = "<|open|>", "<|close|>", "<|sep|>"
K3_TAGS = (K3_O, K3_C, K3_S, f"{K3_O}response{K3_S}", f"{K3_C}response{K3_S}", f"{K3_O}think{K3_S}",
           f"{K3_C}think{K3_S}", f"{K3_O}tools{K3_S}", f"{K3_C}argument{K3_S}", f"{K3_C}message{K3_S}")
K3_TYPES = ("string", "string", "number", "boolean", "null", "object", "array", "")


def kimi_k3_text(rng: Random, case: dict[str, Any]) -> str:
    """Kimi K3 XTML: a think channel (the prompt may have opened it), a response channel (its open
    may be the prompt's), a tools channel of typed `argument` blocks, the message close."""
    fam = FAMILIES["kimi_k3"]

    def el(name: str, body: str, attrs: str = "", close: bool = True) -> str:
        head = f"{K3_O}{name} {attrs}{K3_S}" if attrs else f"{K3_O}{name}{rng.choice(['', '', ' '])}{K3_S}"
        return head + body + (f"{K3_C}{name}{K3_S}" if close else "")

    def argument() -> str:
        kind = rng.choice(K3_TYPES)
        value = text_value(rng, fam.tags) if kind == "string" else dumps(rng, json_value(rng))
        if chance(rng, 0.05):
            value = prose(rng, (), 2)  # not JSON
        attrs = f'key="{rng.choice(KEYS)}"' + (f' type="{kind}"' if kind else "")
        return el("argument", value, attrs)

    def call(i: int) -> str:
        name = rng.choice(TOOL_NAMES + ["unknown_tool", 'a&quot;b', ""])
        attrs = (f'tool="{name}" ' if name or chance(rng, 0.5) else "") + f'index="{i}"'
        return el("call", "".join(argument() for _ in range(rng.randint(0, 3))), attrs) + spaces(rng) * chance(rng, 0.2)

    out = ""
    shape = rng.randrange(6)
    body = prose(rng, fam.tags, 8)
    if shape == 1:
        out += el("think", body) + spaces(rng) * chance(rng, 0.3)
    elif shape == 2:
        out += body + f"{K3_C}think{K3_S}"  # opened by the prompt
    elif shape == 3:
        out += el("think", body, close=False)
    elif shape == 4:
        out += el("think", "")
    shape = rng.randrange(5)
    body = prose(rng, fam.tags) if chance(rng, 0.8) else spaces(rng)
    if shape == 1:
        out += el("response", body)
    elif shape == 2:
        out += body + f"{K3_C}response{K3_S}"  # opened by the prompt
    elif shape == 3:
        out += body
    elif shape == 4:
        out += el("response", body, close=False)
    calls = [call(i + 1) for i in range(rng.choice([0, 0, 1, 1, 2, 3]))]
    if calls:
        section = el("tools", "".join(calls), close=not chance(rng, 0.1))
        if chance(rng, 0.1):
            section = corrupt(rng, section, fam.tags)
            case["malformed"] = True
        out += section
    if chance(rng, 0.1):
        out += prose(rng, fam.tags, 3)
        case["malformed"] = True
    if chance(rng, 0.5):
        out += f"{K3_C}message{K3_S}"
    return out


# K2 Horizon: `<ifm|...>` tags (added tokens, not special); the think tags by reasoning_effort, the
# call bodies in the template's tool_call_format (xml, xml_typed, json)
K2_THINK = {"high": ("<ifm|think>", "</ifm|think>"), "medium": ("<ifm|think_fast>", "</ifm|think_fast>"),
            "low": ("<ifm|think_faster>", "</ifm|think_faster>")}
K2_TAGS = ("<ifm|tool_calls>", "</ifm|tool_calls>", "<ifm|tool_call>", "</ifm|tool_call>", "<ifm|arg_key>",
           "</ifm|arg_key>", "<ifm|arg_value>", "</ifm|arg_value>", "<ifm|arg_type>", "<ifm|think>", "</ifm|think>")
K2_TYPES = ("string", "integer", "number", "boolean", "object", "array", "null", "any", "array[string]", "int", "")


def k2_horizon_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES["k2_horizon"]
    kwargs = case["chat_template_kwargs"]
    fmt = kwargs.get("tool_call_format", "xml")  # (what the template asked the model to write)
    start, end = K2_THINK[kwargs.get("reasoning_effort", "high")]

    def call() -> str:
        name = rng.choice(TOOL_NAMES + TOOL_NAMES + ["unknown_tool", "get weather"])
        if fmt == "json":
            obj: dict[str, Any] = {"name": name, "arguments": arguments(rng, fam.tags)}
            if chance(rng, 0.1):
                obj = rng.choice([{"name": name}, {"arguments": {}, "name": name}, {"name": name, "arguments": "{}"}])
            body = rng.choice(["", " ", "\n"]) + dumps(rng, obj)
        else:
            sep = rng.choice(["", "", "\n"])
            pairs = []
            for key in rng.sample(KEYS, rng.randint(0, 3)):
                kind = rng.choice(K2_TYPES)
                typed = f"<ifm|arg_type>{kind}</ifm|arg_type>{sep}" if (fmt == "xml_typed") != chance(rng, 0.05) else ""
                pairs.append(f"<ifm|arg_key>{key}</ifm|arg_key>{sep}{typed}<ifm|arg_value>{xml_value(rng, fam.tags)}"
                             "</ifm|arg_value>")
            body = name + sep + sep.join(pairs)
        close = "" if chance(rng, 0.05) else "</ifm|tool_call>"
        if not close or any(tag in body for tag in K2_TAGS[:4]):
            case["malformed"] = True
        return "<ifm|tool_call>" + body + close

    def group() -> str:
        sep = rng.choice(["\n", "", " \n"])
        closing = "" if chance(rng, 0.05) else "</ifm|tool_calls>"
        if not closing:
            case["malformed"] = True
        return "<ifm|tool_calls>" + sep + sep.join(call() for _ in range(rng.choice([1, 1, 2, 3]))) + sep + closing

    reasoning = think_block(rng, start, end, fam.tags) if case["reasoning_parser"] else ""
    return reasoning + calls_with_prose(rng, case, fam, group)


QWEN_PROMPTS = (None, None, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
                "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
SEED_PROMPTS = (None, None, "<seed:bos>user\nhi<seed:eos><seed:bos>assistant\n",
                "<seed:bos>user\nhi<seed:eos><seed:bos>assistant\n<seed:think></seed:think>",
                "<seed:bos>assistant\n<seed:think>a</seed:think>b<seed:eos><seed:bos>user\nhi<seed:eos>"
                "<seed:bos>assistant\n")
GEMMA4_PROMPTS = (None, None, "<|turn>user\nhi<turn|>\n<|turn>model\n",
                  "<|turn>user\nhi<turn|>\n<|turn>model\n<|channel>thought\n")

GRANITE4_PROMPTS = (None, None, ("<|start_of_role|>user<|end_of_role|>hi<|end_of_text|>\n"
                                 "<|start_of_role|>assistant<|end_of_role|>"),
                    "<|im_start|>assistant\n<think>\n</think>\n")

# The single-block JSON families: phi4_mini_json (`functools[...]`), internlm (one
# `<|action_start|><|plugin|>{...}<|action_end|>`), jamba (`<tool_calls>[...]</tool_calls>`)
BLOCKS = {"phi4_mini_json": ("functools[", "]"), "internlm": ("<|action_start|><|plugin|>", "<|action_end|>"),
          "jamba": ("<tool_calls>", "</tool_calls>")}


def json_block_call(rng: Random, case: dict[str, Any], fam: Family) -> dict[str, Any]:
    obj: dict[str, Any] = {"name": rng.choice(TOOL_NAMES + ["unknown_tool"]), "arguments": arguments(rng, fam.tags)}
    shape = rng.randrange(10)
    if shape == 0:
        obj = {"arguments": obj["arguments"], "name": obj["name"]}
    elif shape == 1:
        obj = {"name": obj["name"], "parameters": obj["arguments"]}  # (jamba: not a call)
        case["malformed"] = case["malformed"] or fam.name == "jamba"
    elif shape == 2:
        obj["arguments"] = json_value(rng, fam.tags)
    return obj


def json_block_text(rng: Random, case: dict[str, Any]) -> str:
    fam = FAMILIES[case["family"]]
    start, end = BLOCKS[fam.name]
    forced = forced_output(rng, case)
    if forced is not None:
        return forced
    before = prose(rng, fam.tags) if chance(rng, 0.5) else spaces(rng)
    if chance(rng, 0.2):
        return before
    calls = [json_block_call(rng, case, fam) for _ in range(1 if fam.name == "internlm" else rng.choice([1, 1, 2, 3]))]
    body = dumps(rng, calls[0]) if fam.name == "internlm" else dumps(rng, calls)
    if fam.name == "phi4_mini_json":
        body = body[1:-1]  # (functools[ ... ] is the list's own brackets)
    if chance(rng, 0.1):
        body = corrupt(rng, body, fam.tags)
        case["malformed"] = True
    closing = "" if chance(rng, 0.05) else end
    # a marker (phi4: any `]`) inside the body ends it early; an unclosed block is all content
    if any(t in body for t in fam.tags) or not closing:
        case["malformed"] = True
    after = rng.choice(["", "", spaces(rng), prose(rng, fam.tags, 3)])
    if fam.name == "internlm" and chance(rng, 0.05):
        after += start + dumps(rng, json_block_call(rng, case, fam)) + end  # a second action: vLLM raises
        case["malformed"] = True
    if "<|action_start|>" in after or start in before:
        case["malformed"] = True  # (internlm: a second marker after the call makes vLLM raise)
    return before + start + rng.choice(["", "\n", " "]) + body + rng.choice(["", "\n"]) + closing + after


FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("hermes", "qwen3", ("hermes", "qwen3_json"), ("qwen3", "qwen3", None, "deepseek_r1"), hermes_text,
           tags=("<tool_call>", "</tool_call>", "<think>", "</think>"),
           kwargs=({}, {}, {"enable_thinking": False}), prompts=QWEN_PROMPTS),
    # classic parsers leave skip_special_tokens on: their text never carries special tokens
    Family("llama3_json", "llama3", ("llama3_json", "llama4_json"), (None,), llama_text,
           tags=("<|python_tag|>", "{", "}"), specials=()),
    Family("pythonic", "llama3", ("pythonic", "llama4_pythonic"), (None,), pythonic_text,
           tags=("[", "]", "(", ")", "<|python_end|>"), specials=()),
    Family("qwen3_xml", "qwen3", ("qwen3_xml", "qwen3_coder"), ("qwen3", None, "deepseek_r1"), qwen3_xml_text,
           tags=("<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>",
                 "<think>", "</think>", ">"),
           kwargs=({}, {}, {"enable_thinking": False}), prompts=QWEN_PROMPTS),
    Family("glm45", "qwen3", ("glm45", "glm47"), ("glm45", None), glm45_text,
           tags=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
                 "<think>", "</think>"),
           kwargs=({}, {}, {"enable_thinking": False})),
    Family("deepseek_v3", "deepseek", ("deepseek_v3",), ("deepseek_v3", "deepseek_r1", None), deepseek_text,
           tags=(DS_BEGIN, DS_CALL, DS_SEP, DS_CALL_END, "```", "<think>", "</think>"), specials=(),
           kwargs=({"thinking": True}, {})),
    Family("deepseek_v31", "deepseek", ("deepseek_v31",), ("deepseek_v3", "deepseek_r1", None), deepseek_text,
           tags=(DS_BEGIN, DS_CALL, DS_SEP, DS_CALL_END, "<think>", "</think>"), specials=(),
           kwargs=({"thinking": True}, {})),
    Family("kimi_k2", "kimi", ("kimi_k2",), ("kimi_k2", None), kimi_text,
           tags=(KIMI_SECTION, KIMI_CALL, KIMI_ARGS, KIMI_CALL_END, "<think>", "</think>"),
           kwargs=({}, {}, {"thinking": False})),
    Family("mistral", "mistral13", ("mistral",), ("mistral", None), mistral_text,
           tags=("[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]", "{", "}")),
    Family("mistral_v11", "mistral11", ("mistral",), ("mistral", None), mistral_text,
           tags=("[TOOL_CALLS]", "[ARGS]", "{", "}")),
    Family("mistral_legacy", "mistral3", ("mistral",), ("mistral", None), mistral_text,
           tags=("[TOOL_CALLS]", "[", "]", "{", "}")),
    Family("granite", "qwen3", (None, "hermes"), ("granite",), granite_text, specials=()),
    # the frontier families (issue 17)
    Family("step3p5", "qwen3", ("step3p5", "step3p5", None), ("step3p5",), qwen3_xml_text,
           tags=("<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>",
                 "<think>", "</think>", ">"),
           kwargs=({}, {"enable_thinking": False}), prompts=QWEN_PROMPTS),
    Family("nemotron_v3", "qwen3", ("qwen3_coder", "qwen3_coder", None), ("nemotron_v3",), qwen3_xml_text,
           tags=("<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>",
                 "<think>", "</think>", ">"),
           kwargs=({}, {}, {"enable_thinking": False}, {"force_nonempty_content": True}), prompts=QWEN_PROMPTS),
    Family("seed_oss", "seed_oss", ("seed_oss", "seed_oss", None), ("seed_oss", "seed_oss", None), seed_oss_text,
           tags=("<seed:tool_call>", "</seed:tool_call>", "<function=", "</function>", "<parameter=", "</parameter>",
                 "<seed:think>", "</seed:think>", ">"),
           specials=("<|endoftext|>", "<seed:eos>", "<seed:bos>", "<|box_start|>"),
           kwargs=({}, {}, {"enable_thinking": False}, {"thinking_budget": 0}), prompts=SEED_PROMPTS),
    Family("granite4", "granite4", ("granite4", "granite4", None), ("granite_thinking_parser", "granite_thinking_parser",
                                                                   None), granite4_text, tags=GRANITE4_TAGS,
           specials=("<|endoftext|>", "<|end_of_text|>", "<|start_of_role|>", "<|im_end|>"),
           kwargs=({}, {}, {"enable_thinking": False}, {"force_nonempty_content": True}), prompts=GRANITE4_PROMPTS),
    Family("dsml_v32", "deepseek_v32", ("deepseek_v32",), ("deepseek_v3", "deepseek_v3", None), dsml_text,
           tags=dsml_tags("dsml_v32"), specials=("<｜begin▁of▁sentence｜>",), kwargs=({"thinking": True}, {})),
    Family("dsml_v4", "deepseek_v4", ("deepseek_v4",), ("deepseek_v4", "deepseek_v4", None), dsml_text,
           tags=dsml_tags("dsml_v4"), specials=("<｜begin▁of▁sentence｜>",),
           kwargs=({}, {}, {"thinking": False}, {"reasoning_effort": "none"})),
    Family("dsml_v41", "deepseek_v41", ("deepseek_v41",), ("deepseek_v41", "deepseek_v41", None), dsml_text,
           tags=dsml_tags("dsml_v41"), specials=("<｜begin▁of▁sentence｜>",), kwargs=({}, {}, {"thinking": False})),
    Family("minimax", "minimax", ("minimax_m2", "minimax_m2", None),
           ("minimax_m2", "minimax_m2", "minimax_m2_append_think", None), minimax_text, tags=MINIMAX_TAGS),
    Family("gemma4", "gemma4", ("gemma4", "gemma4", None), ("gemma4", "gemma4", None), gemma4_text,
           tags=GEMMA4_TAGS, specials=("<|endoftext|>", "<|turn>", "<turn|>", "<|tool_response>", "<|im_end|>"),
           kwargs=({}, {}, {"enable_thinking": True}), prompts=GEMMA4_PROMPTS),
    Family("step3", "step3", ("step3", "step3", None), ("step3", "step3", None), step3_text, tags=STEP3_TAGS),
    Family("minimax_m3", "minimax_m3", ("minimax_m3", "minimax_m3", None), ("minimax_m3", "minimax_m3", None),
           minimax_m3_text, tags=MINIMAX_M3_TAGS, kwargs=({}, {"thinking_mode": "enabled"})),
    Family("kimi_k3", "kimi_k3", ("kimi_k3", "kimi_k3", None), ("kimi_k3", "kimi_k3", None), kimi_k3_text,
           tags=K3_TAGS, kwargs=({}, {}, {"thinking": False}, {"enable_thinking": False})),
    Family("phi4_mini_json", "qwen3", ("phi4_mini_json",), (None,), json_block_text, tags=("functools[", "]")),
    Family("internlm", "internlm", ("internlm",), (None,), json_block_text,
           tags=("<|action_start|><|plugin|>", "<|action_end|>", "<|action_start|>", "<|plugin|>")),
    Family("jamba", "jamba", ("jamba",), (None,), json_block_text, tags=("<tool_calls>", "</tool_calls>")),
    Family("longcat", "longcat", ("longcat", "longcat", None), (None,), longcat_text, tags=LONGCAT_TAGS),
    Family("olmo3", "olmo3", (None,), ("olmo3",), olmo3_text, tags=("<think>", "</think>", "<", "</")),
    Family("olmo3_tools", "olmo3", ("olmo3",), ("olmo3", None, None), olmo3_tools_text, tags=OLMO3_TAGS),
    Family("ernie45", "ernie45", ("ernie45", "ernie45", None), ("ernie45", "ernie45", None), ernie45_text,
           tags=ERNIE45_TAGS),
    Family("hunyuan_a13b", "qwen3", ("hunyuan_a13b", "hunyuan_a13b", None), ("hunyuan_a13b", "hunyuan_a13b", None),
           hunyuan_a13b_text, tags=HUNYUAN_TAGS),
    Family("k2_horizon", "k2_horizon", ("k2_horizon", "k2_horizon", None), ("k2_horizon", "k2_horizon", None),
           k2_horizon_text, tags=K2_TAGS, specials=("<|ifm|endoftext|>", "<|ifm|im_start|>", "<|endoftext|>"),
           kwargs=({}, {}, {"tool_call_format": "json"}, {"tool_call_format": "xml_typed"},
                   {"reasoning_effort": "medium"}, {"reasoning_effort": "low", "tool_call_format": "json"})),
    Family("harmony", "gptoss", ("openai", "openai", None), ("openai_gptoss",), harmony_text,
           specials=("<|startoftext|>",)),
]}


def request_for(rng: Random) -> dict[str, Any]:
    if chance(rng, 0.07):
        return {}
    request: dict[str, Any] = {"tools": TOOLS}
    kind = rng.randrange(10)
    if kind == 0:
        request["tool_choice"] = "none"
    elif kind == 1:
        request["tool_choice"] = "required"
    elif kind == 2:
        request["tool_choice"] = {"type": "function", "function": {"name": rng.choice(TOOL_NAMES)}}
    elif kind == 3:
        request["tool_choice"] = "auto"
    if chance(rng, 0.1):
        request["parallel_tool_calls"] = False
    if chance(rng, 0.1):
        request["include_reasoning"] = False
    return request


def make_case(family: str, rng: Random) -> dict[str, Any]:
    fam = FAMILIES[family]
    case: dict[str, Any] = {
        "family": family, "tokenizer": fam.tokenizer, "tool_parser": rng.choice(fam.tool_parsers),
        "reasoning_parser": rng.choice(fam.reasoning_parsers), "request": request_for(rng),
        "chat_template_kwargs": dict(rng.choice(fam.kwargs)), "enable_auto_tools": not chance(rng, 0.05),
        "prompt_text": rng.choice(fam.prompts), "malformed": False,
    }
    case["text"] = finish_text(rng, case, fam, fam.make_text(rng, case))
    # the kwargs also in the request, as a client sends them (not a server default), 7 times in 10;
    # decided by the text, not `rng`, so the other families' cases and chunkings stay as recorded
    if case["chat_template_kwargs"] and zlib.crc32(case["text"].encode("utf-8", "surrogatepass")) % 10 < 7:
        case["request"]["chat_template_kwargs"] = dict(case["chat_template_kwargs"])
    return case
