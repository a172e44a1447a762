"""gpt-oss output (Harmony): `--reasoning-parser openai_gptoss` and `--tool-call-parser openai`.

A gpt-oss answer is a sequence of Harmony messages, parsed on token ids (never on text):

    <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>commentary to=functions.f
    <|constrain|>json<|message|>{"a":1}<|call|>     or     ...<|channel|>final<|message|>...<|return|>

vLLM 0.33 (`vllm.parser.harmony.HarmonyParser` over openai-harmony's `StreamableParser`) makes the
analysis channel reasoning, the final channel and recipient-less commentary (preambles) content,
and a message to a function recipient (`functions.NAME`, or any bare name that is not a builtin
tool) a tool call on any channel. Its non-streaming answer joins the texts of several messages of
one kind with "\\n" and re-serializes JSON arguments with `json.dumps(json.loads(text))`; its stream
concatenates the deltas and sends the arguments raw. Ours streams what the non-streaming answer
says: "\\n" between messages, arguments in the `json.dumps` form as they are generated
(`jsonstream`, then every non-ASCII character escaped as json.dumps' default ensure_ascii does).

`HarmonyMachine` is our own incremental parser: the same state machine as openai-harmony's
(header tokens until `<|message|>`, the header grammar, the content's UTF-8 assembly with one
replacement character per token and the end-of-message tail, the recovery text when the output
ends inside a header), its progress in a small JSON dict so it can travel in `stream_state`.
Work per token is O(1); the state holds the current header (at most `MAX_HEADER_TOKENS`), the
tokens vLLM would decode as recovery text (at most `MAX_RECOVERY_TOKENS`), a partial UTF-8
sequence and, for a call's arguments, the JSON scanner's state.

How the two flags share one grammar through the chat pipeline (which calls the reasoning parser,
then the tool parser with the reasoning parser's content): each runs the machine on the token ids
in its own state, the reasoning parser for reasoning and content, the tool parser (a `unified`
family, fed on every step) for the calls; the content passes through it unchanged, with none of
the pipeline's generic content rules (as vLLM's Harmony path). `openai` without `openai_gptoss`
is refused at start-up (`check_flags`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.parsers.base import ReasoningParser, State, ToolCallDelta, ToolParser
from core.parsers.jsonstream import JsonScanner, new_state

# openai-harmony's HARMONY_GPT_OSS encoding: its special tokens and what they decode to
FIRST_SPECIAL, VOCAB_END = 199998, 201088
SPECIAL_NAMES = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>",
                 200003: "<|constrain|>", 200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>",
                 200008: "<|message|>", 200012: "<|call|>"}
START, MESSAGE = 200006, 200008
STOP_TOKENS = frozenset((200002, 200007, 200012))  # end a message's content
CHANNEL_MARK, CONSTRAIN_MARK = "<|channel|>", "<|constrain|>"
ROLES = ("user", "assistant", "system", "developer", "tool")
BUILTIN_TOOLS = frozenset(("python", "browser", "container"))  # vLLM: never function calls
REPLACEMENT = "\ufffd"

MAX_HEADER_TOKENS = 1024  # a longer header is treated as malformed
MAX_RECOVERY_TOKENS = 2048  # recovery text past this many tokens is cut
MAX_PENDING_BYTES = 64  # invalid UTF-8 kept waiting past this is flushed lossily
MAX_RAW_HOLD = 1024  # raw argument text kept until the first canonical fragment goes out


def special_text(token_id: int) -> str:
    return SPECIAL_NAMES.get(token_id) or f"<|reserved_{token_id}|>"


def _byte_decoder() -> dict[str, int]:
    """The inverse of byte-level BPE's byte -> printable character table (GPT-2's)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


_BYTE_DECODER = _byte_decoder()


