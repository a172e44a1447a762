"""Record vLLM 0.33's gpt-oss (Harmony) parser answers in-process (run with the oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_harmony_parser.py \
        [--model $ORACLE_DIR/models/tiny-gptoss] [--out tests/core/parsers/golden_frontier/harmony.json]

For each case of tests/core/parsers/harmony_cases.py: the token ids (the text encoded by the
model's tokenizer, special tokens recognized), vLLM's non-streaming answer (`HarmonyParser.parse`
then `assemble_chat_message_fields`, ids by shape) and finish_reason, and vLLM's own stream run one
token per `parse_delta` (through `ChatStreamProcessor`, as its derender does) aggregated, which
shows where its stream differs from its non-streaming answer. A recording tool, never imported
by the tests.
"""

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from vllm.entrypoints.openai.chat_completion.message_assembly import assemble_chat_message_fields  # noqa: E402
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor  # noqa: E402
from vllm.entrypoints.serve.utils.tool_calls_utils import resolve_finish_reason  # noqa: E402
from vllm.parser.parser_manager import ParserManager  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402

from tests.core.parsers.harmony_cases import cases  # noqa: E402

STOP_IDS = {200002, 200012}  # the generation config's EOS ids that end an answer


def id_shape(tool_id):
    if tool_id and tool_id.startswith("chatcmpl-tool-") and len(tool_id) == 30:
        return "chatcmpl-tool-<16hex>"
    return tool_id


def parser_cls(case, tok):
    return ParserManager.get_parser(tool_parser_name=case["tool_parser"], reasoning_parser_name=case["reasoning_parser"],
                                    enable_auto_tools=True, is_harmony=True, tokenizer=tok)


def run(case, tok):
    body = {"model": "tiny-gptoss", "messages": [{"role": "user", "content": "hi"}], **case["request"]}
    ids = tok.encode(case["text"], add_special_tokens=False)
    engine_finish = "stop" if ids and ids[-1] in STOP_IDS else "length"
    cls = parser_cls(case, tok)
    req = ChatCompletionRequest(**body)
    parser = cls(tok, req.tools, model_config=None)
    reasoning, content, calls = parser.parse(tok.decode(ids), req, True, ids)
    fields = assemble_chat_message_fields(req, reasoning, content, calls, enable_auto_tools=True, parser_cls=cls)
    message = {"reasoning": fields.reasoning, "content": fields.content,
               "tool_calls": [{"id": id_shape(t.id), "name": t.function.name, "arguments": t.function.arguments}
                              for t in fields.tool_calls]}
    finish = resolve_finish_reason(engine_finish, req, bool(fields.tool_calls))

    sreq = ChatCompletionRequest(**body, stream=True)
    proc = ChatStreamProcessor(sreq, cls(tok, sreq.tools, model_config=None), enable_auto_tools=True, parser_cls=cls)
    agg = {"reasoning": None, "content": None, "tool_calls": {}}
    stream_finish = None
    for i, tid in enumerate(ids):
        last = i == len(ids) - 1
        delta, fin = proc.step(tok.decode([tid]), [tid], engine_finish if last else None, None)
        stream_finish = fin or stream_finish
        if delta is None:
            continue
        for key in ("reasoning", "content"):
            value = getattr(delta, key)
            if value:
                agg[key] = (agg[key] or "") + value
        for tc in delta.tool_calls or []:
            call = agg["tool_calls"].setdefault(tc.index, {"name": "", "arguments": ""})
            if tc.function and tc.function.name:
                call["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                call["arguments"] += tc.function.arguments
    agg["tool_calls"] = [agg["tool_calls"][i] for i in sorted(agg["tool_calls"])]
    return {"case": case, "token_ids": ids, "engine_finish_reason": engine_finish, "message": message,
            "finish_reason": finish, "vllm_stream": {**agg, "finish_reason": stream_finish}}


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
