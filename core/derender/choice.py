"""One output sequence's text: stop token, detokenizer, stop strings, min_tokens.

* `DecodeOptions.for_chat / for_completion`: the request's decode knobs, read once.
* `decode_complete(...)`: a whole output, vLLM's non-streaming rules (spec 2.4 steps 3-5: a
  stop string is cut only when the engine said `finish_reason:"stop"`).
* `ChoiceDecoder`: the streaming form. Each `step(ids, finish_reason, stop_reason)` returns the
  new text. Stop strings are matched as text arrives (the engine cannot: spec 0.3), holding
  back only the ambiguous tail; on a match the step reports `finish_reason:"stop"`,
  `stop_reason` the string, how many of the chunk's ids were used, and the decoder is done.
  Its state is a short JSON list (`to_state` / `from_state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.detokenizer import IncrementalDetokenizer, decode_params
from core.model import ModelInfo
from core.stop import StopStringMatcher, cut_at_stop_string, drop_stop_token, normalize_stop


@dataclass(frozen=True)
class DecodeOptions:
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    stop: tuple[str, ...] = ()
    include_stop_str_in_output: bool = False
    min_tokens: int = 0
    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] = ()

    @classmethod
    def from_request(cls, request: Any, *, preserve_special: bool = False) -> DecodeOptions:
        """From a Chat/CompletionRequest (or None). `preserve_special`: a parser reads markers."""
        if request is None:
            skip, spaces = decode_params(None, False if preserve_special else None, None)
            return cls(skip_special_tokens=skip, spaces_between_special_tokens=spaces)
        skip, spaces = decode_params(None, False if preserve_special else request.skip_special_tokens,
                                     request.spaces_between_special_tokens)
        return cls(skip_special_tokens=skip, spaces_between_special_tokens=spaces,
                   stop=tuple(normalize_stop(request.stop)),
                   include_stop_str_in_output=bool(request.include_stop_str_in_output),
                   min_tokens=request.min_tokens or 0, ignore_eos=bool(request.ignore_eos),
                   stop_token_ids=tuple(request.stop_token_ids or ()))


def drop_stop(model: ModelInfo, opts: DecodeOptions, token_ids: Sequence[int], finish_reason: str | None,
              stop_reason: int | str | None) -> tuple[Sequence[int], int | str | None]:
    return drop_stop_token(token_ids, finish_reason, stop_reason, primary_eos_id=model.primary_eos_token_id,
                           eos_ids=model.eos_token_ids, stop_token_ids=opts.stop_token_ids,
                           ignore_eos=opts.ignore_eos,
                           include_stop_str_in_output=opts.include_stop_str_in_output)


def decode_complete(model: ModelInfo, opts: DecodeOptions, token_ids: Sequence[int], finish_reason: str | None,
                    stop_reason: int | str | None, seed_ids: Sequence[int] | None) -> tuple[str, int | str | None]:
    """(text, stop_reason) of a whole output, as vLLM's non-streaming derender decodes it."""
    reported = stop_reason
    ids, stop_reason = drop_stop(model, opts, token_ids, finish_reason, stop_reason)
    if finish_reason != "stop" or (isinstance(reported, int) and not isinstance(reported, bool)):
        stops: Sequence[str] = ()
    elif isinstance(reported, str):
        stops = [reported]
    else:
        stops = opts.stop
    detok = IncrementalDetokenizer.seeded(model.tokenizer, seed_ids, skip_special_tokens=opts.skip_special_tokens,
                                          spaces_between_special_tokens=opts.spaces_between_special_tokens)
    head = detok.feed(ids[:opts.min_tokens]) if opts.min_tokens else ""
    tail = detok.feed(ids[opts.min_tokens:])
    text, matched = cut_at_stop_string(head + tail, len(tail), stops, opts.include_stop_str_in_output)
    if matched is not None:
        stop_reason = matched
    return text, stop_reason


