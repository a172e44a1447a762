"""The reference engine's logic: what a `vllm serve --tokens-only` would answer, without a GPU.

Sans-IO: request validation, reply selection and the per-choice token plans, and the exact JSON
shapes of `/inference/v1/generate` (docs/vllm-wire-spec.md §2.3, vLLM 0.33 field order and key sets). The aiohttp
server in `proxy.reference_engine` only paces and writes what this module builds, so tests can
assert the wire format without a socket and the server stays a thin loop.

A "reply" is an assistant turn as text (reasoning `<think>` and `<tool_call>` markup welcome),
tokenized once with the model's tokenizer; generation replays it and then the EOS id, exactly
where a real model would stop. Choice `i` of a request gets reply `(crc32(prompt) + i) % len`,
unless a reply carries a `when` substring found in the decoded prompt tail (handy for demos:
ask about the weather, get a tool call).
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.errors import RequestError, bad_request
from core.model import ModelInfo


def invalid(message: str, parameter: str, value: Any) -> RequestError:
    """vLLM's SamplingParams check failure: `<message> (parameter=<p>, value=<v>)`, param = <p>."""
    return RequestError(f"{message} (parameter={parameter}, value={value})", 400, "BadRequestError", parameter)

DEFAULT_REPLIES: list[str] = [
    "<think>\nThe user said hello. A short, friendly answer is best.\n</think>\n\n"
    "Hello! I am a reference engine replaying canned replies. How can I help you today?",
    "<think>\nThe user wants the weather, so I will call the get_weather tool for Paris.\n</think>\n\n"
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
    "</tool_call>",
    "Paris is the capital of France. Its best-known landmark, the Eiffel Tower, opened in 1889. "
    "Bonjour, 東京 and 🙂 decode across token boundaries too.",
]
# the demo asks about the weather: answer with the tool call whatever the prompt hash says
DEFAULT_WHEN = {1: "weather"}

MAX_NUM_SEQS = 256  # vLLM's default --max-num-seqs
MAX_LOGPROBS = 20  # vLLM's default --max-logprobs
STOP_STRINGS_MESSAGE = ("stop strings are not supported on a --tokens-only server because detokenization "
                        "is disabled. Check stop strings on the coordinator, or use stop_token_ids.")


@dataclass(frozen=True)
class Reply:
    text: str
    token_ids: tuple[int, ...]
    when: str | None = None


def parse_replies(text: str) -> list[tuple[str, str | None]]:
    """A replies file: a JSON list, or JSON lines; each item a string or {"text"|"content", "when"?}."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("replies file is empty")
    try:
        items = json.loads(stripped)
        if not isinstance(items, list):
            items = [items]
    except json.JSONDecodeError:
        items = [json.loads(line) for line in stripped.splitlines() if line.strip()]
    replies: list[tuple[str, str | None]] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            replies.append((item, None))
        elif isinstance(item, dict) and isinstance(item.get("text", item.get("content")), str):
            when = item.get("when")
            replies.append((item.get("text", item.get("content")), when if isinstance(when, str) else None))
        else:
            raise ValueError(f"reply {i} is neither a string nor an object with a string 'text'")
    if not replies:
        raise ValueError("replies file has no replies")
    return replies


class ReplyBook:
    """Replies tokenized once, and the rule that picks one per choice."""

    def __init__(self, model: ModelInfo, replies: Sequence[tuple[str, str | None]] | None = None) -> None:
        if replies is None:
            replies = [(text, DEFAULT_WHEN.get(i)) for i, text in enumerate(DEFAULT_REPLIES)]
        tok = model.tokenizer
        self.model = model
        self.replies = [Reply(text, tuple(tok.encode(text, add_special_tokens=False)), when)
                        for text, when in replies]
        self._conditional = [r for r in self.replies if r.when]

    def pick(self, prompt_ids: Sequence[int], index: int) -> Reply:
        if self._conditional:
            tail = self.model.tokenizer.decode(list(prompt_ids[-2048:]), skip_special_tokens=True).lower()
            for reply in self._conditional:
                if reply.when.lower() in tail:
                    return reply
        digest = zlib.crc32(b",".join(str(i).encode() for i in prompt_ids[-4096:]))
        return self.replies[(digest + index) % len(self.replies)]


# -- the request -----------------------------------------------------------------------------------

class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: bool = False
    continuous_usage_stats: bool = False


class GenerateRequestIn(BaseModel):
    """The fields of vLLM's GenerateRequest that a tokens-only engine acts on (others are accepted)."""

    model_config = ConfigDict(extra="ignore")
    request_id: str | None = None
    token_ids: list[int] = Field(min_length=1)
    sampling_params: dict[str, Any]
    model: str | None = None
    return_token_ids: bool | None = None
    output_mode: Literal["tokens", "text", "derender"] = "tokens"
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    kv_transfer_params: dict[str, Any] | None = None

    @field_validator("token_ids")
    @classmethod
    def _non_negative(cls, ids: list[int]) -> list[int]:
        if any(i < 0 for i in ids):
            raise ValueError("token ids must be non-negative")
        return ids