def token_bytes(tokenizer: Any, token_id: int) -> bytes | None:
    """The bytes openai-harmony decodes `token_id` to (None: not a token of its encoding)."""
    if token_id >= FIRST_SPECIAL:
        return special_text(token_id).encode() if token_id < VOCAB_END else None
    cache = getattr(tokenizer, "_harmony_bytes", None)
    if cache is None:
        cache = tokenizer._harmony_bytes = {}
    found = cache.get(token_id)
    if found is None:
        piece = tokenizer.id_to_token(token_id) if token_id >= 0 else None
        if piece is None:
            return None
        try:
            found = bytes(_BYTE_DECODER[ch] for ch in piece)
        except KeyError:  # not a byte-level piece: the tokenizer is not gpt-oss's
            found = piece.encode()
        cache[token_id] = found
    return found


# -- the header grammar (openai-harmony's parse_header_from_string) ----------------------------


def parse_header(text: str, assistant_role: bool) -> dict[str, Any] | None:
    """{role, channel, recipient, content_type} of a header, or None where openai-harmony errs."""
    channel = None
    at = text.find(CHANNEL_MARK)
    while at != -1:
        # the first marker's value is the channel (it may not be empty); later markers are
        # removed with their values, as openai-harmony does
        after = text[at + len(CHANNEL_MARK):]
        end = next((i for i, ch in enumerate(after) if ch.isspace() or ch == "<"), len(after))
        if channel is None:
            if end == 0:
                return None
            channel = after[:end]
        text = text[:at] + after[end:]
        at = text.find(CHANNEL_MARK, at)
    text = text.strip()
    if CONSTRAIN_MARK in text:
        text = text.replace(CONSTRAIN_MARK, " " + CONSTRAIN_MARK).strip()
    parts = _ascii_split(text)
    if assistant_role:
        role = "assistant"
    else:
        if not parts:
            return None
        role = parts[0]
        if role not in ROLES:
            if len(parts) > 1 or parts[0].startswith("to="):
                parts.pop(0)
                role = "tool"
            else:
                return None
    if parts and parts[0] == role:
        parts.pop(0)
    recipient = content_type = None
    if parts:
        count = len(parts)
        last = parts.pop()
        if last.startswith("to="):
            recipient = last[3:]
        elif count == 1:
            recipient = last
        else:
            content_type = last
            if parts:
                raw = parts.pop()
                recipient = raw[3:] if raw.startswith("to=") else raw
    if parts:  # "unexpected tokens remaining in message header"
        return None
    return {"role": role, "channel": channel, "recipient": _normalize_recipient(recipient),
            "content_type": content_type}


_ASCII_WS = " \t\n\x0c\r"


def _ascii_split(text: str) -> list[str]:
    # Rust's split_ascii_whitespace: only ASCII whitespace separates
    out, cur = [], []
    for ch in text:
        if ch in _ASCII_WS:
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _normalize_recipient(recipient: str | None) -> str | None:
    """vLLM drops a constrained format that an older Harmony read into the recipient."""
    if recipient is None:
        return None
    at = recipient.find(CONSTRAIN_MARK)
    return recipient if at == -1 else (recipient[:at].rstrip() or None)


def is_function_recipient(recipient: str | None) -> bool:
    if not recipient or recipient.startswith("<|"):
        return False
    if recipient.startswith("functions."):
        return len(recipient) > len("functions.")
    if recipient == "assistant" or recipient in BUILTIN_TOOLS:
        return False
    return recipient.split(".", 1)[0] not in BUILTIN_TOOLS


def message_kind(header: dict[str, Any]) -> str:
    """"t" tool call, "r" reasoning, "c" content, "i" ignored (vLLM's _SegmentType)."""
    if header["role"] != "assistant":
        return "i"  # vLLM's non-streaming answer skips other authors
    recipient, channel = header["recipient"], header["channel"]
    if recipient and is_function_recipient(recipient):
        return "t"
    if channel == "analysis":
        return "r"
    if channel == "final" or (channel == "commentary" and recipient is None):
        return "c"
    return "i"


