"""`derender-proxy` command line: serve, reference-engine, demo."""

from __future__ import annotations

import argparse
import logging
import sys

from proxy.config import ServerConfig, add_serve_flags, config_from_args


def load_served_model(config: ServerConfig):  # -> ModelInfo
    from proxy.embedded import EMBEDDED_NAME, embedded_model_dir
    from proxy.model_loader import load_model

    if config.model is None:
        path, default_name = str(embedded_model_dir()), EMBEDDED_NAME
    else:
        path, default_name = config.model, config.model
    return load_model(path, tokenizer=config.tokenizer,
                      served_model_names=config.served_model_name or [default_name],
                      max_model_len=config.max_model_len, chat_template=config.chat_template)


def cmd_serve(args: argparse.Namespace) -> int:
    from aiohttp import web

    from proxy.app import create_app

    config = config_from_args(args)
    logging.basicConfig(level=config.log_level.upper(), format="%(message)s")
    model = load_served_model(config)
    app = create_app(config, model)
    # handler_cancellation: a client that goes away cancels its handler, which aborts the engine request
    web.run_app(app, host=config.host, port=config.port, access_log=None,
                shutdown_timeout=config.shutdown_timeout, handler_cancellation=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="derender-proxy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the OpenAI-compatible proxy")
    add_serve_flags(serve)
    serve.set_defaults(func=cmd_serve)
    from proxy.reference_engine import add_reference_engine_flags, cmd_reference_engine
    engine = sub.add_parser("reference-engine", help="run a CPU stand-in for `vllm serve --tokens-only`")
    add_reference_engine_flags(engine)
    engine.set_defaults(func=cmd_reference_engine)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
