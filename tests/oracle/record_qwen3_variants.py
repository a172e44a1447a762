"""Record vLLM 0.33's step3p5 / nemotron_v3 parser answers in-process (oracle's venv, tiny-qwen3).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_qwen3_variants.py \\
        [--model $ORACLE_DIR/models/tiny-qwen3] [--out tests/core/parsers/golden_frontier/qwen3_variants.json]

For each case of tests/core/parsers/qwen3_variants_cases.py: the token ids (the text encoded, the
EOS <|im_end|> appended), vLLM's non-streaming answer and its own stream (tests/oracle/vllm_parse.py).
A recording tool, never imported by the tests.
"""

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).parent))

from vllm.parser.parser_manager import ParserManager  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402
from vllm_parse import vllm_answer  # noqa: E402

from tests.core.parsers.qwen3_variants_cases import cases  # noqa: E402

EOS = 151645  # <|im_end|>


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser("~/vllm-oracle/models/tiny-qwen3"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/qwen3_variants.json")
    args = ap.parse_args()
    tok = get_tokenizer(args.model)
    import vllm
    records = []
    for case in cases():
        cls = ParserManager.get_parser(tool_parser_name=case["tool_parser"],
                                       reasoning_parser_name=case["reasoning_parser"], enable_auto_tools=True,
                                       tokenizer=tok)
        text_ids = tok.encode(case["text"], add_special_tokens=False)
        ids = [*text_ids, EOS]
        body = {"model": "tiny-qwen3", "messages": [{"role": "user", "content": "hi"}], **case["request"]}
        answer = vllm_answer(cls, tok, body, ids, "stop", kwargs=case["chat_template_kwargs"], decoded_ids=text_ids)
        records.append({"case": case, "token_ids": ids, "engine_finish_reason": "stop", **answer})
    doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_qwen3_variants.py",
           "model": "tiny-qwen3", "records": records}
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