# -- JSON arguments in json.dumps' default (ASCII) form --------------------------------------


def ascii_escape(text: str) -> str:
    """Non-ASCII characters of canonical JSON text as json.dumps(ensure_ascii=True) writes them."""
    if text.isascii():
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x80:
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
    return "".join(out)


def canonical_arguments(text: str, content_type: str | None) -> str:
    """vLLM's non-streaming arguments: json.dumps(json.loads(text)) for JSON, else the text."""
    if content_type is not None and "json" not in content_type:
        return text
    try:
        return json.dumps(json.loads(text))
    except (ValueError, RecursionError):
        return text


class _Arguments:
    """Streams one call's arguments in canonical form, falling back to raw text on invalid JSON.

    State (in the message state): "js" the scanner state (None once raw), "hold" the raw text
    kept until the first canonical fragment is out (so text that is not JSON at all still comes
    out exactly as the non-streaming answer has it), "out" whether a fragment went out.
    """

    @staticmethod
    def start(json_typed: bool) -> dict[str, Any]:
        if not json_typed:
            return {"js": None, "hold": None, "out": True}
        js = new_state(1)
        JsonScanner(js).feed('{"a":')  # capture the value of "a": the whole arguments text
        return {"js": js, "hold": "", "out": False}

    @staticmethod
    def feed(a: dict[str, Any], text: str) -> str:
        js = a["js"]
        if js is None:
            return text
        scanner = JsonScanner(js)
        used = scanner.feed(text)
        frags = "".join(ev[2] for ev in scanner.events if ev[0] == "frag")
        if js["err"]:
            return _Arguments._fall_back(a, text, used, frags)
        if not a["out"]:
            if frags:
                a["out"], a["hold"] = True, None
            elif a["hold"] is not None:
                a["hold"] = a["hold"] + text if len(a["hold"]) + len(text) <= MAX_RAW_HOLD else None
        return ascii_escape(frags)

    @staticmethod
    def _fall_back(a: dict[str, Any], text: str, used: int, frags: str) -> str:
        a["js"] = None
        if not a["out"] and a["hold"] is not None:
            a["out"] = True
            return a["hold"] + text  # nothing canonical went out: the raw text is exact
        a["out"] = True
        # canonical text already went out and cannot be taken back: the rest goes raw
        return ascii_escape(frags) + text[used:]

    @staticmethod
    def finish(a: dict[str, Any]) -> str:
        js = a["js"]
        if js is None:
            return ""
        scanner = JsonScanner(js)
        scanner.feed("}")
        frags = "".join(ev[2] for ev in scanner.events if ev[0] == "frag")
        if js["err"] or not js["done"]:
            a["js"] = None
            if not a["out"] and a["hold"] is not None:
                return a["hold"]  # e.g. only whitespace, or a lone "tru": vLLM returns it raw
            return ""  # cut-off or broken JSON after canonical text went out (see the module doc)
        return ascii_escape(frags)


# -- the machine ---------------------------------------------------------------------------


def new_machine() -> State:
    # m: 0 expect <|start|>, 1 header, 2 content; ar: the next header's role is assistant (first
    # message); hd/ho: header ids / overflow; rt/ro: ids vLLM would decode as recovery text;
    # msg: the current message (kind k, content type, pending bytes, bad token, text seen, args);
    # seen: kinds that already had text (the "\n" joins); nt: tool calls so far
    return {"m": 1, "ar": True, "hd": [], "ho": False, "rt": [], "ro": False, "msg": None,
            "seen": "", "nt": 0}


