"""Stop strings and stop tokens, with vLLM's rules (spec 2.4 steps 3 and 5, spec 0.3).

Two pieces, shared by the raw derender endpoints and the front door:

* `drop_stop_token(...)`: which trailing id is the stop token that must not reach the text,
  and the `stop_reason` to report (spec 2.4 step 3).
* `StopStringMatcher`: incremental stop-string matching over the detokenized text. It holds
  back only the shortest tail that could still become a stop string (the longest suffix of
  the pending text that is a proper prefix of some stop string), so text is released as soon
  as it can no longer be part of a match. A match only counts once more than `min_tokens`
  tokens were produced, and must end in text produced by those later tokens. The
  earliest-completing match wins, ties go to the earlier entry of `stop`, exactly as vLLM's
  `check_stop_strings` with one token per step. Its state (`held`, flags) is tiny and
  JSON-serializable.

`cut_at_stop_string(...)` is the one-shot form vLLM's non-streaming derender applies.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any


def normalize_stop(stop: str | Sequence[str] | None) -> list[str]:
    """The request's `stop` as a list without empty strings (SamplingParams does the same)."""
    if not stop:
        return []
    if isinstance(stop, str):
        return [stop]
    return [s for s in stop if s]


def drop_stop_token(token_ids: Sequence[int], finish_reason: str | None, stop_reason: int | str | None, *,
                    primary_eos_id: int | None, eos_ids: Collection[int],
                    stop_token_ids: Collection[int] = (), ignore_eos: bool = False,
                    include_stop_str_in_output: bool = False) -> tuple[Sequence[int], int | str | None]:
    """The ids whose text is output, and the `stop_reason` to report (spec 2.4 step 3).

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


class StopStringMatcher:
    """Incremental stop-string matching for one output sequence.

        m = StopStringMatcher(["</answer>", "\\n\\n"], include_stop_str_in_output=False)
        released = m.feed(text_of_token, countable=True)   # text safe to emit now
        if m.matched is not None: ...                       # cut happened; emit nothing more
        released = m.flush()                                # at the end: the held-back tail

    `countable=False` marks text from the first `min_tokens` tokens: a stop string cannot
    end inside it (it may start there).
    """

    __slots__ = ("stop", "include", "held", "matched", "_max_hold")

    def __init__(self, stop: Sequence[str], include_stop_str_in_output: bool = False, *,
                 held: str = "", matched: str | None = None) -> None:
        self.stop = list(stop)
        self.include = include_stop_str_in_output
        self.held = held
        self.matched = matched
        self._max_hold = max((len(s) for s in self.stop), default=1) - 1

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

    def flush(self) -> str:
        """End of output without a match: release the held-back tail."""
        out, self.held = self.held, ""
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
    def from_state(cls, stop: Sequence[str], include_stop_str_in_output: bool, state: Any) -> StopStringMatcher:
        if not (isinstance(state, list) and len(state) == 2 and isinstance(state[0], str)
                and (state[1] is None or isinstance(state[1], str))):
            raise ValueError("stop matcher state must be [held, matched]")
        held, matched = state
        stop = list(stop)
        if len(held) > max((len(s) for s in stop), default=0):
            raise ValueError("stop matcher holds more text than any stop string")
        if matched is not None and matched not in stop:
            raise ValueError("stop matcher matched a string the request does not stop on")
        return cls(stop, include_stop_str_in_output, held=held, matched=matched)
