"""vLLM 0.33's parser engine, rebuilt incremental and serializable.

vLLM's newer families (qwen3 reasoning and qwen3_xml, glm45, kimi_k2, mistral) describe their
whole output format declaratively (vllm/parser/engine): literal terminals, a state machine over
them, and one set of rules that turns the resulting events into reasoning, content and calls.
Rebuilding that engine once, instead of a hand-written machine per family, is what makes our
answers equal to vLLM's by construction, for well-formed and malformed outputs alike.

* `Grammar`: one family's terminals (name -> literal) and transitions
  ((phase, terminal) -> (next phase, events)), plus its result rules (whitespace, name checks).
* `Lexer`: splits text into terminals and content exactly as vLLM's `IncrementalLexer` does
  (leftmost, longest literal; a tail that may still become a literal is held). Every tokenizer
  special token that is not one of the grammar's literals is a "drop" terminal: its text never
  reaches reasoning, content or arguments (vLLM's `_build_drop_info`).
* `Engine`: the state machine (`StreamingParserEngine._on_terminal`), fed text and returning
  events. Its state is a small dict (phase, held tail, one flag), so it lives in `stream_state`.

vLLM runs the engine twice for a reasoning + tool parser pair (the reasoning adapter with tool
parsing skipped, then the tool adapter on the content), always on text (its non-streaming path
passes no token ids); `core/parsers/engine_parsers.py` does the same.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from core.parsers.special import special_token_texts
from core.tokenizer import Tokenizer


class Phase:
    """Engine states (vLLM's `ParserState`), serialized as one letter."""

    CONTENT = "C"
    REASONING = "R"
    PREAMBLE = "P"  # inside tool markup before the name (e.g. after <tool_call>)
    NAME = "N"
    ARGS = "A"
    BETWEEN = "B"  # after a call, inside the tool block


TOOL_PHASES = frozenset({Phase.PREAMBLE, Phase.NAME, Phase.ARGS, Phase.BETWEEN})
PLAIN_PHASES = frozenset({Phase.CONTENT, Phase.REASONING})


class Ev:
    """Event kinds (vLLM's `EventType`)."""

    TEXT = "text"
    REASONING = "reasoning"
    REASONING_START = "reasoning_start"
    REASONING_END = "reasoning_end"
    CALL_START = "call_start"
    NAME = "name"
    ARGS = "args"
    CALL_END = "call_end"
    RAW = "raw"  # the text of a lexed token, once markup was read or dropped (`Engine.feed(raw=True)`)


Event = tuple[str, str]  # (kind, text)
DROP = "__DROP__"  # the terminal of special-token text the engine drops
_CONTENT_EVENTS = {Phase.CONTENT: Ev.TEXT, Phase.REASONING: Ev.REASONING, Phase.NAME: Ev.NAME, Phase.ARGS: Ev.ARGS}
_REASONING_EVENTS = frozenset({Ev.REASONING_START, Ev.REASONING_END})


@dataclass(frozen=True, eq=False)  # hashed by identity: grammars are module constants
class Grammar:
    """A family's output format (vLLM's `ParserEngineConfig`, the parts that affect answers)."""

    name: str
    # terminal name -> literal text, or its spellings (the first is the canonical one)
    terminals: Mapping[str, str | tuple[str, ...]]
    transitions: Mapping[tuple[str, str], tuple[str, tuple[str, ...]]]
    initial: str = Phase.CONTENT
    # whether reasoning is open until the prompt or output closes it (vLLM's `wait_for_reasoning`;
    # None: when the grammar starts in reasoning)
    wait_for_reasoning: bool | None = None
    # texts that are matched by token id too (never dropped as special tokens)
    id_terminals: frozenset[str] = frozenset()
    # special-token texts that are neither literals nor dropped: they stay text (vLLM's
    # `preserve_tokens`, e.g. Gemma 4's string delimiter inside arguments)
    preserve: frozenset[str] = frozenset()
    strip_trailing_reasoning_whitespace: bool = True
    drop_whitespace_only_content_before_tools: bool = True
    strip_content_whitespace_with_tools: bool = True
    validate_tool_names: bool = False
    literals: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "literals", {text: name for name, value in self.terminals.items()
                                              for text in ((value,) if isinstance(value, str) else value)})

    def literal(self, terminal: str) -> str | None:
        """The canonical spelling of a terminal (vLLM's `terminal_literal`)."""
        value = self.terminals.get(terminal)
        return value if isinstance(value, str) or value is None else value[0]

    @property
    def waits_for_reasoning(self) -> bool:
        return self.initial == Phase.REASONING if self.wait_for_reasoning is None else self.wait_for_reasoning

    @functools.cached_property
    def tool_terminals(self) -> frozenset[str]:
        return frozenset(t for (state, t), (nxt, _) in self.transitions.items()
                         if nxt in TOOL_PHASES or state in TOOL_PHASES)

    @functools.cached_property
    def tool_exit_terminals(self) -> frozenset[str]:
        return frozenset(t for (state, t), (nxt, _) in self.transitions.items()
                         if state in TOOL_PHASES and nxt not in TOOL_PHASES)

    @functools.cached_property
    def reasoning_markup(self) -> frozenset[str]:
        """Terminals a tool pass without a reasoning parser keeps as text (vLLM's
        `_compute_reasoning_markup_terminals`): reasoning-only markers, when all are pure."""
        markers = frozenset(t for (state, t), (nxt, _) in self.transitions.items()
                            if Phase.REASONING in (state, nxt) and nxt not in TOOL_PHASES)
        for (state, t), (nxt, events) in self.transitions.items():
            if t in markers and (state not in PLAIN_PHASES or nxt not in PLAIN_PHASES
                                 or not _REASONING_EVENTS.issuperset(events)):
                return frozenset()
        return markers

    @functools.cached_property
    def has_reasoning(self) -> bool:
        return ("THINK_START" in self.terminals or "THINK_END" in self.terminals
                or self.initial == Phase.REASONING)


