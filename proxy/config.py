"""Server configuration: every command-line flag, in one dataclass.

Flag names follow `vllm serve` where vLLM has the same knob, so a deployment can pass the same
parser and template flags to the engine tier and to us (a mismatch silently changes the
content/reasoning/tool split: vLLM RFC #42729).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ServerConfig:
    model: str | None = None  # None: the embedded Qwen3 default
    tokenizer: str | None = None
    tokenizer_mode: str = "auto"  # vLLM's --tokenizer-mode: picks a non-Jinja renderer (core/renderers)
    served_model_name: list[str] = field(default_factory=list)
    chat_template: str | None = None
    default_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    trust_request_chat_template: bool = False
    request_template_timeout: float = 5.0  # seconds a request's own chat template may take to render
    max_model_len: int | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    enable_auto_tool_choice: bool = False
    exclude_tools_when_tool_choice_none: bool = False
    reasoning_effort_map: dict[str, str] = field(default_factory=dict)
    max_logprobs: int = 20
    max_choices: int = 1024  # prompts x n per request at most; 0: only vLLM's own limits
    reasoning_field: str = "reasoning"  # reasoning | reasoning_content | both
    host: str = "127.0.0.1"
    port: int = 8000
    max_request_bytes: int = 32 * 1024 * 1024
    request_body_timeout: float = 30.0  # seconds for a whole request body; 0: no limit
    max_connections: int = 0  # client connections per process; 0: half the open-file limit
    stream_state_secret: str | None = None
    # the engine tier (/v1/chat/completions and /v1/completions)
    engine_url: list[str] = field(default_factory=list)
    engine_api_key: str | None = None
    engine_connect_timeout: float = 5.0
    engine_first_token_timeout: float = 600.0
    engine_idle_timeout: float = 120.0
    engine_max_connections: int = 1024
    health_check_interval: float = 5.0
    prefix_affinity_tokens: int = 0  # 0: off; N: same first N prompt tokens -> same engine
    engine_max_concurrency: int = 0  # per engine; 0: unlimited (no queue)
    engine_queue_timeout: float = 30.0  # longest wait for a slot, then 503; 0: 503 at once
    engine_max_queue: int = 0  # requests waiting at most, then 503 at once; 0: bounded by the timeout only
    engine_failure_threshold: int = 5  # consecutive failures that open an engine's circuit; 0: never
    engine_cooldown: float = 10.0  # seconds an open engine gets no requests before a probe
    # security, hygiene, lifecycle
    api_key: str | None = None
    metrics_api_key: str | None = None  # /metrics requires this key (else it is open)
    metrics_require_api_key: bool = False  # /metrics requires --api-key
    allowed_origins: list[str] = field(default_factory=list)
    allow_credentials: bool = False
    allowed_methods: list[str] = field(default_factory=lambda: ["*"])
    allowed_headers: list[str] = field(default_factory=lambda: ["*"])
    workers: int = 1
    shutdown_timeout: float = 30.0
    render_threads: int = 0  # 0: os.cpu_count()
    log_level: str = "info"
    access_log: bool = True
    # the Responses API's store (proxy/store): None is the embedded SQLite file, "none" turns it off
    response_store: str | None = None
    response_store_ttl: float = 30 * 24 * 3600.0
    response_store_max_bytes: int = 2 << 30

    @property
    def parsers_configured(self) -> bool:
        return bool(self.reasoning_parser or (self.tool_call_parser and self.enable_auto_tool_choice))


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _non_negative(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc
        if not value >= 0:  # also rejects NaN
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that decide how requests are rendered and derendered (shared by serve and render tools)."""
    parser.add_argument("model", nargs="?", default=None,
                        help="model directory or Hugging Face repo id in the local cache "
                             "(default: the embedded Qwen3 tokenizer and chat template)")
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--tokenizer-mode", default="auto",
                        help="as vllm serve: auto, hf, or a renderer mode (core/renderers; others are refused)")
    parser.add_argument("--served-model-name", nargs="+", default=[])
    parser.add_argument("--chat-template", default=None, help="file path or inline Jinja template")
    parser.add_argument("--default-chat-template-kwargs", type=_json_object, default={})
    parser.add_argument("--trust-request-chat-template", action="store_true")
    parser.add_argument("--request-template-timeout", type=_non_negative(float), default=5.0,
                        help="seconds a request's own chat template (--trust-request-chat-template) may take to "
                             "compile and render, then a 400 (0: no limit; its sizes stay bounded)")
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument("--tool-call-parser", default=None)
    parser.add_argument("--reasoning-parser", default=None)
    parser.add_argument("--enable-auto-tool-choice", action="store_true")
    parser.add_argument("--exclude-tools-when-tool-choice-none", action="store_true")
    parser.add_argument("--reasoning-effort-map", type=_json_object, default={},
                        help='JSON map applied to reasoning_effort before the template sees it, '
                             'e.g. \'{"minimal": "low"}\'')
    parser.add_argument("--max-logprobs", type=int, default=20)
    parser.add_argument("--max-choices", type=_non_negative(int), default=1024,
                        help="choices one request may ask for, prompts x n (default 1024, the most sequences one "
                             "vLLM engine runs at once by default); 0: only vLLM's own limits")
    parser.add_argument("--reasoning-field", choices=["reasoning", "reasoning_content", "both"],
                        default="reasoning",
                        help="name of the reasoning field in chat responses (both: emit the two)")


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    add_model_flags(parser)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-request-bytes", type=int, default=32 * 1024 * 1024)
    parser.add_argument("--request-body-timeout", type=_non_negative(float), default=30.0,
                        help="seconds a client has to send a whole request body, then a 408 (0: no limit)")
    parser.add_argument("--max-connections", type=_non_negative(int), default=0,
                        help="client connections one process holds at most; one more gets a 503 and is closed "
                             "(0: half of the open-file limit, ulimit -n)")
    parser.add_argument("--stream-state-secret", default=os.environ.get("DERENDER_STREAM_STATE_SECRET"),
                        help="HMAC key that signs stream_state (env DERENDER_STREAM_STATE_SECRET)")
    parser.add_argument("--engine-url", action="append", default=[],
                        help="base URL of a tokens-only engine (repeat for several)")
    parser.add_argument("--engine-api-key", default=os.environ.get("DERENDER_ENGINE_API_KEY"))
    parser.add_argument("--engine-connect-timeout", type=float, default=5.0)
    parser.add_argument("--engine-first-token-timeout", type=float, default=600.0)
    parser.add_argument("--engine-idle-timeout", type=float, default=120.0)
    parser.add_argument("--engine-max-connections", type=int, default=1024)
    parser.add_argument("--health-check-interval", type=float, default=5.0)
    parser.add_argument("--prefix-affinity-tokens", type=int, default=0)
    parser.add_argument("--engine-max-concurrency", type=_non_negative(int), default=0,
                        help="requests outstanding per engine at most; more wait in a FIFO queue (0: unlimited)")
    parser.add_argument("--engine-queue-timeout", type=_non_negative(float), default=30.0,
                        help="seconds a request waits for a free engine slot before a 503 (0: no waiting)")
    parser.add_argument("--engine-max-queue", type=_non_negative(int), default=0,
                        help="requests waiting for an engine slot at most; one more gets a 503 at once "
                             "(0: no bound but --engine-queue-timeout)")
    parser.add_argument("--engine-failure-threshold", type=_non_negative(int), default=5,
                        help="consecutive failures (connect, timeout, 5xx, broken stream; never 4xx) that take "
                             "an engine out for --engine-cooldown (0: only unreachable engines are taken out)")
    parser.add_argument("--engine-cooldown", type=_non_negative(float), default=10.0,
                        help="seconds an engine is left alone after failing, before one probe request")
    parser.add_argument("--api-key", default=os.environ.get("DERENDER_API_KEY") or os.environ.get("VLLM_API_KEY"),
                        help="required Bearer token (env DERENDER_API_KEY or VLLM_API_KEY)")
    parser.add_argument("--metrics-api-key", default=os.environ.get("DERENDER_METRICS_API_KEY"),
                        help="Bearer token /metrics requires (env DERENDER_METRICS_API_KEY; default: /metrics is "
                             "open, for scrapers; it lists engine URLs and traffic)")
    parser.add_argument("--metrics-require-api-key", action="store_true",
                        help="/metrics requires the --api-key too (with --metrics-api-key: either key)")
    parser.add_argument("--allowed-origins", nargs="*", default=[],
                        help="CORS origins ('*' for any; default: no CORS headers)")
    parser.add_argument("--allow-credentials", action="store_true", help="CORS: allow credentials")
    parser.add_argument("--allowed-methods", nargs="*", default=["*"], help="CORS methods")
    parser.add_argument("--allowed-headers", nargs="*", default=["*"], help="CORS request headers")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes sharing the port (SO_REUSEPORT; Linux)")
    parser.add_argument("--shutdown-timeout", type=float, default=30.0)
    parser.add_argument("--render-threads", type=int, default=0)
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--no-access-log", dest="access_log", action="store_false")
    parser.add_argument("--response-store", default=None,
                        help="where /v1/responses keeps stored responses: sqlite:///PATH (sqlite:////ABS.db), "
                             "redis://HOST:PORT/DB (for replicas sharing it) or none (default: an SQLite file "
                             "under the user's data directory, shared by --workers)")
    parser.add_argument("--response-store-ttl", type=_non_negative(float), default=30 * 24 * 3600.0,
                        help="seconds a stored response is kept (default 30 days, as OpenAI keeps them)")
    parser.add_argument("--response-store-max-bytes", type=_non_negative(int), default=2 << 30,
                        help="the most the stored responses may take; past it the oldest go (default 2 GiB)")


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    known = ServerConfig.__dataclass_fields__
    return ServerConfig(**{k: v for k, v in vars(args).items() if k in known})