class HarmonyMachine:
    """Drives a machine state over token ids; emits ("r"|"c", text) and tool-call deltas."""

    __slots__ = ("tokenizer", "tools", "reasoning", "exact", "s", "out", "calls")

    def __init__(self, tokenizer: Any, state: State, *, tools: bool, reasoning: bool, exact: bool = False) -> None:
        self.tokenizer = tokenizer
        self.tools = tools  # tool messages become calls (a tool parser is configured)
        self.reasoning = reasoning  # analysis messages become reasoning
        # non-streaming: a call's raw arguments are kept and re-serialized once complete (vLLM's
        # exact rule, also for invalid JSON); streaming sends them canonical as they come
        self.exact = exact
        self.s = state
        self.out: list[tuple[str, str]] = []
        self.calls: list[ToolCallDelta] = []

    # -- output ----------------------------------------------------------------------------

    def _text(self, msg: dict[str, Any], text: str) -> None:
        if not text:
            return
        kind = msg["k"]
        if kind == "t":
            self._arguments(msg, text)
            return
        if kind == "i" or (kind == "r" and not self.reasoning):
            return
        if not msg["any"]:
            msg["any"] = True
            if kind in self.s["seen"]:
                text = "\n" + text
            else:
                self.s["seen"] += kind
        self.out.append((kind, text))

    def _arguments(self, msg: dict[str, Any], text: str) -> None:
        if not self.tools:
            return
        if self.exact:
            msg["raw"] += text
            return
        piece = _Arguments.feed(msg["args"], text)
        if piece:
            self.calls.append({"index": msg["ti"], "function": {"arguments": piece}})

    # -- tokens ----------------------------------------------------------------------------

    def feed(self, token_ids: Sequence[int]) -> None:
        s = self.s
        for tid in token_ids:
            mode = s["m"]
            if mode == 2:
                if tid in STOP_TOKENS:
                    self._end_message()
                else:
                    self._content_token(tid)
            elif mode == 1:
                if tid == MESSAGE:
                    self._header_done()
                else:
                    self._keep_recovery(tid)
                    if len(s["hd"]) < MAX_HEADER_TOKENS:
                        s["hd"].append(tid)
                    else:
                        s["ho"] = True
            elif tid == START:  # mode 0
                self._keep_recovery(tid)
                s["m"], s["hd"], s["ho"] = 1, [], False
            # anything else while expecting <|start|> is an error openai-harmony skips

    def _keep_recovery(self, tid: int) -> None:
        s = self.s
        if len(s["rt"]) < MAX_RECOVERY_TOKENS:
            s["rt"].append(tid)
        else:
            s["ro"] = True

    def _header_done(self) -> None:
        s = self.s
        ids, s["hd"] = s["hd"], []
        s["m"] = 0  # an invalid header leaves openai-harmony waiting for <|start|>
        if s["ho"]:
            return
        raw = b""
        for tid in ids:
            piece = token_bytes(self.tokenizer, tid)
            if piece is None:
                return
            raw += piece
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return
        header = parse_header(text, s["ar"])
        if header is None:
            return
        s["ar"] = False
        s["rt"], s["ro"] = [], False
        kind = message_kind(header)
        msg = {"k": kind, "ub": "", "bad": False, "any": False}
        s["msg"], s["m"] = msg, 2
        self._opened(header)
        if kind == "t":
            ct = header["content_type"]
            if self.exact:
                msg["raw"], msg["ct"] = "", ct
            else:
                msg["args"] = _Arguments.start(ct is None or "json" in ct)
            msg["ti"] = s["nt"]
            s["nt"] += 1
            if self.tools:
                name = header["recipient"].removeprefix("functions.")
                self.calls.append({"index": msg["ti"], "id": None, "type": "function",
                                   "function": {"name": name, "arguments": ""}})

    def _content_token(self, tid: int) -> None:
        msg = self.s["msg"]
        if msg["bad"]:
            return  # openai-harmony cannot decode past an unknown token until the message ends
        piece = token_bytes(self.tokenizer, tid)
        if piece is None:
            msg["bad"] = True
            return
        pending = msg["ub"].encode("latin-1") + piece
        text, rest = _decode_step(pending)
        if len(rest) > MAX_PENDING_BYTES:
            text, rest = text + rest.decode("utf-8", "replace"), b""
        msg["ub"] = rest.decode("latin-1")
        self._text(msg, text)

    def _end_message(self) -> None:
        """A stop token or the end of output ends the content: flush the message's tail."""
        s = self.s
        msg = s["msg"]
        tail = (REPLACEMENT if msg["bad"] else "") + msg["ub"].encode("latin-1").decode("utf-8", "replace")
        self._text(msg, tail)
        if msg["k"] == "t" and self.tools:
            piece = canonical_arguments(msg["raw"], msg["ct"]) if self.exact else _Arguments.finish(msg["args"])
            if piece:
                self.calls.append({"index": msg["ti"], "function": {"arguments": piece}})
        s["msg"], s["m"], s["rt"], s["ro"] = None, 0, [], False
        self._closed()

    # hooks for a per-message reader (the Responses API's items): a message's header was read,
    # a message ended (its stop token, or the end of output)

    def _opened(self, header: dict[str, Any]) -> None:
        pass

    def _closed(self) -> None:
        pass

    def finish(self) -> None:
        """End of output (openai-harmony's process_eos, then vLLM's recovery)."""
        s = self.s
        if s["m"] == 2:
            self._end_message()
        elif s["m"] == 1:
            # vLLM: the parser errs inside a header; the tokens since the last message are decoded
            # (special tokens kept) and become a final-channel message
            text = self.tokenizer.decode(s["rt"], skip_special_tokens=False)
            s["rt"], s["ro"], s["m"] = [], False, 0
            self._text({"k": "c", "any": False}, text)


