"""Record vLLM 0.33's LongCat (`longcat`) tool parser answers in-process (oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_longcat.py \\
        [--qwen3 $ORACLE_DIR/models/tiny-qwen3] [--out tests/core/parsers/golden_frontier/longcat.json]

No LongCat tokenizer can be downloaded here: the tokenizer is the oracle's tiny-qwen3 plus the two
`<longcat_tool_call>` markers as added, non-special tokens (tests/core/parsers/parser_models.py
`LONGCAT_TOKENS`, the same directory the tests build). Per case of tests/core/parsers/longcat_cases.py
the shared steps of record_golden.py, then `adjust_request` per request. A recording tool, never
imported by the tests.
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

from record_golden import adjusted, record_cases  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402

from tests.core.parsers.longcat_cases import FLAGS, REQUESTS, cases  # noqa: E402
from tests.core.parsers.parser_models import LONGCAT_TOKENS, with_added_tokens  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen3", default=os.path.expanduser("~/vllm-oracle/models/tiny-qwen3"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/longcat.json")
    args = ap.parse_args()
    import vllm

    with tempfile.TemporaryDirectory() as tmp:
        path = with_added_tokens(Path(args.qwen3), Path(tmp) / "tiny-longcat", LONGCAT_TOKENS, special=False)
        tok = get_tokenizer(str(path))
        assert all(len(tok.encode(t, add_special_tokens=False)) == 1 for t in LONGCAT_TOKENS)
        records = record_cases(cases(), tok, "tiny-longcat")
        doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_longcat.py",
               "model": "tiny-qwen3 + LongCat's two tool-call markers (added, not special)", "records": records,
               "adjusted": adjusted(tok, FLAGS, REQUESTS, "tiny-longcat")}
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