class Lexer:
    """vLLM's `IncrementalLexer` over one grammar's literals plus the tokenizer's drop terminals."""

    def __init__(self, literals: Mapping[str, str]) -> None:
        self.literals = dict(literals)  # literal text -> terminal name
        self.by_first: dict[str, list[str]] = {}
        for text in sorted(self.literals, key=len, reverse=True):  # longest first
            self.by_first.setdefault(text[0], []).append(text)
        self.prefixes = frozenset(t[:k] for t in self.literals for k in range(1, len(t)))
        self.longest = max((len(t) for t in self.literals), default=0)
        self.first_chars = frozenset(self.by_first)
        self._next_first = re.compile("[" + "".join(re.escape(c) for c in sorted(self.first_chars)) + "]") \
            if self.first_chars else None

    def lex(self, buf: str, final: bool) -> tuple[list[tuple[str | None, str]], str]:
        """Split `buf` into (terminal or None for content, text); return them and the held tail."""
        out: list[tuple[str | None, str]] = []
        pos, n = 0, len(buf)
        finder = self._next_first
        while pos < n:
            if finder is None or finder.search(buf, pos) is None:
                out.append((None, buf[pos:]))
                return out, ""
            rest = n - pos
            if not final and rest < self.longest and buf[pos:] in self.prefixes:
                return out, buf[pos:]  # may still become a literal
            match = self._literal_at(buf, pos)
            if match is not None:
                out.append((self.literals[match], match))
                pos += len(match)
                continue
            end = self._content_end(buf, pos + 1)
            out.append((None, buf[pos:end]))
            pos = end
        return out, ""

    def _literal_at(self, buf: str, pos: int) -> str | None:
        for text in self.by_first.get(buf[pos], ()):
            if buf.startswith(text, pos):
                return text
        return None

    def _content_end(self, buf: str, start: int) -> int:
        """The first position from `start` where a literal, or a literal's beginning that runs to
        the end of the buffer, starts (vLLM's `_find_content_boundary`)."""
        n = len(buf)
        finder = self._next_first
        pos = start
        while pos < n:
            m = finder.search(buf, pos)
            if m is None:
                return n
            i = m.start()
            if self._literal_at(buf, i) is not None or (n - i < self.longest and buf[i:] in self.prefixes):
                return i
            pos = i + 1
        return n