def _decode_step(data: bytes) -> tuple[str, bytes]:
    """openai-harmony's per-token UTF-8 step: the valid prefix, at most one replacement."""
    try:
        return data.decode("utf-8"), b""
    except UnicodeDecodeError as exc:
        valid = data[:exc.start].decode("utf-8")
        if exc.reason == "unexpected end of data" and exc.end == len(data):
            return valid, data[exc.start:]  # waiting for the rest of a character
        # Rust's error_len: the invalid sequence is skipped, one replacement stands for it
        return valid + REPLACEMENT, data[exc.end:]


# -- non-streaming ---------------------------------------------------------------------------


def parse_messages(tokenizer: Any, token_ids: Sequence[int], *, tools: bool, reasoning: bool
                   ) -> tuple[str | None, str | None, list[dict[str, Any]] | None]:
    """vLLM's `HarmonyParser.parse`: (reasoning, content, calls [{id, name, arguments}] or None)."""
    machine = HarmonyMachine(tokenizer, new_machine(), tools=tools, reasoning=reasoning, exact=True)
    machine.feed(token_ids)
    machine.finish()
    reasoning_text = "".join(t for k, t in machine.out if k == "r")
    content_text = "".join(t for k, t in machine.out if k == "c")
    calls: dict[int, dict[str, Any]] = {}
    for delta in machine.calls:
        call = calls.setdefault(delta["index"], {"id": None, "name": "", "arguments": ""})
        fn = delta["function"]
        call["name"] += fn.get("name") or ""
        call["arguments"] += fn.get("arguments") or ""
    return reasoning_text or None, content_text or None, [calls[i] for i in sorted(calls)] or None


# -- the two registered parsers ---------------------------------------------------------------


