"""Stop strings and stop tokens, with vLLM's rules (docs/vllm-wire-spec.md §2.4 steps 3 and 5,
§0.3).

Two pieces, shared by the raw derender endpoints and the front door:

* `drop_stop_token(...)`: which trailing id is the stop token that must not reach the text,
  and the `stop_reason` to report (docs/vllm-wire-spec.md §2.4 step 3).
* `StopStringMatcher`: incremental stop-string matching over the detokenized text. It holds
  back only the shortest tail that could still become a stop string (the longest suffix of
  the pending text that is a proper prefix of some stop string), so text is released as soon
  as it can no longer be part of a match. A match only counts once more than `min_tokens`
  tokens were produced, and must end in text produced by those later tokens. The
  earliest-completing match wins, ties go to the earlier entry of `stop`, exactly as vLLM's
  `check_stop_strings` with one token per step. Its state (`held`, flags) is tiny and
  JSON-serializable.
* `StopAutomaton`: what makes the matcher's cost per fed character independent of how many
  stop strings there are and how long they are. Requests carry at most 4 (vLLM's bound, which
  the request models enforce) but of any length, and output that keeps matching a long prefix
  would make `str.find` rescan the whole held tail on every token; the core API itself takes
  any number (1000 strings of 1000 chars: milliseconds per token on the find path). A few short
  strings keep the plain `str.find` path, which is faster for them; both paths give identical
  results and identical states.

`cut_at_stop_string(...)` is the one-shot form vLLM's non-streaming derender applies.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Collection, Sequence
from typing import Any

from core.errors import RequestError

# The most characters all stop strings of a request may hold where they are matched (the front
# door, the derender endpoints). vLLM bounds their number (4, like OpenAI) but not their length,
# so a request body's worth (32 MB) of stop strings would build a ~300 MB automaton. A million
# characters is far beyond any real use and costs ~10 MB and ~10 ms to build. The render
# endpoint passes `stop` on unchecked, as vLLM does.
MAX_STOP_CHARS = 1_000_000


def normalize_stop(stop: str | Sequence[str] | None) -> list[str]:
    """The request's `stop` as a list without empty strings (SamplingParams does the same).
    Raises RequestError (400) past MAX_STOP_CHARS."""
    if not stop:
        return []
    strings = [stop] if isinstance(stop, str) else [s for s in stop if s]
    total = sum(map(len, strings))
    if total > MAX_STOP_CHARS:
        raise RequestError(f"The stop strings hold {total} characters in all; at most {MAX_STOP_CHARS} are "
                           "supported.", 400, "BadRequestError", param="stop")
    return strings


def drop_stop_token(token_ids: Sequence[int], finish_reason: str | None, stop_reason: int | str | None, *,
                    primary_eos_id: int | None, eos_ids: Collection[int],
                    stop_token_ids: Collection[int] = (), ignore_eos: bool = False,
                    include_stop_str_in_output: bool = False) -> tuple[Sequence[int], int | str | None]:
    """The ids whose text is output, and the `stop_reason` to report (docs/vllm-wire-spec.md §2.4 step 3).

    Only a `"stop"` finish whose `stop_reason` is not a string can end in a stop token:
    * an int `stop_reason` names it: the last id is dropped when it equals it;
    * a null `stop_reason` (older engines): the last id is dropped when it is the primary
      EOS (reason stays null), or when it is one of the request's `stop_token_ids` or the
      model's EOS ids (reason becomes that id); EOS ids count only without `ignore_eos`.
    With `include_stop_str_in_output` nothing is dropped (the reason is still reported).
    """
    if finish_reason != "stop" or isinstance(stop_reason, str) or not token_ids:
        return token_ids, stop_reason
    last = token_ids[-1]
    if stop_reason is None:
        if not ignore_eos and last == primary_eos_id:
            stopped = True
        elif last in stop_token_ids or (not ignore_eos and (last in eos_ids or last == primary_eos_id)):
            stopped, stop_reason = True, last
        else:
            stopped = False
    else:
        stopped = last == stop_reason
    if not stopped or include_stop_str_in_output:
        return token_ids, stop_reason
    return token_ids[:-1], stop_reason


def find_stop(text: str, new_chars: int, stop: Sequence[str]) -> tuple[str, int] | None:
    """The stop string that completes earliest within the last `new_chars` chars of `text`.

    Returns (stop_string, start index) or None; ties go to the earlier entry of `stop`.
    """
    if not new_chars or not stop:
        return None
    best: tuple[str, int] | None = None
    best_end = len(text) + 1
    n = len(text)
    for s in stop:
        start = text.find(s, max(0, n - new_chars - len(s) + 1))
        if start == -1:
            continue
        end = start + len(s)
        if end < best_end:
            best, best_end = (s, start), end
    return best


def cut_at_stop_string(text: str, new_chars: int, stop: Sequence[str],
                       include_stop_str_in_output: bool) -> tuple[str, str | None]:
    """One-shot cut (vLLM's non-streaming derender): (text, matched stop string or None)."""
    found = find_stop(text, new_chars, stop)
    if found is None:
        return text, None
    s, start = found
    return (text[:start + len(s)] if include_stop_str_in_output else text[:start]), s


def _common_prefix_length(a: str, b: str) -> int:
    """Length of the longest common prefix, by binary search on C-speed `startswith`."""
    lo, hi = 0, min(len(a), len(b))
    if b.startswith(a[:hi]):
        return hi
    hi -= 1  # a[:hi+1] did not match
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if b.startswith(a[lo:mid], lo):
            lo = mid
        else:
            hi = mid - 1
    return lo


class StopAutomaton:
    """Aho-Corasick automaton over a stop list, built in O(sorting the list).

    The trie is not materialized node by node (a million Python objects for 1000 strings of
    1000 chars): its nodes are numbered in preorder, which is the order of the sorted
    distinct strings, so each string adds one chain of consecutive node ids, and
    * `edges[v]` is the character from node v to its first child v+1 (junk for a leaf),
    * `branches[v]` maps the characters of v's other children (at most one entry per string),
    * `parents` names the parent of each chain that branches off (v-1 otherwise),
    * `starts` / `lcps` give a node's depth by bisection.
    Failure links and outputs are computed lazily, on first visit, into two int arrays shared
    by every matcher on the same stop list (an idempotent fill, so threads may share it): a
    node costs its fail-link walk once in the automaton's life, and no more than an eager
    breadth-first build would have spent on it.

    A node's depth is the length of the longest suffix of the text fed so far that is a prefix
    of some stop string; the deepest non-leaf node on its failure chain gives the hold-back
    (longest suffix that is a *proper* prefix). `out[v]` is the smallest `stop` index among
    the strings that end at v (the tie-break), -1 if none.
    """

    __slots__ = ("patterns", "size", "longest", "edges", "leaves", "branches", "parents", "terminal",
                 "starts", "lcps", "fail", "out")

    def __init__(self, stop: Sequence[str]) -> None:
        first_index: dict[str, int] = {}
        for i, s in enumerate(stop):
            if not s:
                raise ValueError("stop strings must not be empty")
            first_index.setdefault(s, i)
        patterns = sorted(first_index)
        starts: list[int] = []
        lcps: list[int] = []
        pieces: list[str] = []
        branches: dict[int, dict[str, int]] = {}
        parents: dict[int, int] = {}
        terminal: dict[int, int] = {}
        leaves: set[int] = set()
        path: list[tuple[int, int]] = []  # (first depth, first node) of the chains on the current root path
        node, previous = 1, ""
        for s in patterns:
            lcp = _common_prefix_length(previous, s)
            while path and path[-1][0] > lcp:
                path.pop()
            parent = 0 if lcp == 0 else path[-1][1] + lcp - path[-1][0]
            if parent != node - 1:  # not the first child: a branch, and the previous chain ended in a leaf
                branches.setdefault(parent, {})[s[lcp]] = node
                parents[node] = parent
                leaves.add(node - 1)
            starts.append(node)
            lcps.append(lcp)
            pieces.append(s[lcp:])
            path.append((lcp + 1, node))
            node += len(s) - lcp
            terminal[node - 1] = first_index[s]
            previous = s
        leaves.add(node - 1)
        self.patterns = patterns
        self.size = node
        self.longest = max(map(len, patterns), default=0)
        self.edges = "".join(pieces) + "\0"  # edges[v]: from v to v+1; the sentinel belongs to a leaf
        self.leaves = frozenset(leaves)
        self.branches = branches
        self.parents = parents
        self.terminal = terminal
        self.starts = starts
        self.lcps = lcps
        self.fail = array("i", [-1]) * node  # -1: not resolved yet
        self.out = array("i", [-1]) * node
        self.fail[0] = 0

    def goto(self, v: int, c: str) -> int:
        """The child of v along c, -1 if none."""
        if self.edges[v] == c and v not in self.leaves:
            return v + 1
        b = self.branches.get(v)
        if b is not None:
            return b.get(c, -1)
        return -1

    def resolve(self, v: int) -> None:
        """Compute the failure link and output of v (and whatever they need), iteratively.

        Invariant: a resolved node's whole failure chain is resolved, so walking it never
        needs more work. `out` is written before `fail`, which is the "resolved" flag.
        """
        fail, out, goto, edges = self.fail, self.out, self.goto, self.edges
        stack = [v]
        while stack:
            u = stack[-1]
            if fail[u] >= 0:
                stack.pop()
                continue
            p = self.parents.get(u, u - 1)
            g = 0
            if p:
                f = fail[p]
                if f < 0:
                    stack.append(p)
                    continue
                c = edges[u - 1]
                while True:
                    g = goto(f, c)
                    if g >= 0:
                        break
                    if not f:
                        g = 0
                        break
                    f = fail[f]
                if g and fail[g] < 0:
                    stack.append(g)
                    continue
            own, inherited = self.terminal.get(u, -1), out[g]
            out[u] = own if inherited < 0 or 0 <= own < inherited else inherited
            fail[u] = g
            stack.pop()

    def depth(self, v: int) -> int:
        if not v:
            return 0
        i = bisect_right(self.starts, v) - 1
        return self.lcps[i] + v - self.starts[i] + 1

    def hold_node(self, v: int) -> int:
        """The deepest node on v's failure chain that is a proper prefix (v itself unless a leaf)."""
        while v in self.leaves:
            if self.fail[v] < 0:
                self.resolve(v)
            v = self.fail[v]
        return v

    def node_of(self, prefix: str) -> int:
        """The node spelling `prefix`, -1 if it is no prefix of a stop string."""
        if not prefix:
            return 0
        i = bisect_left(self.patterns, prefix)
        if i == len(self.patterns) or not self.patterns[i].startswith(prefix):
            return -1
        # patterns[i] is the first string with this prefix, so the node lies on its own chain
        return self.starts[i] + len(prefix) - self.lcps[i] - 1


# Built automata, shared by the choices of one request and by the chunks of the stateless
# /derender stream (the client re-sends `stop` with every chunk). Bounded by entries and by
# total nodes (~10 bytes each); an automaton larger than the node budget is not cached.
AUTOMATON_CACHE_ENTRIES = 32
AUTOMATON_CACHE_NODES = 2_000_000
_automata: OrderedDict[tuple[str, ...], StopAutomaton] = OrderedDict()
_automata_nodes = 0
_automata_lock = threading.Lock()


def automaton_for(stop: Sequence[str]) -> StopAutomaton:
    """The (cached) automaton of this stop list; the order of `stop` matters (tie-break)."""
    global _automata_nodes
    key = tuple(stop)
    automaton = _automata.get(key)  # a hit takes no lock: get and move_to_end are atomic
    if automaton is not None:
        try:
            _automata.move_to_end(key)
        except KeyError:  # evicted by another thread meanwhile: still a valid automaton
            pass
        return automaton
    automaton = StopAutomaton(key)
    if automaton.size <= AUTOMATON_CACHE_NODES:
        with _automata_lock:
            if key not in _automata:
                _automata[key] = automaton
                _automata_nodes += automaton.size
                while len(_automata) > AUTOMATON_CACHE_ENTRIES or _automata_nodes > AUTOMATON_CACHE_NODES:
                    _, evicted = _automata.popitem(last=False)
                    _automata_nodes -= evicted.size
    return automaton


# Up to this many stop strings with up to this many chars in total, the `str.find` path is kept
# (what every list used before the automaton): its cost per token is flat in the token's length,
# while the automaton walks each char in Python (~0.1 us), which loses on long tokens (bench/stop.py).
# Past it the find path grows with the list and the automaton wins, more and more.
FIND_MAX_STRINGS = 4
FIND_MAX_CHARS = 64


def uses_automaton(stop: Sequence[str]) -> bool:
    """Whether a matcher on this stop list walks the automaton by default (empty strings never do)."""
    return _wants_automaton(stop) and "" not in stop


def _wants_automaton(stop: Sequence[str]) -> bool:
    return len(stop) > FIND_MAX_STRINGS or sum(map(len, stop)) > FIND_MAX_CHARS


class StopStringMatcher:
    """Incremental stop-string matching for one output sequence.

        m = StopStringMatcher(["</answer>", "\\n\\n"], include_stop_str_in_output=False)
        released = m.feed(text_of_token, countable=True)   # text safe to emit now
        if m.matched is not None: ...                       # cut happened; emit nothing more
        released = m.flush()                                # at the end: the held-back tail

    `countable=False` marks text from the first `min_tokens` tokens: a stop string cannot
    end inside it (it may start there).

    Large stop lists walk a `StopAutomaton` (O(new chars) per feed, whatever the list);
    small ones search each string with `str.find`. `automaton` forces one path (tests).
    """

    __slots__ = ("stop", "include", "held", "matched", "_max_hold", "_automaton", "_node")

    def __init__(self, stop: Sequence[str], include_stop_str_in_output: bool = False, *,
                 held: str = "", matched: str | None = None, automaton: bool | None = None) -> None:
        self.stop = list(stop)
        self.include = include_stop_str_in_output
        self.held = held
        self.matched = matched
        self._automaton: StopAutomaton | None = None
        self._node = 0
        if self.stop and (_wants_automaton(self.stop) if automaton is None else automaton):
            try:
                self._automaton = automaton_for(self.stop)
            except ValueError:  # an empty stop string: only the find path has rules for it
                pass
        self._max_hold = (max(map(len, self.stop), default=1) if self._automaton is None
                          else self._automaton.longest) - 1
        if held:
            self._hold(held)

    def _hold(self, held: str) -> None:
        """Resume holding `held`, which must be what a matcher can hold: a proper prefix of a
        stop string (checked, since it comes back from a client-carried state)."""
        if self._automaton is not None:
            node = self._automaton.node_of(held)
            if node < 0 or node in self._automaton.leaves:
                raise ValueError("stop matcher holds text that cannot start a stop string")
            self._node = node
        else:
            for s in self.stop:
                if len(s) > len(held) and s.startswith(held):
                    break
            else:
                raise ValueError("stop matcher holds text that cannot start a stop string")
        self.held = held

    @property
    def active(self) -> bool:
        return bool(self.stop)

    def feed(self, text: str, countable: bool = True) -> str:
        """Add newly decoded text; return what can be released. After a match, returns ''."""
        if self.matched is not None:
            return ""
        if not self.stop:
            return text
        if not text:
            return ""
        if self._automaton is not None:
            return self._feed_automaton(text, countable)
        buffer = self.held + text
        # with include_stop_str_in_output all text is output up to the end of a match, so
        # `held` is only matching context that was already released
        released = len(self.held) if self.include else 0
        if countable:
            found = find_stop(buffer, len(text), self.stop)
            if found is not None:
                s, start = found
                self.matched = s
                self.held = ""
                return buffer[released:start + len(s)] if self.include else buffer[:start]
        keep = self._hold_length(buffer)
        self.held = buffer[len(buffer) - keep:] if keep else ""
        return buffer[released:] if self.include else buffer[:len(buffer) - keep]

    def _feed_automaton(self, text: str, countable: bool) -> str:
        automaton = self._automaton
        assert automaton is not None
        edges, leaves, branches = automaton.edges, automaton.leaves, automaton.branches
        fail, out, resolve = automaton.fail, automaton.out, automaton.resolve
        v = self._node
        for end, c in enumerate(text, 1):
            while True:  # goto, inlined: the hot loop
                if edges[v] == c and v not in leaves:
                    v += 1
                    break
                b = branches.get(v)
                if b is not None:
                    g = b.get(c)
                    if g is not None:
                        v = g
                        break
                if not v:
                    break
                if fail[v] < 0:
                    resolve(v)
                v = fail[v]
            if countable and v:
                if fail[v] < 0:
                    resolve(v)
                index = out[v]
                if index >= 0:
                    return self._cut(text, end, self.stop[index])
        held = self.held
        v = automaton.hold_node(v)
        self._node = v
        keep = automaton.depth(v)
        if keep <= len(text):
            self.held = text[len(text) - keep:] if keep else ""
            if self.include:
                return text
            return held + text[:len(text) - keep] if held else text[:len(text) - keep]
        from_held = keep - len(text)
        self.held = held[len(held) - from_held:] + text
        return text if self.include else held[:len(held) - from_held]

    def _cut(self, text: str, end: int, s: str) -> str:
        """A match of `s` ends after text[:end]: the text to release, and no more."""
        self.matched = s
        held, self.held = self.held, ""
        self._node = 0
        if self.include:
            return text[:end]
        start = len(held) + end - len(s)  # in held + text
        return held + text[:start - len(held)] if start >= len(held) else held[:start]

    def flush(self) -> str:
        """End of output without a match: release the held-back tail."""
        out, self.held = self.held, ""
        self._node = 0
        return "" if self.matched is not None or self.include else out

    def _hold_length(self, buffer: str) -> int:
        """Length of the longest suffix of `buffer` that is a proper prefix of a stop string."""
        longest = 0
        limit = min(self._max_hold, len(buffer))
        for s in self.stop:
            for k in range(min(len(s) - 1, limit), longest, -1):
                if buffer.endswith(s[:k]):
                    longest = k
                    break
        return longest

    # -- state ------------------------------------------------------------------------

    def to_state(self) -> list[Any]:
        return [self.held, self.matched]

    @classmethod
    def from_state(cls, stop: Sequence[str], include_stop_str_in_output: bool, state: Any, *,
                   automaton: bool | None = None) -> StopStringMatcher:
        """The matcher `to_state()` described. Both paths hold the same text, so a state moves
        freely between them; `held` must be a proper prefix of a stop string, which bounds it."""
        if not (isinstance(state, list) and len(state) == 2 and isinstance(state[0], str)
                and (state[1] is None or isinstance(state[1], str))):
            raise ValueError("stop matcher state must be [held, matched]")
        held, matched = state
        if matched is not None and (held or matched not in stop):
            raise ValueError("stop matcher matched a string the request does not stop on, or holds text")
        return cls(stop, include_stop_str_in_output, held=held, matched=matched, automaton=automaton)
