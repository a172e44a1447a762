"""Server configuration: every command-line flag, in one dataclass, and the flags themselves.

Flag names follow `vllm serve` where vLLM has the same knob, so a deployment can pass the same
parser and template flags to the engine tier and to us (a mismatch silently changes the
content/reasoning/tool split: vLLM RFC #42729). The flags are grouped as vLLM groups its own
(model, parsing, frontend, engine tier, security, observability); each has a one-line help that
`--help` prints with its default, and the README's flag tables are made from the same argparse
definitions (`python -m proxy.config README.md` rewrites them; a test checks they agree).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
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
    otlp_traces_endpoint: str | None = None  # OTLP/HTTP collector for one span per request (proxy/tracing.py)
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


class _ListFlag(argparse.Action):
    """Values space-separated (`--allowed-origins https://a.example https://b.example`) or as vLLM
    takes them, one JSON list (`--allowed-origins '["*"]'`); both forms make one flat list."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from proxy.cors import parse_list

        try:
            setattr(namespace, self.dest, parse_list(list(values), []))
        except ValueError as exc:
            raise argparse.ArgumentError(self, str(exc)) from None


# -- help with defaults, and the README's tables --------------------------------------------------

GROUPS = ("model", "parsing", "frontend", "engine tier", "security", "observability")
_GROUP_TEXT = {
    "model": "what is served (give the engine tier the same model)",
    "parsing": "how requests become prompts and outputs become answers (as the engine tier's vllm serve flags)",
    "frontend": "the HTTP server and its APIs",
    "engine tier": "the tokens-only engines behind the proxy",
    "security": "keys, CORS and bounds on what clients may send",
    "observability": "logs, metrics and traces",
}


def default_text(action: argparse.Action) -> str:
    """A flag's default as `--help` and the README show it (never the value of a secret)."""
    text = getattr(action, "default_text", None)
    if text is not None:
        return text
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "off"
    value = action.default
    if value is None or value == []:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


