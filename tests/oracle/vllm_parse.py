"""vLLM 0.33's own answer for one output, in-process (import only under the oracle's venv).

`vllm_answer` runs a vLLM `Parser` class the way its derender does: the non-streaming
`Parser.parse` + `assemble_chat_message_fields` (tool-call ids by shape) and `resolve_finish_reason`,
then its stream one token per `ChatStreamProcessor.step`, aggregated. Used by the in-process
recorders (record_harmony_parser.py, record_dsml_parser.py).
"""

from __future__ import annotations

from typing import Any

from vllm.entrypoints.openai.chat_completion.message_assembly import assemble_chat_message_fields
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor
from vllm.entrypoints.serve.utils.tool_calls_utils import resolve_finish_reason


def id_shape(tool_id: str | None) -> str | None:
    if tool_id and tool_id.startswith("chatcmpl-tool-") and len(tool_id) == 30:
        return "chatcmpl-tool-<16hex>"
    return tool_id


def vllm_answer(cls: Any, tok: Any, body: dict[str, Any], ids: list[int], engine_finish: str,
                kwargs: dict[str, Any] | None = None, decoded_ids: list[int] | None = None) -> dict[str, Any]:
    """`decoded_ids`: the ids whose text the parser gets (the stop token left out); default all."""
    extra = {} if kwargs is None else {"chat_template_kwargs": kwargs}
    text_ids = ids if decoded_ids is None else decoded_ids
    req = ChatCompletionRequest(**body, **extra)
    parser = cls(tok, req.tools, model_config=None, **extra)
    reasoning, content, calls = parser.parse(tok.decode(text_ids), req, True, ids)
    fields = assemble_chat_message_fields(req, reasoning, content, calls, enable_auto_tools=True, parser_cls=cls)
    message = {"reasoning": fields.reasoning, "content": fields.content,
               "tool_calls": [{"id": id_shape(t.id), "name": t.function.name, "arguments": t.function.arguments}
                              for t in fields.tool_calls]}
    finish = resolve_finish_reason(engine_finish, req, bool(fields.tool_calls))

    sreq = ChatCompletionRequest(**body, stream=True, **extra)
    proc = ChatStreamProcessor(sreq, cls(tok, sreq.tools, model_config=None, **extra), enable_auto_tools=True,
                               parser_cls=cls)
    agg: dict[str, Any] = {"reasoning": None, "content": None, "tool_calls": {}}
    stream_finish = None
    for i, tid in enumerate(ids):
        last = i == len(ids) - 1
        piece = "" if i >= len(text_ids) else tok.decode(text_ids[:i + 1])[len(tok.decode(text_ids[:i])):]
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
    return {"message": message, "finish_reason": finish, "vllm_stream": {**agg, "finish_reason": stream_finish}}