@dataclass
class Sampling:
    """The SamplingParams values the reference engine honours, validated as vLLM does."""

    n: int = 1
    max_tokens: int = 16
    min_tokens: int = 0
    stop_token_ids: frozenset[int] = frozenset()
    ignore_eos: bool = False
    logprobs: int | None = None
    forced_token: int | None = None  # a logit_bias >= FORCING_BIAS (or a single allowed id) wins every step
    prompt_logprobs: int | None = None


FORCING_BIAS = 50.0


def _forced_token(params: dict[str, Any]) -> int | None:
    """The token a real model would emit at every step under this bias (how tests force EOS / stop ids)."""
    allowed = params.get("allowed_token_ids")
    if isinstance(allowed, list) and len(allowed) == 1 and isinstance(allowed[0], int):
        return allowed[0]
    bias = params.get("logit_bias")
    if isinstance(bias, dict) and bias:
        try:
            token, value = max(((int(k), float(v)) for k, v in bias.items()), key=lambda kv: kv[1])
        except (TypeError, ValueError):
            return None
        if value >= FORCING_BIAS:
            return token
    return None


def _prompt_logprobs(params: dict[str, Any], max_logprobs: int) -> int | None:
    value = params.get("prompt_logprobs")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise bad_request(f"prompt_logprobs must be non-negative or -1, got {value}.")
    requested = 1 << 30 if value == -1 else value
    if requested > max_logprobs:
        raise bad_request(f"Requested prompt logprobs of {requested}, which is greater than max allowed: "
                          f"{max_logprobs}")
    return value


def _number(params: dict[str, Any], key: str, default: Any) -> Any:
    value = params.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_request(f"{key} must be a number, got {value!r}.")
    return value