@dataclass
class Step:
    """What one engine chunk of one choice produced."""

    text: str
    used_ids: Sequence[int]        # the chunk's ids up to a stop-string cut (all of them otherwise)
    finish_reason: str | None
    stop_reason: int | str | None
    finished: bool                 # this step ended the choice (engine finish or stop string)


class ChoiceDecoder:
    """Streaming text of one choice. Cheap to build; state is `to_state()`."""

    __slots__ = ("model", "opts", "detok", "matcher", "decoded", "done")

    def __init__(self, model: ModelInfo, opts: DecodeOptions, detok: IncrementalDetokenizer,
                 matcher: StopStringMatcher | None, decoded: int = 0, done: bool = False) -> None:
        self.model = model
        self.opts = opts
        self.detok = detok
        self.matcher = matcher
        self.decoded = decoded  # ids fed to the detokenizer (for min_tokens)
        self.done = done

    @classmethod
    def start(cls, model: ModelInfo, opts: DecodeOptions, prompt_token_ids: Sequence[int] | None) -> ChoiceDecoder:
        detok = IncrementalDetokenizer.seeded(model.tokenizer, prompt_token_ids,
                                              skip_special_tokens=opts.skip_special_tokens,
                                              spaces_between_special_tokens=opts.spaces_between_special_tokens)
        matcher = StopStringMatcher(opts.stop, opts.include_stop_str_in_output) if opts.stop else None
        return cls(model, opts, detok, matcher)

    def step(self, token_ids: Sequence[int], finish_reason: str | None, stop_reason: int | str | None) -> Step:
        if self.done:
            return Step("", (), None, None, False)
        if finish_reason == "stop":
            ids, stop_reason = drop_stop(self.model, self.opts, token_ids, finish_reason, stop_reason)
        else:
            ids = token_ids
        matcher = self.matcher
        if matcher is None:
            text = self.detok.feed(ids)
            self.decoded += len(ids)
            used: Sequence[int] = token_ids
        else:
            parts = []
            used = token_ids
            min_tokens = self.opts.min_tokens
            step = self.detok.step
            for j, tid in enumerate(ids):
                piece = step(tid)
                self.decoded += 1
                parts.append(matcher.feed(piece, countable=self.decoded > min_tokens))
                if matcher.matched is not None:
                    used = token_ids[:j + 1]
                    finish_reason, stop_reason = "stop", matcher.matched
                    break
            if matcher.matched is None and finish_reason is not None:
                parts.append(matcher.flush())
            text = "".join(parts)
        if finish_reason is not None:
            self.done = True
        return Step(text, used, finish_reason, stop_reason, finish_reason is not None)

    # -- state --------------------------------------------------------------------------

    def to_state(self) -> list[Any]:
        return [self.detok.to_state(), None if self.matcher is None else self.matcher.to_state(),
                self.decoded, self.done]

    @classmethod
    def from_state(cls, model: ModelInfo, opts: DecodeOptions, state: Any) -> ChoiceDecoder:
        if not (isinstance(state, list) and len(state) == 4):
            raise ValueError("decoder state must be [detokenizer, stop matcher, decoded, done]")
        detok_state, matcher_state, decoded, done = state
        if not isinstance(decoded, int) or isinstance(decoded, bool) or decoded < 0 or not isinstance(done, bool):
            raise ValueError("decoder counters are malformed")
        detok = IncrementalDetokenizer.from_state(model.tokenizer, detok_state,
                                                  skip_special_tokens=opts.skip_special_tokens,
                                                  spaces_between_special_tokens=opts.spaces_between_special_tokens)
        if opts.stop:
            if matcher_state is None:
                raise ValueError("stop strings were added after the stream started")
            matcher = StopStringMatcher.from_state(opts.stop, opts.include_stop_str_in_output, matcher_state)
        else:
            if matcher_state is not None:
                raise ValueError("stop strings were removed after the stream started")
            matcher = None
        return cls(model, opts, detok, matcher, decoded, done)
