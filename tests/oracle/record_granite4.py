"""Record vLLM 0.33's Granite 4 parsers (`granite4` tools, `granite_thinking_parser` reasoning)
in-process (oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_granite4.py \\
        [--model $ORACLE_DIR/models/tiny-qwen3] [--out tests/core/parsers/golden_frontier/granite4.json]

No Granite 4 tokenizer can be downloaded here: the tokenizer is the oracle's tiny-qwen3 (whose
`<think>` / `<tool_call>` markers are one token each) with Granite 4's role markers added as
special tokens, `<|end_of_text|>` the eos (tests/core/parsers/parser_models.py `make_granite4`,
the directory the tests build), written to a temporary directory and loaded with `get_tokenizer`.

For each case of tests/core/parsers/granite4_cases.py: the token ids (with finish "stop" the eos
appended, which the parsers never see), vLLM's non-streaming answer and its own stream
(tests/oracle/vllm_parse.py); then vLLM's `adjust_request` per tool_choice and its
`is_reasoning_end` on the prompts of the cases file. A recording tool, never imported by the tests.
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

from vllm.tokenizers import get_tokenizer  # noqa: E402
from record_golden import (adjustment, choice_requests, reasoning_ends_per_kwargs,  # noqa: E402
                           record_cases)

from tests.core.parsers.granite4_cases import CHOICES, PROMPTS, TOOLS, cases  # noqa: E402
from tests.core.parsers.parser_models import GRANITE4_TOKENS, make_granite4  # noqa: E402

REASONING, TOOL = "granite_thinking_parser", "granite4"



def adjusted(tok):
    """vLLM's render-side adjustments per tool_choice and parser pairing."""
    return {f"{r}+{t}:{name}": {"reasoning_parser": r, "tool_parser": t,
                                **adjustment(r, t, tok, request, "tiny-granite4")}
            for r, t in ((REASONING, TOOL), (None, TOOL), (REASONING, None))
            for name, request in choice_requests(TOOLS, CHOICES).items()}


def reasoning_ends(tok):
    return reasoning_ends_per_kwargs(tok, REASONING, {"default": {}, "nothink": {"enable_thinking": False}}, PROMPTS)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser("~/vllm-oracle/models/tiny-qwen3"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/granite4.json")
    args = ap.parse_args()
    import vllm

    with tempfile.TemporaryDirectory() as tmp:
        model = make_granite4(Path(args.model), Path(tmp) / "tiny-granite4")
        tok = get_tokenizer(str(model))
        eos = tok.convert_tokens_to_ids("<|end_of_text|>")
        assert all(len(tok.encode(t, add_special_tokens=False)) == 1
                   for t in [*GRANITE4_TOKENS, "<think>", "</think>", "<tool_call>", "</tool_call>"])
        records = record_cases(cases(), tok, "tiny-granite4", eos)
        doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_granite4.py",
               "model": "tiny-qwen3 + Granite 4 role markers (special; <|end_of_text|> eos)", "eos_token_id": eos,
               "records": records, "adjusted": adjusted(tok), "is_reasoning_end": reasoning_ends(tok)}
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
