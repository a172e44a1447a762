"""A parser flag the tokenizer cannot support fails at start-up with one line naming the flag,
instead of a 400 on every request."""

from __future__ import annotations

import subprocess
import sys

import pytest

from proxy.app import create_app
from proxy.config import ServerConfig


def test_create_app_refuses_a_reasoning_parser_whose_markers_the_tokenizer_lacks(llama3):
    with pytest.raises(ValueError, match="--reasoning-parser deepseek_r1"):
        create_app(ServerConfig(engine_url=["http://127.0.0.1:9"], reasoning_parser="deepseek_r1"), llama3)


@pytest.mark.slow
def test_serve_exits_2_with_one_line_naming_the_flag(model_dirs):
    proc = subprocess.run([sys.executable, "-m", "proxy.cli", "serve", str(model_dirs["llama3"]),
                           "--reasoning-parser", "deepseek_r1", "--engine-url", "http://127.0.0.1:9",
                           "--port", "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--reasoning-parser deepseek_r1" in lines[0] and "Traceback" not in proc.stderr
