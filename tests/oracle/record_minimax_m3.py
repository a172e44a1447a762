"""Record vLLM 0.33's MiniMax M3 (`minimax_m3`) reasoning / tool parser answers in-process.

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_minimax_m3.py \\
        [--qwen3 $ORACLE_DIR/models/tiny-qwen3] [--out tests/core/parsers/golden_frontier/minimax_m3.json]

No MiniMax M3 tokenizer can be downloaded here: the tokenizer is the oracle's tiny-qwen3 plus
`<mm:think>`, `</mm:think>` and `]<]minimax[>[` as added tokens that are not special
(tests/core/parsers/parser_models.py `MINIMAX_M3_TOKENS`, the directory the tests build too). For each
case of tests/core/parsers/minimax_m3_cases.py: the token ids (the text encoded, <|im_end|> appended
unless the case ends by length), vLLM's non-streaming answer and finish_reason and its own stream
(tests/oracle/vllm_parse.py); no prompt ids. Then `adjust_request` per request and
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

from record_golden import adjusted, parser_cls, record_cases  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402

from tests.core.parsers.minimax_m3_cases import FLAGS, KWARGS, PROMPTS, REQUESTS, cases  # noqa: E402
from tests.core.parsers.parser_models import MINIMAX_M3_TOKENS, with_added_tokens  # noqa: E402


def reasoning_ends(tok):
    out = {}
    for kw_name, kwargs in KWARGS.items():
        parser = parser_cls("minimax_m3", None, tok)(tok, None, model_config=None, chat_template_kwargs=kwargs)
        for name, text in PROMPTS.items():
            ids = tok.encode(text, add_special_tokens=False)
            out[f"{name}__{kw_name}"] = {"prompt_token_ids": ids, "chat_template_kwargs": kwargs,
                                         "is_reasoning_end": parser.is_reasoning_end(ids)}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen3", default=os.path.expanduser("~/vllm-oracle/models/tiny-qwen3"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/minimax_m3.json")
    args = ap.parse_args()
    import vllm

    with tempfile.TemporaryDirectory() as tmp:
        model = with_added_tokens(Path(args.qwen3), Path(tmp) / "tiny-minimax-m3", MINIMAX_M3_TOKENS, special=False)
        tok = get_tokenizer(str(model))
        assert all(len(tok.encode(t, add_special_tokens=False)) == 1 for t in MINIMAX_M3_TOKENS)
        records = record_cases(cases(), tok, "tiny-minimax-m3")
        doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_minimax_m3.py",
               "model": "tiny-qwen3 + <mm:think>, </mm:think>, ]<]minimax[>[ (added, not special)", "records": records,
               "adjusted": adjusted(tok, FLAGS, REQUESTS, "tiny-minimax-m3"), "is_reasoning_end": reasoning_ends(tok)}
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
