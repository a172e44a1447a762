"""Record vLLM 0.33's ERNIE 4.5 (`ernie45`) reasoning / tool parser answers in-process.

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_ernie45.py \\
        [--qwen3 $ORACLE_DIR/models/tiny-qwen3] [--out tests/core/parsers/golden_frontier/ernie45.json]

No ERNIE tokenizer can be downloaded here: the tokenizer is the oracle's tiny-qwen3 (which has
`<think>`, `</think>`, `<tool_call>`, `</tool_call>`) plus `<response>` / `</response>` as non-special
added tokens (tests/core/parsers/parser_models.py `ERNIE45_TOKENS`, the directory the tests build).
Per case of tests/core/parsers/ernie45_cases.py (record_golden.record_cases): the token ids, vLLM's
non-streaming answer and finish_reason and its stream; then `adjust_request` per request and
`is_reasoning_end` on a few prompts. A recording tool, never imported by the tests.
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

from record_golden import adjusted, reasoning_ends, record_cases
from vllm.tokenizers import get_tokenizer

from tests.core.parsers.ernie45_cases import FLAGS, PROMPTS, REQUESTS, cases
from tests.core.parsers.parser_models import ERNIE45_TOKENS, with_added_tokens

MODEL = "tiny-ernie45"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen3", default=os.path.expanduser("~/vllm-oracle/models/tiny-qwen3"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/ernie45.json")
    args = ap.parse_args()
    import vllm

    with tempfile.TemporaryDirectory() as tmp:
        path = with_added_tokens(Path(args.qwen3), Path(tmp) / MODEL, ERNIE45_TOKENS, special=False)
        tok = get_tokenizer(str(path))
        assert all(len(tok.encode(t, add_special_tokens=False)) == 1 for t in ERNIE45_TOKENS)
        records = record_cases(cases(), tok, MODEL)
        doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_ernie45.py",
               "model": "tiny-qwen3 + <response> / </response> (added, not special)", "records": records,
               "adjusted": adjusted(tok, FLAGS, REQUESTS, MODEL),
               "is_reasoning_end": reasoning_ends(tok, "ernie45", PROMPTS)}
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
