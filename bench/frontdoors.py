"""The three front doors' own CPU per request, in-process: chat completions, Responses, Messages.

    /work/venv/bin/python bench/frontdoors.py [--rounds 120]   # writes bench/results/frontdoors.md

`bench/loop.py` compares the front doors through real HTTP with a real engine; on a small virtual
machine its rows move 10-20% between runs (wakeups, other tenants), more than the 10% issues 12 and
13 compare. This benchmark takes the network, the engine and the event loop away and times only
what differs between the doors, the way the routes run it, for the loop benchmark's request (the
same conversation, tool and 347-token reply with reasoning, content and a hermes tool call):

* before the engine: the body parsed, validated and rendered (the time to first token's share);
* the whole request: that, plus the derender session, the writer and its first events, every
  engine event of the reply one token at a time through the writer, and its last events.

The three run interleaved (each round runs every door in turn, the order rotated), with the
garbage collector on and the start-up heap frozen as the server does; CPU time
(`time.process_time`). Reported: each door's median over the rounds and its ratio to chat's, and
the median of the rounds' paired ratios.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any, Callable

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench.loop as loop  # noqa: E402
from core.derender.adapters.chat import ChatStream  # noqa: E402
from core.derender.adapters.messages import MessagesStream  # noqa: E402
from core.derender.session import DerenderSession  # noqa: E402
from core.protocol.chat import ChatCompletionRequest  # noqa: E402
from core.protocol.messages import AnthropicMessagesRequest  # noqa: E402
from core.render import precheck_messages, render_chat  # noqa: E402
from core.render_responses import render_responses  # noqa: E402
from proxy.app import STATE, create_app  # noqa: E402
from proxy.config import ServerConfig  # noqa: E402
from proxy.embedded import embedded_model_dir  # noqa: E402
from proxy.http import validate  # noqa: E402
from proxy.model_loader import load_model  # noqa: E402
from proxy.responses_call import ResponsesCall  # noqa: E402
from proxy.routes.messages import messages_renderer  # noqa: E402
from proxy.routes.responses import validate_request  # noqa: E402

BODIES = {
    "chat completions": orjson.dumps({"model": "tiny-qwen3", "messages": loop.MESSAGES, "tools": loop.TOOLS,
                                      "stream": True, "stream_options": {"include_usage": True}}),
    "responses": orjson.dumps({"model": "tiny-qwen3", "input": loop.MESSAGES, "tools": loop.RESPONSES_TOOLS,
                               "stream": True, "store": False}),
    "messages": orjson.dumps({"model": "tiny-qwen3", "max_tokens": 4096, "messages": loop.MESSAGES,
                              "tools": loop.ANTHROPIC_TOOLS, "stream": True}),
}


class Doors:
    """The server's pieces (app state, model) and, per door, the route's steps."""

    def __init__(self) -> None:
        self.model = load_model(str(embedded_model_dir()), served_model_names=["tiny-qwen3"])
        config = ServerConfig(tool_call_parser="hermes", reasoning_parser="qwen3", enable_auto_tool_choice=True)
        self.app = create_app(config, self.model)
        self.state = self.app[STATE]
        self.request = types.SimpleNamespace(app=self.app, headers={})  # (what ResponsesCall reads)
        tokens = self.model.tokenizer.encode(loop.REPLY, add_special_tokens=False) + [self.model.eos_token_ids[0]]
        self.tokens = tokens

    def engine_events(self) -> list[dict[str, Any]]:
        """The reply as the engine streams it, one token an event."""
        last = len(self.tokens) - 1
        return [{"request_id": "r", "usage": None, "output_mode": "tokens", "choices": [{
            "index": 0, "finish_reason": "stop" if i == last else None, "stop_reason": None, "token_ids": [t],
            "routed_experts": None, "sampling_mask": None, "weight_versions": None, "logprobs": None}]}
            for i, t in enumerate(self.tokens)]

    # -- before the engine: what each route does with the body ------------------------------

    def chat_render(self, body: bytes) -> tuple[Any, dict[str, Any]]:
        payload = orjson.loads(body)
        precheck_messages(payload, self.model.max_model_len)
        req = validate(ChatCompletionRequest, payload)
        return req, render_chat(self.model, self.state.render, req, None)

    def responses_render(self, body: bytes) -> tuple[Any, Any]:
        req = validate_request(orjson.loads(body))
        return req, render_responses(self.model, self.state.render, req, prior_items=None, harmony_history=None)

    def messages_render(self, body: bytes) -> tuple[Any, Any]:
        req = validate(AnthropicMessagesRequest, orjson.loads(body), from_attributes=True)
        return req, messages_renderer(self.state).render(req, None)

    # -- the writer each route streams through ----------------------------------------------

    def chat_writer(self, rendered: tuple[Any, dict[str, Any]]) -> Any:
        req, gen = rendered
        settings = self.state.derender
        return ChatStream(DerenderSession.for_chat(settings, req, gen, settings.parser_for(req)), req,
                          prompt_token_ids=gen["token_ids"],
                          reasoning_field=settings.reasoning_field, request_id=gen["request_id"],
                          created=int(time.time()), model=self.model.name)

    def responses_writer(self, rendered: tuple[Any, Any]) -> Any:
        req, result = rendered
        return ResponsesCall(self.request, req, result, []).writer()

    def messages_writer(self, rendered: tuple[Any, Any]) -> Any:
        _, result = rendered
        gen, chat = result.generate_request, result.chat_request
        settings = self.state.derender
        session = DerenderSession.for_chat(settings, chat, gen, settings.parser_for(chat))
        return MessagesStream(session, ping_interval=None,
                              message_id=gen["request_id"], model=self.model.name)

    def door(self, name: str) -> tuple[Callable[[bytes], Any], Callable[[Any], Any]]:
        key = {"chat completions": "chat", "responses": "responses", "messages": "messages"}[name]
        return getattr(self, f"{key}_render"), getattr(self, f"{key}_writer")


def one_request(render: Callable, writer: Callable, body: bytes, events: list[dict[str, Any]]) -> int:
    """A whole streamed request through one door; returns the bytes it wrote."""
    stream = writer(render(body))
    written = sum(map(len, stream.head()))
    for event in events:
        written += sum(map(len, stream.feed(0, [event])))
    return written + sum(map(len, stream.close(None)))


def measure(doors: Doors, rounds: int, pre_repeats: int, full_repeats: int) -> dict[str, dict[str, list[float]]]:
    names = list(BODIES)
    out: dict[str, dict[str, list[float]]] = {name: {"pre": [], "full": []} for name in names}
    for name in names:  # warm every path once
        render, writer = doors.door(name)
        one_request(render, writer, BODIES[name], doors.engine_events())
    gc.collect()
    gc.freeze()  # (as the server does after start-up)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            render, writer = doors.door(name)
            body = BODIES[name]
            c0 = time.process_time()
            for _ in range(pre_repeats):
                render(body)
            out[name]["pre"].append((time.process_time() - c0) / pre_repeats)
            batches = [doors.engine_events() for _ in range(full_repeats)]  # (made outside the timing)
            c0 = time.process_time()
            for events in batches:
                one_request(render, writer, body, events)
            out[name]["full"].append((time.process_time() - c0) / full_repeats)
    return out


def report(results: dict[str, dict[str, list[float]]], tokens: int, rounds: int) -> str:
    chat = results["chat completions"]
    lines = [
        "# The front doors' own CPU per request (`bench/frontdoors.py`)",
        "",
        f"Recorded {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {len(__import__('os').sched_getaffinity(0))} "
        f"CPUs (Python {sys.version.split()[0]}), {rounds} rounds, the doors interleaved. The loop benchmark's request "
        f"and {tokens}-token reply (hermes + qwen3 parsers), one token per engine event, in-process: no network, "
        "engine or event loop. CPU time per request, median over the rounds; the ratio to chat is the median "
        "of each round's ratio (the same round, minutes apart at most).",
        "",
        "| front door | before the engine (us) | vs chat | whole streamed request (ms) | vs chat "
        "| tokens per CPU-second | vs chat |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, values in results.items():
        pre, full = statistics.median(values["pre"]), statistics.median(values["full"])
        pre_ratio = statistics.median(a / c for a, c in zip(values["pre"], chat["pre"]))
        full_ratio = statistics.median(a / c for a, c in zip(values["full"], chat["full"]))
        lines.append(f"| {name} | {pre * 1e6:.0f} | {pre_ratio:.2f}x | {full * 1e3:.2f} | {full_ratio:.2f}x "
                     f"| {tokens / full:.0f} | {1 / full_ratio:.2f}x |")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=120)
    parser.add_argument("--pre-repeats", type=int, default=50)
    parser.add_argument("--full-repeats", type=int, default=10)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "frontdoors.md"))
    args = parser.parse_args()
    doors = Doors()
    text = report(measure(doors, args.rounds, args.pre_repeats, args.full_repeats), len(doors.tokens), args.rounds)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
