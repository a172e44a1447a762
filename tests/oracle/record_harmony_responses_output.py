"""Record vLLM 0.33's gpt-oss (Harmony) Responses output in-process (run with the oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_harmony_responses_output.py \
        [--model $ORACLE_DIR/models/tiny-gptoss] [--out tests/core/parsers/golden_frontier/harmony_responses.json]

vLLM's render server has no Responses derender, so this drives vLLM's own serving pieces on token
ids, the way `OpenAIServingResponses` does for a gpt-oss model: a real `HarmonyContext` (with vLLM's
`HarmonyParser`) fed the whole output once (non-streaming: `harmony_to_response_output` per
message, the status rule of `responses_full_generator`, the reasoning-token count), and fed one
token per engine output (streaming: the events of `_process_harmony_streaming_events`, built by
`streaming_events.py`'s functions, then the final output with the streamed ids reused). For each
output of tests/core/parsers/harmony_cases.py, with the function tools get_weather and get_time.
A recording tool, never imported by the tests.
"""

import argparse
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from openai.types.responses import ResponseOutputItemDoneEvent  # noqa: E402
from vllm.entrypoints.openai.responses.context import HarmonyContext  # noqa: E402
from vllm.entrypoints.openai.responses.harmony import harmony_to_response_output  # noqa: E402
from vllm.entrypoints.openai.responses.protocol import ResponsesRequest  # noqa: E402
from vllm.entrypoints.openai.responses.streaming_events import (  # noqa: E402
    StreamingState, emit_content_delta_events, emit_previous_item_done_events)
from vllm.entrypoints.openai.responses.utils import (extract_function_tool_names,  # noqa: E402
                                                       reuse_streamed_item_ids)
from vllm.parser.parser_manager import ParserManager  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402

from tests.core.parsers.harmony_cases import OUTPUTS  # noqa: E402

STOP_IDS = {200002, 200012}
TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}}}, {"type": "function", "name": "get_time", "parameters": {"type": "object"}}]


def engine_output(ids, finished, finish_reason):
    completion = SimpleNamespace(token_ids=list(ids), finish_reason=finish_reason if finished else None)
    return SimpleNamespace(outputs=[completion], finished=finished, prompt_token_ids=[1, 2, 3], num_cached_tokens=0,
                           num_cache_creation_tokens=0, kv_transfer_params=None, ec_transfer_params=None)


def context(cls, tok, request):
    parser = cls(tok, request.tools, chat_template_kwargs={}, model_config=None)
    return HarmonyContext([], [], extract_function_tool_names(request.tools), response_parser=parser, request=request)


def dump(item):
    return item.model_dump(mode="json", by_alias=True) if hasattr(item, "model_dump") else item


def output_of(ctx, streamed_by_message=None):
    """responses_full_generator's Harmony branch: items, status."""
    msgs = ctx.messages[ctx.num_init_messages:]
    streamed = iter(streamed_by_message or [])
    next_streamed = next(streamed, None)
    output = []
    for i, msg in enumerate(msgs):
        items = harmony_to_response_output(msg, ctx.function_tool_names,
                                           incomplete=(i == len(msgs) - 1 and ctx.last_append_flush_status))
        if next_streamed is not None and next_streamed[0] is msg:
            reuse_streamed_item_ids(items, next_streamed[1])
            next_streamed = next(streamed, None)
        output.extend(items)
    if output:
        status = {"length": "incomplete", "abort": "cancelled"}.get(ctx.finish_reason, "completed")
    else:
        status = "incomplete"
    return [dump(i) for i in output], status


def run(name, text, cls, tok):
    request = ResponsesRequest(model="tiny-gptoss", input="hi", tools=TOOLS)
    ids = tok.encode(text, add_special_tokens=False)
    finish = "stop" if ids and ids[-1] in STOP_IDS else "length"
    record = {"name": name, "text": text, "token_ids": ids, "finish_reason": finish}
    try:
        whole = context(cls, tok, request)
        whole.append_output(engine_output(ids, True, finish))
        output, status = output_of(whole)
        record["non_streamed"] = {"output": output, "status": status,
                                  "reasoning_tokens": whole.num_reasoning_tokens}
    except Exception as exc:  # vLLM fails this output (a 500 there)
        record["non_streamed"] = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        ctx = context(cls, tok, request)
        state = StreamingState()
        events = []
        for n, token in enumerate(ids):
            last = n == len(ids) - 1
            ctx.append_output(engine_output([token], last, finish))
            for segment in ctx.last_append_segments:
                if segment.delta:
                    events += emit_content_delta_events(segment, state, ctx.function_tool_names)
                elif segment.completed_message is not None:
                    done = []
                    for event in emit_previous_item_done_events(segment.completed_message, state,
                                                                 ctx.function_tool_names):
                        if isinstance(event, ResponseOutputItemDoneEvent):
                            done.append(event.item)
                        events.append(event)
                    ctx.streamed_items_by_message.append((segment.completed_message, done))
                    state.reset_for_new_item()
        output, status = output_of(ctx, ctx.streamed_items_by_message)
        record["streamed"] = {"events": [dump(e) for e in events], "output": output, "status": status,
                              "reasoning_tokens": ctx.num_reasoning_tokens}
    except Exception as exc:
        record["streamed"] = {"error": f"{type(exc).__name__}: {exc}"}
    return record


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser("~/vllm-oracle/models/tiny-gptoss"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/harmony_responses.json")
    args = ap.parse_args()
    tok = get_tokenizer(args.model)
    cls = ParserManager.get_parser(tool_parser_name="openai", reasoning_parser_name="openai_gptoss",
                                   enable_auto_tools=True, is_harmony=True, tokenizer=tok)
    import vllm
    records = [run(name, text, cls, tok) for name, text in OUTPUTS.items()]
    records.append(run("empty_output", "", cls, tok))
    doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_harmony_responses_output.py",
           "model": "tiny-gptoss (tests/frontier_models.py recipe)", "tools": TOOLS, "records": records}
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
