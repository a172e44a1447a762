"""Record vLLM 0.33's gemma4 reasoning / tool parser answers in-process (oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_gemma4.py \\
        [--model $ORACLE_DIR/models/tiny-qwen3] [--out tests/core/parsers/golden_frontier/gemma4.json]

No Gemma 4 tokenizer can be downloaded here: the tokenizer is the oracle's tiny-qwen3 with
Gemma 4's control tokens added as special tokens, `<turn|>` named its eos token
(tests/core/parsers/parser_models.py `make_gemma4`, the same directory the tests build), written
to a temporary directory and loaded with vLLM's `get_tokenizer`.

For each case of tests/core/parsers/gemma4_cases.py: the token ids (the text encoded; with
finish "stop" the end-of-turn `<turn|>` appended, which the parsers never see), vLLM's
non-streaming answer and its own stream (tests/oracle/vllm_parse.py); then vLLM's
`adjust_request` per tool_choice and its `is_reasoning_end` on the prompts of the cases file.
A recording tool, never imported by the tests.
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

from tests.core.parsers.gemma4_cases import CHOICES, PROMPTS, TOOLS, cases  # noqa: E402
from tests.core.parsers.parser_models import GEMMA4_TOKENS, make_gemma4  # noqa: E402



def adjusted(tok):
    """vLLM's render-side adjustments per tool_choice (skip_special_tokens, structured outputs)."""
    return {name: adjustment("gemma4", "gemma4", tok, request, "tiny-gemma4")
            for name, request in choice_requests(TOOLS, CHOICES).items()}


def reasoning_ends(tok):
    return reasoning_ends_per_kwargs(tok, "gemma4", {"default": {}, "thinking": {"enable_thinking": True}}, PROMPTS)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser("~/vllm-oracle/models/tiny-qwen3"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/gemma4.json")
    args = ap.parse_args()
    import vllm

    with tempfile.TemporaryDirectory() as tmp:
        model = make_gemma4(Path(args.model), Path(tmp) / "tiny-gemma4")
        tok = get_tokenizer(str(model))
        eos = tok.convert_tokens_to_ids("<turn|>")
        assert all(len(tok.encode(t, add_special_tokens=False)) == 1 for t in GEMMA4_TOKENS)
        records = record_cases(cases(), tok, "tiny-gemma4", eos)
        doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_gemma4.py",
               "model": "tiny-qwen3 + Gemma 4 control tokens (special, additional_special_tokens; <turn|> eos)",
               "eos_token_id": eos,
               "records": records, "adjusted": adjusted(tok), "is_reasoning_end": reasoning_ends(tok)}
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
