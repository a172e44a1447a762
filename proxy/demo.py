"""`derender-proxy demo`: the whole loop on one machine, no GPU, no download.

It starts the reference engine (a CPU stand-in for `vllm serve --tokens-only`) and the proxy in
front of it, both on free loopback ports in this process, with the embedded Qwen3 tokenizer and
chat template and the parser flags a Qwen3 deployment uses (`--tool-call-parser hermes
--reasoning-parser qwen3 --enable-auto-tool-choice`). Then it asks, through the official `openai`
client, a streaming chat question that makes the engine call a tool, and prints the reasoning,
the content and the tool call as they stream. Without `--keep-running` it stops both servers and
exits 0; with it, it prints where the proxy listens and how to point an OpenAI client at it, and
stops cleanly on Ctrl-C (or SIGTERM).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any, TextIO

from aiohttp import web

DEMO_TOKEN_DELAY_MS = 15.0  # slow enough to watch the stream, fast enough to finish in ~2 s
DEMO_SHUTDOWN_TIMEOUT = 5.0
DEMO_PARSERS = {"tool_call_parser": "hermes", "reasoning_parser": "qwen3", "enable_auto_tool_choice": True}
DEMO_QUESTION = "What's the weather like in Paris right now?"
# what the reference engine "generates" when the prompt mentions the weather: Qwen3-style reasoning,
# a line of content, then a hermes tool call (the parsers split them into the three streams)
DEMO_WEATHER_REPLY = (
    "<think>\nThe user asks about the current weather in Paris. I have a get_weather tool, "
    "so I will call it with the city and Celsius.\n</think>\n\n"
    "Let me look up the current weather in Paris for you.\n\n"
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
    "</tool_call>")
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}


async def start_site(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Run `app` on host:port (0: a free port); return its runner and base URL."""
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None,
                           shutdown_timeout=DEMO_SHUTDOWN_TIMEOUT)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_port = runner.addresses[0][1]
    return runner, f"http://{host}:{bound_port}"


