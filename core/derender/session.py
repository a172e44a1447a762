"""The derender of one front-door request: its prompts x n choices on the one machine.

`DerenderSession` is fed engine events (plain dicts, as the engine client decoded them) per prompt,
checks them against the tokens-only protocol, routes each choice to its `ChoiceDerender` and says
which engine requests must be aborted (a stop string or the `max_tokens` cap ended every choice of
a prompt before the engine did). Choices are built when their first chunk arrives, so a request
with many choices costs nothing per choice before the engine answers.

Engine output that breaks the protocol raises `EngineOutputError` (the proxy answers 502 / ends
the stream with an error event naming the engine): choices that are not objects, indexes out of
range, token ids that are not integers of the vocabulary, a `finish_reason:"error"`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.derender.choice import ChoiceDerender, ChoiceEvent, ChoiceResult
from core.derender.settings import DerenderSettings
from core.derender.spec import OutputSpec
from core.engine_request import max_tokens
from core.parsers.pipeline import ChatOutputParser

GENERATION_FAILED = "Internal server error"  # vLLM's message for finish_reason "error" (docs/vllm-wire-spec.md §1)


class EngineOutputError(Exception):
    """The engine's output is not what the tokens-only protocol allows (never the client's fault)."""

    def __init__(self, message: str, generation_failed: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.generation_failed = generation_failed  # the engine said finish_reason "error"


def engine_choices(event: dict[str, Any], n: int, max_token_id: int) -> list[dict[str, Any]]:
    """The choices of one engine answer or event, checked (O(ids): C-level min / max / type scans)."""
    choices = event.get("choices")
    if choices is None:
        return []
    if not isinstance(choices, list):
        raise EngineOutputError("choices is not a list")
    for choice in choices:
        if not isinstance(choice, dict):
            raise EngineOutputError("a choice is not an object")
        index = choice.get("index", 0)
        if type(index) is not int or not 0 <= index < n:
            raise EngineOutputError(f"choice index {index!r} is out of range (the request has {n})")
        ids = choice.get("token_ids")
        if type(ids) is list and len(ids) == 1:
            token = ids[0]  # the common streamed chunk: one token
            if type(token) is not int or not 0 <= token <= max_token_id:
                _check_ids(ids, max_token_id)
        elif ids:
            _check_ids(ids, max_token_id)
        elif ids is not None and not isinstance(ids, list):
            raise EngineOutputError("token_ids are not a list of integers")
        if choice.get("finish_reason") == "error":
            raise EngineOutputError(GENERATION_FAILED, generation_failed=True)
    return choices


def _check_ids(ids: Any, max_token_id: int) -> None:
    if not isinstance(ids, list) or not all(type(t) is int for t in ids):
        raise EngineOutputError("token_ids are not a list of integers")
    low, high = min(ids), max(ids)
    if low < 0 or high > max_token_id:
        raise EngineOutputError(f"token id {low if low < 0 else high} is out of the vocabulary (0..{max_token_id})")


class DerenderSession:
    """Choices `p * n + i` (prompt p, sample i) of one request, created on their first chunk."""

    __slots__ = ("spec", "prompts", "n", "logprob_offsets", "choices", "_finished", "_cut", "_aborted",
                 "_max_token_id")

    def __init__(self, spec: OutputSpec, prompts: Sequence[Sequence[int]], n: int,
                 logprob_offsets: Sequence[int] | None = None) -> None:
        self.spec = spec
        self.prompts = prompts
        self.n = n
        # completions' text_offset of each prompt's first generated token (after an echoed prompt)
        self.logprob_offsets = logprob_offsets
        self.choices: dict[int, ChoiceDerender] = {}
        self._finished = [0] * len(prompts)         # choices of each prompt that have ended
        self._cut = [False] * len(prompts)          # one of them was ended by us, not by the engine
        self._aborted = [False] * len(prompts)
        self._max_token_id = spec.settings.model.max_token_id

    @classmethod
    def for_chat(cls, settings: DerenderSettings, chat_request: Any, gen: dict[str, Any],
                 parser: ChatOutputParser | None, n: int = 1) -> DerenderSession:
        """A front door's session for one rendered chat-shaped request (chat completions, and the
        chat request a Responses or Messages request renders as): one prompt, `n` choices."""
        spec = OutputSpec.for_chat(settings, chat_request, gen["sampling_params"], parser, max_tokens(gen))
        return cls(spec, [gen["token_ids"]], n)

    def choice(self, prompt: int, sample: int) -> ChoiceDerender:
        index = prompt * self.n + sample
        choice = self.choices.get(index)
        if choice is None:
            offset = self.logprob_offsets[prompt] if self.logprob_offsets is not None else 0
            choice = self.choices[index] = ChoiceDerender.start(self.spec, index, self.prompts[prompt], offset)
        return choice

    def _feed(self, prompt: int, event: dict[str, Any], collect: bool) -> list[ChoiceEvent]:
        out: list[ChoiceEvent] = []
        choices = self.choices
        for engine_choice in engine_choices(event, self.n, self._max_token_id):
            choice = choices.get(prompt * self.n + engine_choice.get("index", 0))
            if choice is None:
                choice = self.choice(prompt, engine_choice.get("index", 0))
            if choice.finished:
                continue  # ended by a stop string or the cap: the engine's later chunks are dropped
            try:
                if collect:
                    choice.collect(engine_choice)
                else:
                    step = choice.step_engine(engine_choice)
                    if step is not None:
                        out.append(step)
            except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
                # e.g. logprob entries that are not the protocol's objects
                raise EngineOutputError(f"a choice is malformed ({type(exc).__name__}: {exc})") from exc
            if choice.finished:
                self._finished[prompt] += 1
                if not choice.engine_done:
                    self._cut[prompt] = True
        return out

    def feed(self, prompt: int, event: dict[str, Any]) -> list[ChoiceEvent]:
        """One engine event of a prompt's stream -> the events of its choices (streams)."""
        return self._feed(prompt, event, collect=False)

    def collect(self, prompt: int, events: list[dict[str, Any]]) -> None:
        """Engine events (or a whole answer) of a prompt, accumulated for the non-streamed answer."""
        for event in events:
            self._feed(prompt, event, collect=True)

    def prompt_done(self, prompt: int) -> bool:
        return self._finished[prompt] == self.n

    @property
    def done(self) -> bool:
        return all(f == self.n for f in self._finished)

    def to_abort(self) -> list[int]:
        """Prompts whose every choice has ended while the engine still generates (each once)."""
        out = []
        for p, finished in enumerate(self._finished):
            if finished == self.n and self._cut[p] and not self._aborted[p]:
                self._aborted[p] = True
                out.append(p)
        return out

    @property
    def completion_tokens(self) -> int:
        return sum(c.output_tokens for c in self.choices.values())

    def results(self) -> list[ChoiceResult]:
        """Every choice, in index order, by vLLM's non-streaming rules (a choice the engine never
        mentioned is empty)."""
        return [self.choice(p, i).result(self.prompts[p]) for p in range(len(self.prompts)) for i in range(self.n)]
