"""Record vLLM 0.33's gpt-oss (Harmony) parser answers in-process (run with the oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_harmony_parser.py \
        [--model $ORACLE_DIR/models/tiny-gptoss] [--out tests/core/parsers/golden_frontier/harmony.json]

For each case of tests/core/parsers/harmony_cases.py: the token ids (the text encoded by the
model's tokenizer, special tokens recognized), vLLM's non-streaming answer (`HarmonyParser.parse`
then `assemble_chat_message_fields`, ids by shape) and finish_reason, and vLLM's own stream run one
token per `parse_delta` (through `ChatStreamProcessor`, as its derender does) aggregated
(tests/oracle/vllm_parse.py), which shows where its stream differs from its non-streaming answer. A recording tool, never imported
by the tests.
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
from vllm_parse import vllm_answer  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402

from tests.core.parsers.harmony_cases import cases  # noqa: E402

STOP_IDS = {200002, 200012}  # the generation config's EOS ids that end an answer


def parser_cls(case, tok):
    return ParserManager.get_parser(tool_parser_name=case["tool_parser"], reasoning_parser_name=case["reasoning_parser"],
                                    enable_auto_tools=True, is_harmony=True, tokenizer=tok)


def run(case, tok):
    body = {"model": "tiny-gptoss", "messages": [{"role": "user", "content": "hi"}], **case["request"]}
    ids = tok.encode(case["text"], add_special_tokens=False)
    engine_finish = "stop" if ids and ids[-1] in STOP_IDS else "length"
    cls = parser_cls(case, tok)
    answer = vllm_answer(cls, tok, body, ids, engine_finish)
    return {"case": case, "token_ids": ids, "engine_finish_reason": engine_finish, **answer}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser("~/vllm-oracle/models/tiny-gptoss"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/harmony.json")
    args = ap.parse_args()
    tok = get_tokenizer(args.model)
    import vllm
    records = [run(case, tok) for case in cases()]
    doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_harmony_parser.py",
           "model": "tiny-gptoss (tests/frontier_models.py recipe)", "records": records}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