class FlagHelpFormatter(argparse.HelpFormatter):
    """Every flag's help ends with its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = action.help or ""
        if action.default is argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            return help_text
        return f"{help_text} (default: {default_text(action).replace('%', '%%')})"


def _flag(group: Any, *names: str, help: str, default_text: str | None = None, env: str | tuple[str, ...] = (),
          **options: Any) -> argparse.Action:
    """One flag. `env`: read from these environment variables when not given (their value is
    never shown: the default reads "env NAME")."""
    envs = (env,) if isinstance(env, str) else env
    if envs:
        options["default"] = next((os.environ[e] for e in envs if os.environ.get(e)), None)
        default_text = default_text or " or ".join(f"env {e}" for e in envs) + ", else none"
    action = group.add_argument(*names, help=help, **options)
    action.default_text = default_text  # type: ignore[attr-defined]
    return action


def _group(parser: argparse.ArgumentParser, title: str) -> Any:
    return parser.add_argument_group(title, _GROUP_TEXT[title])


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that decide how requests are rendered and derendered (shared by serve and render tools)."""
    parser.formatter_class = FlagHelpFormatter
    model = _group(parser, "model")
    _flag(model, "model", nargs="?", default=None, metavar="MODEL",
          help="model directory, or a Hugging Face repo id already in the local cache (nothing is downloaded)",
          default_text="the embedded Qwen3 tokenizer and chat template")
    _flag(model, "--tokenizer", default=None, metavar="DIR|REPO",
          help="tokenizer directory or repo id, when it is not the model's", default_text="the model's")
    _flag(model, "--tokenizer-mode", default="auto", metavar="MODE",
          help="as vllm serve: auto and hf render with the chat template; deepseek_v32, deepseek_v4, deepseek_v41, "
               "kimi_k3 (K3's XTML encoder) and mistral (tekken.json or tokenizer.model.v*, through mistral-common) "
               "pick their own renderer; other modes are refused at start-up")
    _flag(model, "--served-model-name", nargs="+", default=[], metavar="NAME",
          help="names clients may give as `model`, the first one reported (a name with `/` trips the "
               "openai-agents SDK: see the README)", default_text="the model argument")
    _flag(model, "--max-model-len", type=int, default=None, metavar="N",
          help="context length in tokens: prompt plus output", default_text="from the model's config.json")
    _flag(model, "--max-logprobs", type=int, default=20, metavar="N",
          help="most logprobs or prompt_logprobs per token a request may ask for")

    parsing = _group(parser, "parsing")
    _flag(parsing, "--chat-template", default=None, metavar="FILE|TEXT",
          help="chat template, a file path or inline Jinja text", default_text="the model's")
    _flag(parsing, "--default-chat-template-kwargs", type=_json_object, default={}, metavar="JSON",
          help="JSON object of chat template arguments every request gets (its own chat_template_kwargs win)")
    _flag(parsing, "--trust-request-chat-template", action="store_true",
          help="let a request bring its own chat_template (rendered in a sandbox, under a budget)")
    _flag(parsing, "--request-template-timeout", type=_non_negative(float), default=5.0, metavar="S",
          help="seconds a request's own chat template may take to compile and render, then a 400 "
               "(0: no limit; its sizes stay bounded)")
    _flag(parsing, "--tool-call-parser", default=None, metavar="NAME",
          help="vLLM's tool-call parser for the model (hermes, llama3_json, ...; the README lists them)")
    _flag(parsing, "--reasoning-parser", default=None, metavar="NAME",
          help="vLLM's reasoning parser for the model (qwen3, deepseek_r1, ...; the README says which for Qwen3)")
    _flag(parsing, "--enable-auto-tool-choice", action="store_true",
          help="parse tool calls out of the output for tool_choice auto (needs --tool-call-parser)")
    _flag(parsing, "--exclude-tools-when-tool-choice-none", action="store_true",
          help="leave the tools out of the prompt when tool_choice is none")
    _flag(parsing, "--reasoning-effort-map", type=_json_object, default={}, metavar="JSON",
          help='JSON map applied to reasoning_effort before the template sees it, e.g. \'{"minimal": "low"}\'')
    _flag(parsing, "--reasoning-field", choices=["reasoning", "reasoning_content", "both"], default="reasoning",
          help="name of the reasoning field in chat answers: reasoning (vLLM 0.33), reasoning_content "
               "(older vLLM), or both")


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    add_model_flags(parser)
    frontend = _group(parser, "frontend")
    _flag(frontend, "--host", default="127.0.0.1", metavar="HOST", help="address to listen on (0.0.0.0: all)")
    _flag(frontend, "--port", type=int, default=8000, metavar="PORT", help="port to listen on")
    _flag(frontend, "--workers", type=int, default=1, metavar="N",
          help="processes sharing the port (SO_REUSEPORT, Linux), with one /metrics for all of them")
    _flag(frontend, "--render-threads", type=int, default=0, metavar="N",
          help="threads that tokenize long prompts and derender large outputs off the event loop",
          default_text="0: one per CPU")
    _flag(frontend, "--max-choices", type=_non_negative(int), default=1024, metavar="N",
          help="choices one request may ask for, prompts x n (the most sequences one vLLM engine runs at once "
               "by default); 0: only vLLM's own limits")
    _flag(frontend, "--shutdown-timeout", type=float, default=30.0, metavar="S",
          help="on SIGTERM, seconds in-flight streams get to finish before their engine requests are aborted")
    _flag(frontend, "--response-store", default=None, metavar="URL",
          help="where /v1/responses keeps stored responses: sqlite:///PATH, redis://HOST:PORT/DB (replicas "
               "sharing it) or none", default_text="an SQLite file under $XDG_DATA_HOME/derender-proxy/")
    _flag(frontend, "--response-store-ttl", type=_non_negative(float), default=30 * 24 * 3600.0, metavar="S",
          help="seconds a stored response is kept", default_text="2592000 (30 days, as OpenAI keeps them)")
    _flag(frontend, "--response-store-max-bytes", type=_non_negative(int), default=2 << 30, metavar="N",
          help="most bytes the stored responses may take; past it the oldest go", default_text="2 GiB")

    engines = _group(parser, "engine tier")
    _flag(engines, "--engine-url", action="append", default=[], metavar="URL",
          help="base URL of a tokens-only engine (vllm serve --tokens-only); repeat for several")
    _flag(engines, "--engine-api-key", env="DERENDER_ENGINE_API_KEY", metavar="KEY",
          help="Bearer key sent to the engines")
    _flag(engines, "--engine-connect-timeout", type=float, default=5.0, metavar="S",
          help="seconds to connect to an engine")
    _flag(engines, "--engine-first-token-timeout", type=float, default=600.0, metavar="S",
          help="seconds an engine may take to its first token (or its whole non-streamed answer)")
    _flag(engines, "--engine-idle-timeout", type=float, default=120.0, metavar="S",
          help="seconds an engine stream may stay silent between tokens")
    _flag(engines, "--engine-max-connections", type=int, default=1024, metavar="N",
          help="connections to all engines at most (kept alive and reused)")
    _flag(engines, "--health-check-interval", type=float, default=5.0, metavar="S",
          help="seconds between /health polls of each engine (0: none)")
    _flag(engines, "--prefix-affinity-tokens", type=int, default=0, metavar="N",
          help="prompts sharing their first N tokens go to the same engine, for its prefix cache (0: off)")
    _flag(engines, "--engine-max-concurrency", type=_non_negative(int), default=0, metavar="N",
          help="requests outstanding per engine (per worker) at most; more wait in one FIFO queue (0: unlimited)")
    _flag(engines, "--engine-queue-timeout", type=_non_negative(float), default=30.0, metavar="S",
          help="longest wait in that queue, then a 503 (0: no queue, a 503 at once when every engine is full)")
    _flag(engines, "--engine-max-queue", type=_non_negative(int), default=0, metavar="N",
          help="requests waiting in that queue at most; one more gets a 503 at once "
               "(0: no bound but --engine-queue-timeout)")
    _flag(engines, "--engine-failure-threshold", type=_non_negative(int), default=5, metavar="N",
          help="consecutive failures (connect, timeout, 5xx, broken stream; never a 4xx) that take an engine "
               "out for --engine-cooldown (0: only unreachable engines are taken out)")
    _flag(engines, "--engine-cooldown", type=_non_negative(float), default=10.0, metavar="S",
          help="seconds an engine that was taken out gets no requests, before one probe request")

    security = _group(parser, "security")
    _flag(security, "--api-key", env=("DERENDER_API_KEY", "VLLM_API_KEY"), metavar="KEY",
          help="Bearer key required on every route but /health, the probes and /metrics (vLLM guards only /v1)")
    _flag(security, "--metrics-api-key", env="DERENDER_METRICS_API_KEY", metavar="KEY",
          help="Bearer key /metrics requires, for scrapers (without it /metrics is open)")
    _flag(security, "--metrics-require-api-key", action="store_true",
          help="/metrics requires the --api-key too (with --metrics-api-key: either key)")
    _flag(security, "--allowed-origins", nargs="*", action=_ListFlag, default=[], metavar="ORIGIN",
          help="CORS origins, space-separated or as vLLM's JSON list ('[\"*\"]' for any); none: browsers "
               "get no cross-origin access, as with vllm serve")
    _flag(security, "--allow-credentials", action="store_true", help="CORS: allow credentials")
    _flag(security, "--allowed-methods", nargs="*", action=_ListFlag, default=["*"], metavar="METHOD",
          help="CORS methods, space-separated or a JSON list")
    _flag(security, "--allowed-headers", nargs="*", action=_ListFlag, default=["*"], metavar="HEADER",
          help="CORS request headers, space-separated or a JSON list")
    _flag(security, "--stream-state-secret", env="DERENDER_STREAM_STATE_SECRET", metavar="KEY",
          help="HMAC key that signs the raw derender's stream_state, so a tampered one is a 400")
    _flag(security, "--max-request-bytes", type=int, default=32 * 1024 * 1024, metavar="N",
          help="larger request bodies (decoded, when compressed) get a 413", default_text="33554432 (32 MiB)")
    _flag(security, "--request-body-timeout", type=_non_negative(float), default=30.0, metavar="S",
          help="seconds a client has to send a whole request body, then a 408 (0: no limit)")
    _flag(security, "--max-connections", type=_non_negative(int), default=0, metavar="N",
          help="client connections one process holds; one more gets a 503 and is closed",
          default_text="0: half the open-file limit")

    observability = _group(parser, "observability")
    _flag(observability, "--log-level", default="info", metavar="LEVEL",
          help="debug, info, warning or error; logs are JSON lines on stderr")
    _flag(observability, "--no-access-log", dest="access_log", action="store_false",
          help="write no access-log line per request")
    _flag(observability, "--otlp-traces-endpoint", default=None, metavar="URL",
          help="as vllm serve: send one span per request to this OpenTelemetry collector, over OTLP/HTTP "
               "(http://collector:4318; /v1/traces is added when the URL has no path)")


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    known = ServerConfig.__dataclass_fields__
    return ServerConfig(**{k: v for k, v in vars(args).items() if k in known})


