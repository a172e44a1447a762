"""One output sequence's text: stop token, detokenizer, stop strings, min_tokens.

* `TextOptions`: a request's decode knobs, read once per request.
* `decode_complete(...)`: a whole output by vLLM's non-streaming rules (docs/vllm-wire-spec.md §2.4 steps 3-5: a
  stop string is cut only when the engine said `finish_reason:"stop"`); the raw non-streaming
  derender uses it.
* `TextDecoder`: the incremental form every stream (and the front door's non-streamed answers)
  uses. Each `step(ids, finish_reason, stop_reason)` returns the new text. Stop strings are matched
  as text arrives (the engine cannot: docs/vllm-wire-spec.md §0.3), holding back only the ambiguous tail; on a match
  the step reports `finish_reason:"stop"`, `stop_reason` the string, how many of the chunk's ids
  were kept, and the decoder is done.

A chunk's last id that may be a stop token (an EOS id, or one of the request's stop_token_ids) is
held back until the next chunk: an engine never sends a token after a stop token it honours, so
when the finish arrives on an empty chunk (a legal chunking) the held id is the stop token and is
dropped, exactly as when it arrives together with its finish. Without the hold, the stop token's
text (`<|im_end|>` when special tokens are kept) would already have been sent. Only the text
waits: the id's metadata (counts, logprobs, token_ids) stays with the chunk that brought it.

The state is a short JSON list (`to_state` / `from_state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from core.detokenizer import IncrementalDetokenizer, decode_params
from core.model import ModelInfo
from core.stop import StopStringMatcher, cut_at_stop_string, drop_stop_token, normalize_stop

_NO_IDS: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TextOptions:
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    stop: tuple[str, ...] = ()
    include_stop_str_in_output: bool = False
    min_tokens: int = 0
    ignore_eos: bool = False
    stop_token_ids: tuple[int, ...] = ()

    @classmethod
    def from_request(cls, request: Any, *, preserve_special: bool = False) -> TextOptions:
        """vLLM's derender rule (docs/vllm-wire-spec.md §2.4 step 1): the request's knobs; `preserve_special` (a parser
        reads markers) forces special tokens into the text."""
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

    @classmethod
    def from_sampling(cls, sampling: dict[str, Any]) -> TextOptions:
        """`vllm serve`'s rule: the rendered sampling params (which carry the parser's adjustments,
        e.g. hermes keeps special tokens), stop strings included."""
        skip = sampling.get("skip_special_tokens", True) is not False
        return cls(skip_special_tokens=skip,
                   spaces_between_special_tokens=sampling.get("spaces_between_special_tokens", True) is not False
                   or skip,
                   stop=tuple(normalize_stop(sampling.get("stop"))),
                   include_stop_str_in_output=bool(sampling.get("include_stop_str_in_output")),
                   min_tokens=int(sampling.get("min_tokens") or 0),
                   ignore_eos=bool(sampling.get("ignore_eos")),
                   stop_token_ids=tuple(sampling.get("stop_token_ids") or ()))


def drop_stop(model: ModelInfo, opts: TextOptions, token_ids: Sequence[int], finish_reason: str | None,
              stop_reason: int | str | None) -> tuple[Sequence[int], int | str | None]:
    return drop_stop_token(token_ids, finish_reason, stop_reason, primary_eos_id=model.primary_eos_token_id,
                           eos_ids=model.eos_token_ids, stop_token_ids=opts.stop_token_ids,
                           ignore_eos=opts.ignore_eos,
                           include_stop_str_in_output=opts.include_stop_str_in_output)


def _detokenizer(model: ModelInfo, opts: TextOptions, seed_ids: Sequence[int] | None) -> IncrementalDetokenizer:
    return IncrementalDetokenizer.seeded(model.tokenizer, seed_ids, skip_special_tokens=opts.skip_special_tokens,
                                         spaces_between_special_tokens=opts.spaces_between_special_tokens)


def decode_complete(model: ModelInfo, opts: TextOptions, token_ids: Sequence[int], finish_reason: str | None,
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
    detok = _detokenizer(model, opts, seed_ids)
    head = detok.feed(ids[:opts.min_tokens]) if opts.min_tokens else ""
    tail = detok.feed(ids[opts.min_tokens:])
    text, matched = cut_at_stop_string(head + tail, len(tail), stops, opts.include_stop_str_in_output)
    if matched is not None:
        stop_reason = matched
    return text, stop_reason


class TextStep(NamedTuple):
    """What one engine chunk of one choice produced (a tuple: one per chunk, on the hot path)."""

    text: str
    text_ids: Sequence[int]        # the ids whose text this is (a held stop-token candidate moves on)
    kept: int                      # how many of the chunk's own ids count (all, or up to a stop-string cut)
    finish_reason: str | None
    stop_reason: int | str | None


_step = tuple.__new__  # a TextStep without NamedTuple's Python-level constructor (the hot path)


class TextDecoder:
    """Streaming text of one choice. Cheap to build; state is `to_state()`."""

    __slots__ = ("model", "opts", "detok", "matcher", "decoded", "done", "held", "_holdable")

    def __init__(self, model: ModelInfo, opts: TextOptions, detok: IncrementalDetokenizer,
                 matcher: StopStringMatcher | None, decoded: int = 0, done: bool = False,
                 held: Sequence[int] = ()) -> None:
        self.model = model
        self.opts = opts
        self.detok = detok
        self.matcher = matcher
        self.decoded = decoded  # ids fed to the detokenizer (for min_tokens)
        self.done = done
        self.held = list(held)  # at most one id: a possible stop token whose finish may come next
        # with include_stop_str_in_output a stop token is output text like any other: nothing to hold
        if opts.include_stop_str_in_output:
            self._holdable: frozenset[int] = frozenset()
        elif opts.stop_token_ids or opts.ignore_eos:
            self._holdable = frozenset((*opts.stop_token_ids, *(() if opts.ignore_eos else model.eos_token_ids)))
        else:  # the usual request: the model's own set, built once
            self._holdable = model.eos_token_id_set

    @classmethod
    def start(cls, model: ModelInfo, opts: TextOptions, prompt_token_ids: Sequence[int] | None) -> TextDecoder:
        matcher = StopStringMatcher(opts.stop, opts.include_stop_str_in_output) if opts.stop else None
        return cls(model, opts, _detokenizer(model, opts, prompt_token_ids), matcher)

    def plain(self, token_ids: Sequence[int]) -> bool:
        """Whether a chunk of these (non-empty) ids, without a finish, is only decoded: nothing
        held, no stop strings, no possible stop token last (the common chunk)."""
        return not self.held and self.matcher is None and token_ids[-1] not in self._holdable

    def step(self, token_ids: Sequence[int], finish_reason: str | None, stop_reason: int | str | None) -> TextStep:
        if self.done:
            return TextStep("", _NO_IDS, 0, None, None)
        if finish_reason is None and token_ids and self.plain(token_ids):  # the common chunk: decode it, nothing else
            self.decoded += len(token_ids)
            return _step(TextStep, (self.detok.feed(token_ids), token_ids, len(token_ids), None, None))
        return self.step_general(token_ids, finish_reason, stop_reason)

    def step_general(self, token_ids: Sequence[int], finish_reason: str | None, stop_reason: int | str | None
                     ) -> TextStep:
        """`step` for a chunk that is not plain (a finish, a held or holdable stop token, stop
        strings), of a decoder not done: the caller has checked both."""
        held = self.held
        matcher = self.matcher
        if (matcher is not None and finish_reason is None and not held and len(token_ids) == 1
                and token_ids[0] not in self._holdable):
            # one id while stop strings are watched (a stream's usual chunk with `stop`): the loop
            # below without its lists
            self.decoded += 1
            text = matcher.feed(self.detok.step(token_ids[0]), countable=self.decoded > self.opts.min_tokens)
            if matcher.matched is None:
                return _step(TextStep, (text, token_ids, 1, None, None))
            self.done = True
            return _step(TextStep, (text, token_ids, 1, "stop", matcher.matched))
        ids: Sequence[int] = held + list(token_ids) if held else token_ids
        if finish_reason is None and ids and ids[-1] in self._holdable:
            self.held = [ids[-1]]
            ids = ids[:-1]
        elif held:
            self.held = []
        text_ids = ids
        if finish_reason == "stop":
            ids, stop_reason = drop_stop(self.model, self.opts, ids, finish_reason, stop_reason)
        kept = len(token_ids)
        if matcher is None:
            text = self.detok.feed(ids)
            self.decoded += len(ids)
        else:
            parts = []
            min_tokens = self.opts.min_tokens
            detok_step = self.detok.step
            for j, tid in enumerate(ids):
                piece = detok_step(tid)
                self.decoded += 1
                parts.append(matcher.feed(piece, countable=self.decoded > min_tokens))
                if matcher.matched is not None:
                    # ids after the match are dropped: of the chunk's own ids, those up to it
                    text_ids = text_ids[:j + 1]
                    kept = max(0, j + 1 - len(held))
                    finish_reason, stop_reason = "stop", matcher.matched
                    self.held = []
                    break
            if matcher.matched is None and finish_reason is not None:
                parts.append(matcher.flush())
            text = "".join(parts)
        if finish_reason is not None:
            self.done = True
        return _step(TextStep, (text, text_ids, kept, finish_reason, stop_reason))

    # -- state --------------------------------------------------------------------------

    def to_state(self) -> list[Any]:
        return [self.detok.to_state(), None if self.matcher is None else self.matcher.to_state(),
                self.decoded, self.done, self.held]

    @classmethod
    def from_state(cls, model: ModelInfo, opts: TextOptions, state: Any) -> TextDecoder:
        # a 4-item state comes from a server before the held stop token: nothing held
        if not (isinstance(state, list) and len(state) in (4, 5)):
            raise ValueError("decoder state must be [detokenizer, stop matcher, decoded, done, held]")
        detok_state, matcher_state, decoded, done = state[:4]
        held = state[4] if len(state) == 5 else []
        if not isinstance(decoded, int) or isinstance(decoded, bool) or decoded < 0 or not isinstance(done, bool):
            raise ValueError("decoder counters are malformed")
        if not (isinstance(held, list) and len(held) <= 1
                and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in held)):
            raise ValueError("held stop token is malformed")
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
        return cls(model, opts, detok, matcher, decoded, done, held)
