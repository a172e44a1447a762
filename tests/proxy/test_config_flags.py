"""`derender-proxy serve --help` and the README's flag tables: one source, grouped as vLLM groups its
flags, every flag with a one-line help and its default, no secret ever printed."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from proxy.cli import build_parser
from proxy.config import GROUPS, ServerConfig, config_from_args, default_text, flag_table, serve_parser, update_readme

README = Path(__file__).resolve().parents[2] / "README.md"

# every flag `serve` had before the flags were grouped: names and behaviour are kept
FLAGS_BEFORE = {
    "--tokenizer", "--tokenizer-mode", "--served-model-name", "--chat-template", "--default-chat-template-kwargs",
    "--trust-request-chat-template", "--request-template-timeout", "--max-model-len", "--tool-call-parser",
    "--reasoning-parser", "--enable-auto-tool-choice", "--exclude-tools-when-tool-choice-none",
    "--reasoning-effort-map", "--max-logprobs", "--max-choices", "--reasoning-field", "--host", "--port",
    "--max-request-bytes", "--request-body-timeout", "--max-connections", "--stream-state-secret", "--engine-url",
    "--engine-api-key", "--engine-connect-timeout", "--engine-first-token-timeout", "--engine-idle-timeout",
    "--engine-max-connections", "--health-check-interval", "--prefix-affinity-tokens", "--engine-max-concurrency",
    "--engine-queue-timeout", "--engine-max-queue", "--engine-failure-threshold", "--engine-cooldown", "--api-key",
    "--metrics-api-key", "--metrics-require-api-key", "--allowed-origins", "--allow-credentials",
    "--allowed-methods", "--allowed-headers", "--workers", "--shutdown-timeout", "--render-threads", "--log-level",
    "--no-access-log", "--response-store", "--response-store-ttl", "--response-store-max-bytes",
}
SECRET_ENVS = ("DERENDER_API_KEY", "VLLM_API_KEY", "DERENDER_METRICS_API_KEY", "DERENDER_ENGINE_API_KEY",
               "DERENDER_STREAM_STATE_SECRET")


def serve_subparser():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices["serve"]


def flag_actions(parser):
    return [a for a in parser._actions if a.dest != "help"]


def test_every_flag_is_in_one_of_vllms_groups_with_a_help_and_a_default(monkeypatch):
    for env in SECRET_ENVS:
        monkeypatch.delenv(env, raising=False)
    parser = serve_subparser()
    titles = {g.title: g for g in parser._action_groups}
    assert set(GROUPS) <= set(titles)
    grouped = [a for title in GROUPS for a in titles[title]._group_actions]
    assert sorted(map(id, grouped)) == sorted(map(id, flag_actions(parser)))  # each flag in exactly one group
    options = {o for a in grouped for o in a.option_strings}
    assert FLAGS_BEFORE <= options and "--otlp-traces-endpoint" in options
    text = " ".join(parser.format_help().split())  # (argparse wraps lines)
    for action in grouped:
        assert action.help and "\n" not in action.help, action.dest
        assert default_text(action)
    assert text.count("(default: ") == len(grouped)


def test_defaults_agree_with_the_config_dataclass(monkeypatch):
    for env in SECRET_ENVS:
        monkeypatch.delenv(env, raising=False)
    parsed = config_from_args(build_parser().parse_args(["serve"]))
    assert dataclasses.asdict(parsed) == dataclasses.asdict(ServerConfig())


def test_help_never_prints_a_secret_but_the_flag_reads_it(monkeypatch):
    for env in SECRET_ENVS:
        monkeypatch.setenv(env, f"secret-{env.lower()}")
    parser = build_parser()
    help_text = serve_subparser().format_help()
    assert "secret-" not in help_text
    assert "env DERENDER_API_KEY or env VLLM_API_KEY" in " ".join(help_text.split())
    args = parser.parse_args(["serve"])
    assert args.api_key == "secret-derender_api_key" and args.engine_api_key == "secret-derender_engine_api_key"
    assert args.stream_state_secret == "secret-derender_stream_state_secret"
    monkeypatch.delenv("DERENDER_API_KEY")
    assert build_parser().parse_args(["serve"]).api_key == "secret-vllm_api_key"
    for group in GROUPS:
        assert "secret-" not in flag_table(group, serve_parser())


def test_readme_flag_tables_are_the_help():
    text = README.read_text()
    assert update_readme(text) == text, "README flag tables are stale: python -m proxy.config README.md"
    for group in GROUPS:
        assert f"<!-- flags: {group} " in text
    # no hand-made flag table anywhere else in the README
    outside = re.sub(r"<!-- flags: .*?<!-- /flags -->", "", text, flags=re.S)
    assert not re.findall(r"(?m)^\| `--", outside)


def test_a_stale_table_is_noticed_and_rewritten():
    text = README.read_text()
    stale = text.replace("| seconds to connect to an engine |", "| seconds to connect |")
    assert stale != text and update_readme(stale) == text


@pytest.mark.parametrize("argv", [
    ["--allowed-origins", "*"], ["--tokenizer-mode", "deepseek_v4"], ["--reasoning-field", "both"],
    ["--no-access-log"], ["--engine-url", "http://a:1", "--engine-url", "http://b:2"],
])
def test_flags_parse_as_before(argv):
    args = build_parser().parse_args(["serve", *argv])
    config = config_from_args(args)
    expected = {
        "--allowed-origins": ("allowed_origins", ["*"]), "--tokenizer-mode": ("tokenizer_mode", "deepseek_v4"),
        "--reasoning-field": ("reasoning_field", "both"), "--no-access-log": ("access_log", False),
        "--engine-url": ("engine_url", ["http://a:1", "http://b:2"]),
    }[argv[0]]
    assert getattr(config, expected[0]) == expected[1]