def parse_sampling(params: dict[str, Any], prompt_len: int, max_model_len: int,
                   max_logprobs: int = MAX_LOGPROBS) -> Sampling:
    """Validate sampling_params as the engine does (docs/vllm-wire-spec.md §3.2): unknown keys
    dropped, ranges checked."""
    if params.get("stop"):
        raise bad_request(STOP_STRINGS_MESSAGE)
    temperature = float(_number(params, "temperature", 1.0))
    if temperature < 0 or temperature > 2:
        raise invalid(f"temperature must be in [0, 2], got {temperature}.", "temperature", temperature)
    top_p = float(_number(params, "top_p", 1.0))
    if not 0 < top_p <= 1:
        raise invalid(f"top_p must be in (0, 1], got {top_p}.", "top_p", top_p)
    for key in ("presence_penalty", "frequency_penalty"):
        value = float(_number(params, key, 0.0))
        if not -2 <= value <= 2:
            raise invalid(f"{key} must be in [-2, 2], got {value}.", key, value)
    n = _number(params, "n", 1)
    if not isinstance(n, int) or n < 1:
        raise invalid(f"n must be at least 1, got {n}.", "n", n)
    if n > MAX_NUM_SEQS:
        raise bad_request(f"sampling_params.n must be at most the server's max_num_seqs "
                          f"({MAX_NUM_SEQS}), got {n}.")
    room = max_model_len - prompt_len
    if room < 1:
        raise bad_request(f"The decoder prompt (length {prompt_len}) is longer than the maximum model "
                          f"length of {max_model_len}. Make sure that `max_model_len` is no smaller than "
                          "the number of text tokens.")
    if "max_tokens" in params and params["max_tokens"] is not None:  # presence is tracked per key
        max_tokens = _number(params, "max_tokens", 16)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise invalid(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens)
        max_tokens = min(max_tokens, room)
    else:
        max_tokens = room
    min_tokens = _number(params, "min_tokens", 0)
    if not isinstance(min_tokens, int) or min_tokens < 0:
        raise bad_request(f"min_tokens must be greater than or equal to 0, got {min_tokens}.")
    if min_tokens > max_tokens:
        raise bad_request(f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.")
    logprobs = params.get("logprobs")
    if logprobs is not None:
        if isinstance(logprobs, bool) or not isinstance(logprobs, int) or logprobs < -1:
            raise bad_request(f"logprobs must be non-negative or -1, got {logprobs}.")
        requested = 1 << 30 if logprobs == -1 else logprobs
        if requested > max_logprobs:
            raise bad_request(f"Requested sample logprobs of {requested}, which is greater than max allowed: "
                              f"{max_logprobs}")
    stop_ids = params.get("stop_token_ids") or []
    if not isinstance(stop_ids, list) or not all(isinstance(i, int) for i in stop_ids):
        raise bad_request("stop_token_ids must be a list of integers.")
    return Sampling(n=n, max_tokens=max_tokens, min_tokens=min_tokens, stop_token_ids=frozenset(stop_ids),
                    ignore_eos=bool(params.get("ignore_eos")), logprobs=logprobs,
                    forced_token=_forced_token(params), prompt_logprobs=_prompt_logprobs(params, max_logprobs))


def check_request(req: GenerateRequestIn, model: ModelInfo) -> Sampling:
    """Everything that makes vLLM answer 400/404 before generating."""
    if not model.is_served(req.model):
        from core.errors import model_not_found
        raise model_not_found(req.model or "", model.served_model_names)
    if req.output_mode != "tokens":
        raise bad_request(
            f"output_mode={req.output_mode!r} requires a tokenizer, but this server does not load one "
            "(--tokens-only or --skip-tokenizer-init). Send the request to a server that loads a tokenizer, "
            "or use output_mode='tokens'.")
    top = model.max_token_id
    bad = next((i for i in req.token_ids if i > top), None)
    if bad is not None:
        raise bad_request(f"Token id {bad} is out of vocabulary")
    return parse_sampling(req.sampling_params, len(req.token_ids), model.max_model_len)


# -- generation --------------------------------------------------------------------------------------

@dataclass
class ChoicePlan:
    """The whole output of one choice, decided up front; streaming just walks it."""

    index: int
    token_ids: list[int]
    finish_reason: str
    stop_reason: int | None
    sent: int = 0  # tokens already streamed
    done: bool = False


def plan_choice(index: int, reply: Reply, sampling: Sampling, eos_ids: Sequence[int]) -> ChoicePlan:
    """Replay reply + EOS (cycling when EOS is ignored) under vLLM's stop checks, in its order:
    nothing stops before min_tokens (stop ids are not sampled then: the reply goes on instead);
    then EOS / stop_token_ids (finish "stop", stop_reason = the id); then max_tokens ("length").
    A forcing logit_bias replaces every sampled token, as it would with a real model."""
    stops = set(sampling.stop_token_ids)
    if not sampling.ignore_eos:
        stops.update(eos_ids)
    source = list(reply.token_ids) + ([eos_ids[0]] if eos_ids else [])
    if not source:
        source = [0]
    forced = sampling.forced_token
    out: list[int] = []
    pos = 0
    while True:
        count = len(out) + 1
        if forced is not None and not (forced in stops and count <= sampling.min_tokens):
            tok = forced
        else:
            tok = source[pos % len(source)]
            pos += 1
            if count <= sampling.min_tokens and tok in stops and any(t not in stops for t in source):
                continue  # vLLM masks stop ids until min_tokens: a real model samples something else
        out.append(tok)
        if count >= sampling.min_tokens and tok in stops:
            return ChoicePlan(index, out, "stop", tok)
        if count >= sampling.max_tokens:
            return ChoicePlan(index, out, "length", None)


def fake_logprobs(token_id: int, position: int, k: int, vocab_size: int) -> dict[str, Any]:
    """Deterministic logprobs in the 0.33 tokens shape: the sampled token first, then the top k,
    uncut (k entries when the sampled token is in the top k, k+1 when it is not).

    The sampled token is rank 1 at most positions, rank 2 or 3 at some, so both cases occur."""
    rank = 3 if position % 6 == 4 else 2 if position % 5 == 3 else 1

    def lp(r: int) -> float:
        return round(-0.5 - 1.25 * (r - 1) - (position % 3) * 0.015625, 6)

    sampled = {"token_id": token_id, "logprob": lp(rank), "rank": rank}
    top = [sampled]
    step = 7919
    alt = token_id
    for r in range(1, k + 1):
        if r == rank:
            continue
        alt = (alt + step) % vocab_size
        if alt == token_id:
            alt = (alt + 1) % vocab_size
        top.append({"token_id": alt, "logprob": lp(r), "rank": r})
    return {"token_id": token_id, "logprob": sampled["logprob"], "rank": rank, "top_logprobs": top}


def weight_versions(tokens: int) -> list[dict[str, Any]]:
    """The engine's weight-version span over a finished choice's output (one version, "default")."""
    return [{"version": "default", "start": 0, "end": tokens}]


def clamp_logprob(value: float) -> float:
    return -9999.0 if math.isnan(value) else max(value, -9999.0)


@dataclass
class Generation:
    """One generate request: its id, prompt, options and per-choice plans."""

    request_id: str
    prompt_ids: list[int]
    sampling: Sampling
    return_token_ids: bool
    include_usage: bool
    continuous_usage: bool
    model_name: str
    vocab_size: int
    created: int
    plans: list[ChoicePlan] = field(default_factory=list)
    prompt_sent: bool = False

    @property
    def completion_tokens(self) -> int:
        return sum(p.sent for p in self.plans)

    def logprobs_for(self, plan: ChoicePlan, start: int, stop: int) -> dict[str, Any] | None:
        k = self.sampling.logprobs
        if k is None:
            return None
        k = min(k, MAX_LOGPROBS) if k >= 0 else MAX_LOGPROBS
        return {"content": [fake_logprobs(plan.token_ids[p], p, k, self.vocab_size) for p in range(start, stop)]}

    # -- streaming -------------------------------------------------------------------------------

    def steps(self) -> Iterator[list[dict[str, Any]]]:
        """One engine step at a time: one token per unfinished choice, each its own event.

        With n>1 the order of choices rotates per step, so indexes interleave as in vLLM."""
        step = 0
        live = [p for p in self.plans if not p.done]
        while live:
            rot = step % len(live)
            events = [self.token_event(p) for p in live[rot:] + live[:rot]]
            yield events
            live = [p for p in live if not p.done]
            step += 1

    def token_event(self, plan: ChoicePlan) -> dict[str, Any]:
        start = plan.sent
        plan.sent += 1
        finished = plan.sent >= len(plan.token_ids)
        plan.done = finished
        return self._event(plan, plan.token_ids[start:plan.sent],
                           plan.finish_reason if finished else None,
                           plan.stop_reason if finished else None,
                           self.logprobs_for(plan, start, plan.sent), finished)

    def abort_events(self) -> list[dict[str, Any]]:
        """The terminal outputs of an aborted request: empty token_ids, finish_reason "abort"."""
        events = []
        for plan in self.plans:
            if not plan.done:
                plan.done = True
                events.append(self._event(plan, [], "abort", None, None if self.sampling.logprobs is None
                                          else {"content": []}, True))
        return events

    def _event(self, plan: ChoicePlan, ids: list[int], finish: str | None, stop_reason: int | None,
               logprobs: dict[str, Any] | None, final: bool) -> dict[str, Any]:
        event: dict[str, Any] = {"request_id": self.request_id, "usage": None}
        if self.continuous_usage:
            prompt = len(self.prompt_ids)
            event["usage"] = {"prompt_tokens": prompt, "total_tokens": prompt + plan.sent,
                              "completion_tokens": plan.sent, "prompt_tokens_details": None,
                              "completion_tokens_details": None}
        if self.return_token_ids and not self.prompt_sent:
            event["prompt_token_ids"] = self.prompt_ids
            self.prompt_sent = True
        event["output_mode"] = "tokens"
        event["choices"] = [{"index": plan.index, "finish_reason": finish, "stop_reason": stop_reason,
                             "token_ids": ids, "routed_experts": None, "sampling_mask": None,
                             "weight_versions": weight_versions(plan.sent) if final else None,
                             "logprobs": logprobs}]
        return event

    def usage_event(self) -> dict[str, Any]:
        prompt, completion = len(self.prompt_ids), self.completion_tokens
        return {"request_id": self.request_id,
                "usage": {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                          "completion_tokens": completion},
                "output_mode": "tokens", "choices": []}

    # -- non-streaming ---------------------------------------------------------------------------

    def prompt_logprobs(self) -> list[Any] | None:
        """vLLM's prompt_logprobs: null for the first position, then {"<id>": {logprob, rank,
        decoded_token}} with the prompt token first and the top k after it (no tokenizer: no text)."""
        k = self.sampling.prompt_logprobs
        if k is None:
            return None
        k = min(k, MAX_LOGPROBS) if k >= 0 else MAX_LOGPROBS
        out: list[Any] = [None]
        for pos in range(1, len(self.prompt_ids)):
            entry = fake_logprobs(self.prompt_ids[pos], pos, k, self.vocab_size)
            out.append({str(c["token_id"]): {"logprob": c["logprob"], "rank": c["rank"], "decoded_token": None}
                        for c in entry["top_logprobs"]})
        return out

    def response(self, aborted: bool = False) -> dict[str, Any]:
        """The GenerateTokensResponse (full dump, vLLM field order)."""
        choices = []
        for plan in self.plans:
            if aborted and not plan.done:
                ids, finish, stop_reason = plan.token_ids[:plan.sent], "abort", None
            else:
                plan.sent = len(plan.token_ids)
                ids, finish, stop_reason = plan.token_ids, plan.finish_reason, plan.stop_reason
            plan.done = True
            choices.append({"index": plan.index, "finish_reason": finish, "stop_reason": stop_reason,
                            "token_ids": ids, "routed_experts": None, "sampling_mask": None,
                            "weight_versions": weight_versions(len(ids)),
                            "logprobs": self.logprobs_for(plan, 0, len(ids))})
        prompt, completion = len(self.prompt_ids), self.completion_tokens
        return {
            "request_id": self.request_id, "model": self.model_name, "created": self.created,
            "usage": {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                      "completion_tokens": completion, "prompt_tokens_details": None,
                      "completion_tokens_details": None},
            "prompt_logprobs": self.prompt_logprobs(), "prompt_token_id_logprobs": None,
            "prompt_token_ids": self.prompt_ids if self.return_token_ids else None,
            "mm_placeholders": None, "metrics": None, "kv_transfer_params": None, "ec_transfer_params": None,
            "output_mode": "tokens", "choices": choices,
        }


def new_generation(req: GenerateRequestIn, sampling: Sampling, replies: ReplyBook, model: ModelInfo,
                   engine_request_id: str, created: int) -> Generation:
    opts = req.stream_options if req.stream else None
    include_usage = bool(opts and opts.include_usage)
    gen = Generation(request_id=engine_request_id, prompt_ids=req.token_ids, sampling=sampling,
                     return_token_ids=bool(req.return_token_ids), include_usage=include_usage,
                     continuous_usage=include_usage and bool(opts and opts.continuous_usage_stats),
                     model_name=model.name, vocab_size=model.tokenizer.max_token_id + 1,
                     created=created)
    eos = model.eos_token_ids
    gen.plans = [plan_choice(i, replies.pick(req.token_ids, i), sampling, eos) for i in range(sampling.n)]
    return gen


def engine_request_id(body_request_id: str | None, header_request_id: str | None, random_hex: str) -> str:
    """`generate-tokens-` + (X-Request-Id header | body request_id | 16 hex), as vLLM names it."""
    return "generate-tokens-" + (header_request_id or body_request_id or random_hex)


def missing_request_ids() -> RequestError:
    # vLLM raises a FastAPI HTTPException here, which its handler renders with type "Bad Request"
    return RequestError("Missing 'request_ids' in request body", 400, "Bad Request")
