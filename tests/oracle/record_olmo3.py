"""Record vLLM 0.33's Olmo 3 (`olmo3`) reasoning and tool parser answers in-process (oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_olmo3.py \\
        [--qwen3 $ORACLE_DIR/models/tiny-qwen3] [--out tests/core/parsers/golden_frontier/olmo3.json]
        [--tools-out tests/core/parsers/golden_frontier/olmo3_tools.json]

No Olmo 3 tokenizer can be downloaded here: the tokenizer is the oracle's tiny-qwen3 without its
`<think>` / `</think>` added tokens (tests/core/parsers/parser_models.py `without_added_tokens`,
`OLMO3_DROPPED`, the directory the tests build): Olmo 3 writes them with ordinary vocabulary
entries, which vLLM's `is_reasoning_end` looks for. Per case of tests/core/parsers/olmo3_cases.py
the shared steps of record_golden.py, then `adjust_request` per request and `is_reasoning_end` on a
few prompts (olmo3.json); the same for the tool cases (`tool_cases`, the olmo3 tool parser alone and
behind olmo3 reasoning) into olmo3_tools.json. A recording tool, never imported by the tests.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))

from record_golden import adjusted, parser_cls, record_cases  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402

from tests.core.parsers.olmo3_cases import (  # noqa: E402
    FLAGS,
    PROMPTS,
    REQUESTS,
    TOOL_FLAGS,
    TOOL_REQUESTS,
    cases,
    tool_cases,
)
from tests.core.parsers.parser_models import OLMO3_DROPPED, without_added_tokens  # noqa: E402


def reasoning_ends(tok):
    parser = parser_cls("olmo3", None, tok)(tok, None, model_config=None)
    return {name: {"prompt_token_ids": (ids := tok.encode(text, add_special_tokens=False)),
                   "is_reasoning_end": parser.is_reasoning_end(ids)} for name, text in PROMPTS.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen3", default=os.path.expanduser("~/vllm-oracle/models/tiny-qwen3"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/olmo3.json")
    ap.add_argument("--tools-out", default="tests/core/parsers/golden_frontier/olmo3_tools.json")
    args = ap.parse_args()
    import vllm

    with tempfile.TemporaryDirectory() as tmp:
        tok = get_tokenizer(str(without_added_tokens(Path(args.qwen3), Path(tmp) / "tiny-olmo3", OLMO3_DROPPED)))
        assert len(tok.encode("</think>", add_special_tokens=False)) == 3
        records = record_cases(cases(), tok, "tiny-olmo3")
        doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_olmo3.py",
               "model": "tiny-qwen3 without its <think> / </think> added tokens", "records": records,
               "adjusted": adjusted(tok, FLAGS, REQUESTS, "tiny-olmo3"), "is_reasoning_end": reasoning_ends(tok)}
        tool_records = record_cases(tool_cases(), tok, "tiny-olmo3")
        tools_doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_olmo3.py",
                     "model": doc["model"], "records": tool_records,
                     "adjusted": adjusted(tok, TOOL_FLAGS, TOOL_REQUESTS, "tiny-olmo3")}
    for path, written in ((args.out, doc), (args.tools_out, tools_doc)):
        Path(path).write_text(json.dumps(written, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {len(written['records'])} records to {path}")


if __name__ == "__main__":
    main()