class EngineState(TypedDict):
    """Serialized engine progress (in stream_state, so the keys are short)."""

    ph: str  # the phase
    h: str  # the lexer's held tail (a possible literal's beginning)
    sp: NotRequired[bool]  # inside a tool span that a reasoning pass keeps as text (only while true)
    rx: NotRequired[bool]  # raw mode: markup was read or dropped, every token's text is reported


class Engine:
    """One grammar's state machine over a tokenizer (vLLM's `StreamingParserEngine`, text mode)."""

    def __init__(self, grammar: Grammar, tokenizer: Tokenizer) -> None:
        self.grammar = grammar
        self.lexer = lexer_for(grammar, tokenizer)

    def start(self, phase: str | None = None) -> EngineState:
        return {"ph": phase or self.grammar.initial, "h": ""}

    def feed(self, state: EngineState, text: str, *, final: bool = False, skip_tools: bool = False,
             skip_reasoning: bool = False, raw: bool = False) -> list[Event]:
        """Events for `text`; with `final`, also what the end of output completes. With `raw`,
        from the first token that enters or leaves tool markup on, each token's text follows
        its events as a RAW event (the text as written, markup included): from the first token the
        grammar reads as markup or drops on, the answer's content may differ from the text."""
        buf = state["h"] + text if state["h"] else text
        events: list[Event] = []
        if buf:
            tokens, state["h"] = self.lexer.lex(buf, final)
            for terminal, value in tokens:
                before = state["ph"]
                if terminal is None:
                    self._emit(state, value, events)
                else:
                    self._terminal(state, terminal, value, events, skip_tools, skip_reasoning)
                if raw and (state.get("rx") or (terminal is not None and (
                        terminal == DROP or (before, terminal) in self.grammar.transitions))):
                    state["rx"] = True
                    events.append((Ev.RAW, value))
        if final:
            phase = state["ph"]
            if phase in TOOL_PHASES:
                events.append((Ev.CALL_END, ""))
                state["ph"] = Phase.CONTENT
            elif phase == Phase.REASONING:
                events.append((Ev.REASONING_END, ""))
                state["ph"] = Phase.CONTENT
        return events

    def _emit(self, state: EngineState, text: str, events: list[Event]) -> None:
        kind = _CONTENT_EVENTS.get(state["ph"])
        if kind is not None and text:
            events.append((kind, text))

    def _terminal(self, state: EngineState, terminal: str, value: str, events: list[Event],
                  skip_tools: bool, skip_reasoning: bool) -> None:
        grammar = self.grammar
        transition = grammar.transitions.get((state["ph"], terminal))
        if transition is None:
            if terminal == DROP:
                return
            if skip_tools and terminal in grammar.tool_exit_terminals:
                state.pop("sp", None)
            self._emit(state, value, events)
            return
        if skip_reasoning and terminal in grammar.reasoning_markup:
            self._emit(state, value, events)
            return
        nxt, kinds = transition
        if skip_tools and terminal in grammar.tool_terminals:
            opener = nxt in TOOL_PHASES
            exit_ = terminal in grammar.tool_exit_terminals
            if not (exit_ and not opener and not state.get("sp")):  # not a plain closer: keep it as text
                if opener:
                    state["sp"] = True
                elif exit_:
                    state.pop("sp", None)
                if Ev.REASONING_END in kinds:  # a tool call that implicitly ends reasoning
                    state["ph"] = Phase.CONTENT
                    events.append((Ev.REASONING_END, value))
                    events.append((Ev.TEXT, value))
                else:
                    self._emit(state, value, events)
                return
        state["ph"] = nxt
        for kind in kinds:
            if kind == Ev.TEXT and not value:
                continue
            events.append((kind, value))


@functools.lru_cache(maxsize=64)
def lexer_for(grammar: Grammar, tokenizer: Tokenizer) -> Lexer:
    """The grammar's literals plus a drop terminal for every other special token (built once)."""
    configured = set(grammar.literals) | set(grammar.id_terminals) | set(grammar.preserve)
    literals = {text: DROP for text in special_token_texts(tokenizer) - configured}
    literals.update(grammar.literals)
    return Lexer(literals)
