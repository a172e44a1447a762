"""`derender-proxy` command line: serve, reference-engine, demo."""

from __future__ import annotations

import argparse
import sys

from proxy.config import add_serve_flags, config_from_args


def cmd_serve(args: argparse.Namespace) -> int:
    # JSON logs, uvloop when installed, --workers, graceful drain on SIGTERM, and handler
    # cancellation (a client that goes away cancels its handler, which aborts the engine request):
    # all in proxy.serving.serve
    from core.parsers.registry import get_tool_parser
    from proxy.model_loader import ModelLoadError
    from proxy.serving import serve

    config = config_from_args(args)
    try:
        if config.tool_call_parser:  # checked even without --enable-auto-tool-choice: a typo is a typo
            get_tool_parser(config.tool_call_parser)
        return serve(config)
    except (ModelLoadError, KeyError, ValueError, OSError) as exc:
        # start-up failures (model, parser names, port in use): one line, no traceback
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"derender-proxy: error: {message}", file=sys.stderr)
        return 2


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
    from proxy.demo import add_demo_flags, cmd_demo
    demo = sub.add_parser("demo", help="reference engine + proxy on loopback, one streamed tool call")
    add_demo_flags(demo)
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