class HarmonyReasoningParser(ReasoningParser):
    """`openai_gptoss`: reasoning (the analysis channel) and content, the machine run on token ids."""

    name = "openai_gptoss"
    engine_based = True  # one grammar for reasoning and calls (vLLM's HarmonyParser)

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return True  # vLLM: Harmony has no reasoning section to wait for in the prompt

    def start(self, prompt_token_ids: Sequence[int] | None) -> State:
        return new_machine()

    def _run(self, state: State, token_ids: Sequence[int], final: bool) -> tuple[str, str]:
        machine = HarmonyMachine(self.ctx.tokenizer, state, tools=False, reasoning=True)
        machine.feed(token_ids)
        if final:
            machine.finish()
        reasoning = "".join(t for k, t in machine.out if k == "r")
        content = "".join(t for k, t in machine.out if k == "c")
        return reasoning, content

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, str]:
        return self._run(state, token_ids, final=False)

    def finish(self, state: State) -> tuple[str, str]:
        return self._run(state, (), final=True)

    def parse_complete(self, text: str, token_ids: Sequence[int],
                       prompt_token_ids: Sequence[int] | None) -> tuple[str | None, str | None]:
        reasoning, content, _ = parse_messages(self.ctx.tokenizer, token_ids, tools=False, reasoning=True)
        return reasoning, content


class HarmonyToolParser(ToolParser):
    """`openai`: the tool calls, the same machine run on the same token ids (a `unified` family:
    the pipeline feeds it every step; the content is the reasoning parser's, passed through)."""

    name = "openai"
    supports_required_and_named = False  # required/named outputs are Harmony calls too
    engine_based = True  # runs under tool_choice "none" too (the calls are then dropped)
    unified = True

    def start(self) -> State:
        return new_machine()

    def _run(self, state: State, token_ids: Sequence[int], final: bool) -> list[ToolCallDelta]:
        machine = HarmonyMachine(self.ctx.tokenizer, state, tools=True, reasoning=False)
        machine.feed(token_ids)
        if final:
            machine.finish()
        return machine.calls

    def feed(self, state: State, text: str, token_ids: Sequence[int]) -> tuple[str, list[ToolCallDelta]]:
        return text, self._run(state, token_ids, final=False)

    def finish(self, state: State) -> tuple[str, list[ToolCallDelta]]:
        return "", self._run(state, (), final=True)

    def extract_complete(self, text: str, token_ids: Sequence[int]
                         ) -> tuple[list[dict[str, Any]] | None, str | None]:
        return parse_messages(self.ctx.tokenizer, token_ids, tools=True, reasoning=False)[2], (text or None)


def check_flags(harmony_model: bool, reasoning_parser: str | None, tool_call_parser: str | None,
                enable_auto_tool_choice: bool) -> None:
    """Start-up check of the parser flags against the model (ValueError, one line, naming the flag).

    vLLM parses a gpt-oss model's output with Harmony whatever the flags name, and refuses any
    reasoning parser but openai_gptoss there; the two Harmony names on another model would fail
    on every request in vLLM. `openai` alone (reasoning dropped) is not supported yet: our tool
    parser reads the machine the reasoning parser runs.
    """
    tools = tool_call_parser if enable_auto_tool_choice else None
    harmony_names = {HarmonyReasoningParser.name, HarmonyToolParser.name}
    if not harmony_model:
        for flag, name in (("--reasoning-parser", reasoning_parser), ("--tool-call-parser", tools)):
            if name in harmony_names:
                raise ValueError(f"{flag} {name} parses the Harmony format of gpt-oss models "
                                 "(config.json model_type gpt_oss); this model is not one")
        return
    if reasoning_parser is not None and reasoning_parser != HarmonyReasoningParser.name:
        raise ValueError(f"--reasoning-parser {reasoning_parser} cannot be used with a gpt-oss model: "
                         "Harmony output needs --reasoning-parser openai_gptoss")
    if tools is not None and tools != HarmonyToolParser.name:
        raise ValueError(f"--tool-call-parser {tools} cannot be used with a gpt-oss model: "
                         "Harmony output needs --tool-call-parser openai")
    if tools is not None and reasoning_parser is None:
        raise ValueError("--tool-call-parser openai without --reasoning-parser openai_gptoss "
                         "is not supported yet (give both, as gpt-oss is served)")