# -- the README's flag tables ---------------------------------------------------------------------

_TABLE_START = "<!-- flags: {group} (made by `python -m proxy.config README.md` from proxy/config.py) -->"
_TABLE_END = "<!-- /flags -->"


def serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="derender-proxy serve", formatter_class=FlagHelpFormatter)
    add_serve_flags(parser)
    return parser


def _invocation(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar or action.dest  # type: ignore[return-value]
    name = "/".join(action.option_strings)
    if action.nargs == 0:
        return name
    metavar = action.metavar or ("|".join(action.choices) if action.choices else action.dest.upper())
    return f"{name} {metavar}..." if action.nargs in ("*", "+") else f"{name} {metavar}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def flag_table(group: str, parser: argparse.ArgumentParser | None = None) -> str:
    """The markdown table of one flag group, from the same definitions `--help` prints."""
    parser = parser or serve_parser()
    (found,) = [g for g in parser._action_groups if g.title == group]
    rows = ["| flag | default | what |", "|---|---|---|"]
    for action in found._group_actions:
        rows.append(f"| `{_cell(_invocation(action))}` | {_cell(default_text(action))} | {_cell(action.help or '')} |")
    return "\n".join(rows)


def update_readme(text: str) -> str:
    """`text` with every flag table between its markers made anew."""
    parser = serve_parser()
    for group in GROUPS:
        start = _TABLE_START.format(group=group)
        if start not in text:
            continue
        head, rest = text.split(start, 1)
        _, tail = rest.split(_TABLE_END, 1)
        text = f"{head}{start}\n{flag_table(group, parser)}\n{_TABLE_END}{tail}"
    return text


if __name__ == "__main__":  # python -m proxy.config README.md
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            old = f.read()
        new = update_readme(old)
        if new != old:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print(f"{path}: flag tables updated")
