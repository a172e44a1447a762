"""Record vLLM 0.33's Kimi K3 parser answers in-process (oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_kimi_k3.py \\
        [--qwen3 $ORACLE_DIR/models/tiny-qwen3] [--out tests/core/parsers/golden_frontier/kimi_k3.json]

The tokenizer is the oracle's tiny-qwen3 plus K3's `<|open|>`, `<|close|>`, `<|sep|>` as special
tokens, built by the function the tests use (tests/core/parsers/parser_models.py). For each case of
tests/core/parsers/kimi_k3_cases.py: the token ids (the text encoded, <|im_end|> appended unless the
case ends by length), vLLM's non-streaming answer and finish_reason and its own stream
(tests/oracle/vllm_parse.py), and `is_reasoning_end` of the ids; per render request, what
`adjust_request` sets (skip_special_tokens, spaces_between_special_tokens, the structural tag) or
the error it raises. A recording tool, never imported by the tests.
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

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.parser.parser_manager import ParserManager  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402
from vllm_parse import vllm_answer  # noqa: E402

from tests.core.parsers.kimi_k3_cases import RENDER_CASES, RENDER_REQUESTS, cases  # noqa: E402
from tests.core.parsers.parser_models import KIMI_K3_TOKENS, with_added_tokens  # noqa: E402

EOS = 151645  # <|im_end|>


def _render(tok, reasoning, tool, body):
    cls = ParserManager.get_parser(tool_parser_name=tool, reasoning_parser_name=reasoning, enable_auto_tools=True,
                                   tokenizer=tok)
    req = ChatCompletionRequest(model="tiny-kimi-k3", messages=[{"role": "user", "content": "hi"}], **body)
    try:
        req = cls(tok, req.tools, model_config=None).adjust_request(req)
    except Exception as exc:  # noqa: BLE001 - the refusal is the answer (named choice without a tag)
        return {"error": f"{type(exc).__name__}: {exc}"}
    so = req.structured_outputs
    return {"structural_tag": so.structural_tag if so else None, "json": so.json if so else None,
            "skip_special_tokens": req.skip_special_tokens,
            "spaces_between_special_tokens": req.spaces_between_special_tokens}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen3", default=os.path.expanduser("~/vllm-oracle/models/tiny-qwen3"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/kimi_k3.json")
    args = ap.parse_args()
    import vllm
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = with_added_tokens(Path(args.qwen3), Path(tmp) / "tiny-kimi-k3", KIMI_K3_TOKENS)
        tok = get_tokenizer(str(model_dir))
        records = []
        for case in cases():
            cls = ParserManager.get_parser(tool_parser_name=case["tool_parser"],
                                           reasoning_parser_name=case["reasoning_parser"], enable_auto_tools=True,
                                           tokenizer=tok)
            ids = tok.encode(case["text"], add_special_tokens=False)
            text_ids = list(ids)
            if case["finish"] == "stop":
                ids.append(EOS)
            body = {"model": "tiny-kimi-k3", "messages": [{"role": "user", "content": "hi"}], **case["request"]}
            answer = vllm_answer(cls, tok, body, ids, case["finish"], kwargs=case["chat_template_kwargs"],
                                 decoded_ids=text_ids)
            end = None
            if case["reasoning_parser"]:
                rp = cls(tok, None, model_config=None, chat_template_kwargs=case["chat_template_kwargs"])
                end = rp.is_reasoning_end(text_ids)
            records.append({"case": case, "token_ids": ids, "engine_finish_reason": case["finish"],
                            "is_reasoning_end": end, **answer})
        render = {}
        for (reasoning, tool), name in RENDER_CASES:
            render[f"{reasoning}+{tool}:{name}"] = {"reasoning_parser": reasoning, "tool_parser": tool,
                                                   "request": RENDER_REQUESTS[name],
                                                   **_render(tok, reasoning, tool, RENDER_REQUESTS[name])}
    doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_kimi_k3.py",
           "model": "tiny-qwen3 + <|open|>, <|close|>, <|sep|> (special)", "records": records, "render": render}
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
