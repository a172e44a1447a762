"""Record vLLM 0.33's single-block JSON tool parsers (`phi4_mini_json`, `internlm`, `jamba`)
in-process (oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_json_block.py FAMILY \\
        [--qwen3 $ORACLE_DIR/models/tiny-qwen3] [--out tests/core/parsers/golden_frontier/FAMILY.json]

No Phi-4-mini, InternLM or Jamba tokenizer can be downloaded here: the tokenizer is the oracle's
tiny-qwen3, for internlm and jamba with the family's markers added as special tokens
(tests/core/parsers/parser_models.py `INTERNLM_TOKENS`, `JAMBA_TOKENS`, the directories the tests
build). For each case of tests/core/parsers/json_block_cases.py: the token ids (EOS <|im_end|>
appended unless the case ends by length), vLLM's non-streaming answer, finish_reason and own
stream (record_golden.py); where vLLM's parser raises (internlm), the exception's type instead.
Then vLLM's `adjust_request` per tool_choice. A recording tool, never imported by the tests.
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

from record_golden import EOS, adjusted, record_cases
from vllm.tokenizers import get_tokenizer

from tests.core.parsers.json_block_cases import REQUESTS, cases
from tests.core.parsers.parser_models import (
    INTERNLM_TOKENS,
    JAMBA_TOKENS,
    with_added_tokens,
)

TOKENS = {"phi4_mini_json": [], "internlm": INTERNLM_TOKENS, "jamba": JAMBA_TOKENS}


def record(family, tok, model):
    records = []
    for case in cases(family):
        try:
            records += record_cases([case], tok, model)
        except Exception as exc:  # noqa: BLE001 - vLLM's server answers such an output with an error
            ids = tok.encode(case["text"], add_special_tokens=False)
            records.append({"case": case, "token_ids": [*ids, EOS] if case["finish"] == "stop" else ids,
                            "text_ids": ids, "engine_finish_reason": case["finish"],
                            "vllm_raises": type(exc).__name__})
    return records


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("family", choices=sorted(TOKENS))
    ap.add_argument("--qwen3", default=os.path.expanduser("~/vllm-oracle/models/tiny-qwen3"))
    ap.add_argument("--out")
    args = ap.parse_args()
    out = args.out or f"tests/core/parsers/golden_frontier/{args.family}.json"
    import vllm

    model = f"tiny-{args.family}"
    with tempfile.TemporaryDirectory() as tmp:
        tokens = TOKENS[args.family]
        path = with_added_tokens(Path(args.qwen3), Path(tmp) / model, tokens) if tokens else Path(args.qwen3)
        tok = get_tokenizer(str(path))
        assert all(len(tok.encode(t, add_special_tokens=False)) == 1 for t in tokens)
        records = record(args.family, tok, model)
        doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_json_block.py",
               "model": f"tiny-qwen3{' + ' + ', '.join(tokens) + ' (special)' if tokens else ''}",
               "records": records, "adjusted": adjusted(tok, {"tools": (None, args.family)}, REQUESTS, model)}
    Path(out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {out}")


if __name__ == "__main__":
    main()
