"""Record vLLM 0.33's Hunyuan A13B (`hunyuan_a13b`) reasoning / tool parser answers in-process.

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_hunyuan_a13b.py \\
        [--qwen3 $ORACLE_DIR/models/tiny-qwen3] [--out tests/core/parsers/golden_frontier/hunyuan_a13b.json]

No Hunyuan tokenizer can be downloaded here, and none is needed for the non-streaming rules: the
markers are text, so the tokenizer is the oracle's tiny-qwen3 as it is. Per case of
tests/core/parsers/hunyuan_a13b_cases.py (record_golden.record_cases): the token ids, vLLM's
non-streaming answer and finish_reason and its stream (whose hard-coded Hunyuan token ids never
match Qwen3's: not compared). Then `adjust_request` per request and `is_reasoning_end` on a few
prompts. A recording tool, never imported by the tests.
"""

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))

from record_golden import adjusted, reasoning_ends, record_cases
from vllm.tokenizers import get_tokenizer

from tests.core.parsers.hunyuan_a13b_cases import FLAGS, PROMPTS, REQUESTS, cases

MODEL = "tiny-qwen3"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen3", default=os.path.expanduser("~/vllm-oracle/models/tiny-qwen3"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/hunyuan_a13b.json")
    args = ap.parse_args()
    import vllm

    tok = get_tokenizer(args.qwen3)
    ends = reasoning_ends(tok, "hunyuan_a13b", PROMPTS)
    records = record_cases(cases(), tok, MODEL)
    doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_hunyuan_a13b.py",
           "model": "tiny-qwen3 (the markers are text)", "records": records,
           "adjusted": adjusted(tok, FLAGS, REQUESTS, MODEL), "is_reasoning_end": ends}
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