class StreamPrinter:
    """Prints reasoning, content and tool-call deltas with a header whenever the kind changes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.kind: str | None = None
        self.held = ""
        self.seen: dict[str, str] = {"reasoning": "", "content": "", "tool_calls": ""}

    def emit(self, kind: str, text: str, header: str | None = None) -> None:
        if not text and header is None:
            return
        self.seen[kind] += text
        if kind != self.kind or header is not None:
            self.out.write(f"\n[{header or kind}] ")
            self.kind, self.held = kind, ""
            text = text.lstrip("\n")  # Qwen3's reasoning starts with the newline after <think>
        # newlines at the end of a section are held back: shown only if the same section goes on
        body = text.rstrip("\n")
        if body:
            self.out.write(self.held + body)
            self.held = ""
        self.held += text[len(body):]
        self.out.flush()

    def chunk(self, chunk: Any) -> str | None:
        finish = None
        for choice in chunk.choices:
            delta = choice.delta
            extra = delta.model_extra or {}
            reasoning = extra.get("reasoning") or extra.get("reasoning_content")
            if reasoning:
                self.emit("reasoning", reasoning)
            if delta.content:
                self.emit("content", delta.content)
            for call in delta.tool_calls or []:
                fn = call.function
                if fn is not None and fn.name:
                    self.emit("tool_calls", "", header=f"tool call {call.id}: {fn.name}")
                if fn is not None and fn.arguments:
                    self.emit("tool_calls", fn.arguments)
            finish = choice.finish_reason or finish
        return finish


async def chat_once(base_url: str, out: TextIO, api_key: str = "demo") -> dict[str, Any]:
    """One streaming chat with a tool through the official client; returns what was streamed."""
    import openai

    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=api_key, max_retries=0, timeout=60)
    try:
        model = (await client.models.list()).data[0].id
        out.write(f"\n> user: {DEMO_QUESTION}\n  (model {model}, tools: get_weather, stream=True)\n")
        stream = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": DEMO_QUESTION}], tools=[WEATHER_TOOL],
            stream=True, stream_options={"include_usage": True})
        printer = StreamPrinter(out)
        finish, usage = None, None
        async for chunk in stream:
            finish = printer.chunk(chunk) or finish
            if chunk.usage is not None:
                usage = chunk.usage
        out.write(f"\n\nfinish_reason: {finish}")
        if usage is not None:
            out.write(f"   usage: prompt {usage.prompt_tokens}, completion {usage.completion_tokens} tokens")
        out.write("\n")
        out.flush()
        return {"finish_reason": finish, **printer.seen}
    finally:
        await client.close()


def _client_hint(url: str) -> str:
    return (f"\nThe proxy is listening on {url}\n"
            "Point any OpenAI client at it:\n"
            f"  export OPENAI_BASE_URL={url}/v1 OPENAI_API_KEY=unused\n"
            f"  python -c \"import openai; print(openai.OpenAI().chat.completions.create("
            f"model='{{model}}', messages=[{{'role': 'user', 'content': 'hello'}}]).choices[0].message)\"\n"
            f"  curl {url}/v1/chat/completions -H 'Content-Type: application/json' "
            f"-d '{{\"model\": \"{{model}}\", \"messages\": [{{\"role\": \"user\", \"content\": \"hello\"}}]}}'\n"
            f"Metrics: {url}/metrics   Press Ctrl-C to stop.\n")


async def run_demo(keep_running: bool = False, host: str = "127.0.0.1", port: int = 0,
                   engine_port: int = 0, token_delay_ms: float = DEMO_TOKEN_DELAY_MS,
                   out: TextIO = sys.stdout) -> int:
    from proxy.app import create_app
    from proxy.config import ServerConfig
    from proxy.model_loader import load_served_model
    from core.reference_engine import DEFAULT_REPLIES, ReplyBook
    from proxy.reference_engine import create_reference_app

    model = load_served_model(ServerConfig())  # the embedded Qwen3 tokenizer and chat template
    replies = ReplyBook(model, [(DEMO_WEATHER_REPLY, "weather"),
                                *((text, None) for text in DEFAULT_REPLIES if "<tool_call>" not in text)])
    engine_runner, engine_url = await start_site(
        create_reference_app(model, replies=replies, token_delay_ms=token_delay_ms), "127.0.0.1", engine_port)
    proxy_runner: web.AppRunner | None = None
    try:
        config = ServerConfig(engine_url=[engine_url], host=host, port=port, access_log=False,
                              shutdown_timeout=DEMO_SHUTDOWN_TIMEOUT, **DEMO_PARSERS)
        proxy_runner, proxy_url = await start_site(create_app(config, model), host, port)
        flags = " ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in DEMO_PARSERS.items())
        out.write(f"derender-proxy demo\n  engine: reference engine ({model.name}, tokens only) at {engine_url}\n"
                  f"  proxy:  {proxy_url}  {flags}\n")
        out.flush()
        result = await chat_once(proxy_url, out)
        if not (result["tool_calls"] or result["content"]):
            out.write("demo failed: the stream carried neither content nor a tool call\n")
            return 1
        if keep_running:
            out.write(_client_hint(proxy_url).replace("{model}", model.served_model_names[0]))
            out.flush()
            await _wait_for_stop_signal()
            out.write("stopping...\n")
            out.flush()
        return 0
    finally:
        if proxy_runner is not None:
            await proxy_runner.cleanup()
        await engine_runner.cleanup()


async def _wait_for_stop_signal() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def add_demo_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep-running", action="store_true",
                        help="stay up after the demo chat; print how to point an OpenAI client at it")
    parser.add_argument("--host", default="127.0.0.1", help="where the proxy listens")
    parser.add_argument("--port", type=int, default=0, help="proxy port (default: a free port)")
    parser.add_argument("--engine-port", type=int, default=0, help="reference engine port (default: free)")
    parser.add_argument("--token-delay-ms", type=float, default=DEMO_TOKEN_DELAY_MS,
                        help="reference engine delay per token, to watch the stream")


def cmd_demo(args: argparse.Namespace) -> int:
    import logging
    import os

    from proxy.serving import new_event_loop

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "PyTorch was not found" banner

    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    loop = new_event_loop()
    try:
        return loop.run_until_complete(run_demo(
            keep_running=args.keep_running, host=args.host, port=args.port, engine_port=args.engine_port,
            token_delay_ms=args.token_delay_ms))
    except KeyboardInterrupt:
        return 130
    finally:
        loop.close()

