"""Record the coupled `vllm serve`'s Messages API answers (vLLM 0.32, the only CPU build that serves):
the objects and event sequences the `/v1/messages` front door must produce.

Dev tool, never run in CI. Writes tests/fixtures/oracle/serve_messages_nonstream.json,
serve_messages_stream.json and serve_messages_count_tokens.json. Server (in /root/vllm-oracle;
the symlinked name keeps its log and pid files apart from other users of tiny-qwen3):

  8116  ln -sfn tiny-qwen3 models/msgs-serve-qwen3;
        ./start-serve.sh msgs-serve-qwen3 8116 --served-model-name tiny-qwen3
        (hermes + qwen3 + --enable-auto-tool-choice, max_model_len 8192; ~3.5 GB)

The model has random weights: the text is noise, greedy (temperature 0) so a re-recording gives
the same tokens. What to read is the shape: block order, thinking signatures, tool_use ids,
stop_reason / stop_sequence, usage, the SSE event order. A stop sequence is taken from the
recorded greedy text so that it matches. A forced tool choice starts a real call (structured
outputs), but random weights never finish it (whitespace inside the arguments until max_tokens):
non-streamed that is a text block with the raw markup, streamed a tool_use block with partial
input_json_delta pieces; the completed tool_use shapes are in core/render_messages.py's docstring.
Streams keep the raw SSE text (`response_raw`) and the parsed events (`events`:
`{"event": name, "data": payload}`).

vLLM 0.32 vs 0.33 (our wire target): the Messages conversion and the non-streaming builder are the
same; 0.33's stream converter reads chat chunks as objects instead of SSE strings and turns an
upstream error into an `error` event with the status-derived type. Ids are `chatcmpl-...`, not
`msg_...`; signatures are random uuid4 hex; tool_use ids `chatcmpl-tool-<16 hex>` (volatile).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import Recorder, http, post_sse  # noqa: E402

SCRIPT = "tests/oracle/record_messages_serve.py"
PORT = 8116
SERVER = "q3-serve"
MESSAGES, COUNT = "/v1/messages", "/v1/messages/count_tokens"
USER = [{"role": "user", "content": "Say something."}]
# enum-only arguments: the forced call completes in a few tokens even with random weights
UNIT_TOOL = {"name": "set_unit", "description": "Pick a unit", "strict": True, "input_schema": {
    "type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["unit"],
    "additionalProperties": False}}


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "tiny-qwen3", "max_tokens": 24, "temperature": 0, "messages": USER, **fields}


def sse_events(raw: str) -> list[dict[str, Any]]:
    """`event: NAME` / `data: JSON` pairs in order (Anthropic's SSE framing)."""
    out = []
    for block in raw.split("\n\n"):
        name, data = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = line[len("data: "):]
        if data is not None:
            try:
                payload: Any = json.loads(data)
            except ValueError:
                payload = data
            out.append({"event": name, "data": payload})
    return out


def nonstream(rec: Recorder, name: str, request: Any, description: str = "", path: str = MESSAGES,
              **kw: Any) -> dict[str, Any]:
    return rec.call(name, SERVER, path, request, description, **kw)


def stream(rec: Recorder, name: str, request: dict[str, Any], description: str = "") -> dict[str, Any]:
    status, raw, headers = post_sse(PORT, MESSAGES, request)
    case = {"name": name, "server": SERVER, "description": description, "method": "POST", "path": MESSAGES,
            "request": request, "status": status,
            "response_headers": {k.lower(): v for k, v in headers.items() if k.lower() in ("content-type",)},
            "response": None, "response_raw": raw, "events": sse_events(raw)}
    return rec.add(case)


def a_stop_sequence(text: str) -> str:
    """A short piece from the middle of the greedy text: generation stops on it."""
    words = [w for w in text.split() if len(w) >= 3]
    if words:
        return words[len(words) // 2][:6]
    return text[len(text) // 2:len(text) // 2 + 3]


def record_nonstream() -> None:
    rec = Recorder("serve_messages_nonstream", "POST /v1/messages answers of vLLM 0.32's coupled vllm serve "
                   "(non-streaming, and errors)", SCRIPT)
    rec.server(SERVER, PORT, "tiny-qwen3", ["--tool-call-parser", "hermes", "--reasoning-parser", "qwen3",
                                           "--enable-auto-tool-choice", "--max-model-len", "8192"], kind="serve")
    nonstream(rec, "thinking_default", body(), "Qwen3 thinks by default: reasoning -> a thinking block + signature")
    text_case = nonstream(rec, "text_thinking_disabled", body(thinking={"type": "disabled"}),
                          "enable_thinking false: a text block; max_tokens reached -> stop_reason max_tokens")
    text = "".join(b.get("text", "") for b in text_case["response"].get("content", []))
    stop = a_stop_sequence(text)
    nonstream(rec, "stop_sequence", body(thinking={"type": "disabled"}, stop_sequences=[stop]),
              "a stop sequence taken from the greedy text: stop_reason stop_sequence, stop_sequence set")
    nonstream(rec, "tool_choice_any_cut", body(max_tokens=40, thinking={"type": "disabled"}, tools=[UNIT_TOOL],
                                               tool_choice={"type": "any"}),
              "a forced call cut by max_tokens: invalid JSON, so the markup is a text block; stop_reason max_tokens")
    nonstream(rec, "tool_choice_tool_cut", body(max_tokens=40, thinking={"type": "disabled"}, tools=[UNIT_TOOL],
                                                tool_choice={"type": "tool", "name": "set_unit"}))
    nonstream(rec, "max_tokens_1", body(max_tokens=1, thinking={"type": "disabled"}))
    nonstream(rec, "metadata_and_system", body(thinking={"type": "disabled"}, metadata={"user_id": "u"},
                                               system=[{"type": "text", "text": "Be brief."}]))
    nonstream(rec, "err_unknown_model", body(model="claude-x"), "an error from the handler: Anthropic shape")
    nonstream(rec, "err_missing_max_tokens", {"model": "tiny-qwen3", "messages": USER},
              "a request-validation error: vLLM answers it in the OpenAI shape (FastAPI's handler)")
    nonstream(rec, "err_image", body(messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]))
    nonstream(rec, "err_max_tokens_over_len", body(max_tokens=9000))
    rec.write(stop_sequence_used=stop)
    return None


def record_stream() -> None:
    rec = Recorder("serve_messages_stream", "POST /v1/messages streams of vLLM 0.32's coupled vllm serve "
                   "(raw SSE and parsed events)", SCRIPT)
    rec.server(SERVER, PORT, "tiny-qwen3", ["--tool-call-parser", "hermes", "--reasoning-parser", "qwen3",
                                           "--enable-auto-tool-choice", "--max-model-len", "8192"], kind="serve")
    stream(rec, "thinking_default", body(stream=True),
           "thinking block: content_block_start, thinking_delta..., signature_delta, content_block_stop")
    status, first, _ = http(PORT, MESSAGES, body(thinking={"type": "disabled"}))
    text = "".join(b.get("text", "") for b in first.get("content", [])) if status == 200 else ""
    stream(rec, "text_thinking_disabled", body(stream=True, thinking={"type": "disabled"}))
    stream(rec, "stop_sequence", body(stream=True, thinking={"type": "disabled"},
                                      stop_sequences=[a_stop_sequence(text)]))
    stream(rec, "tool_choice_any_cut", body(stream=True, max_tokens=40, thinking={"type": "disabled"},
                                            tools=[UNIT_TOOL], tool_choice={"type": "any"}),
           "tool_use block: input {} at start, input_json_delta pieces, cut by max_tokens (unlike the non-stream "
           "answer, which has the markup as text)")
    stream(rec, "max_tokens_1", body(stream=True, max_tokens=1, thinking={"type": "disabled"}))
    stream(rec, "err_unknown_model", body(stream=True, model="claude-x"))
    rec.write()


def record_count_tokens() -> None:
    rec = Recorder("serve_messages_count_tokens", "POST /v1/messages/count_tokens answers of vLLM 0.32's coupled "
                   "vllm serve", SCRIPT)
    rec.server(SERVER, PORT, "tiny-qwen3", ["--tool-call-parser", "hermes", "--reasoning-parser", "qwen3",
                                           "--enable-auto-tool-choice", "--max-model-len", "8192"], kind="serve")
    plain = {"model": "tiny-qwen3", "messages": USER}
    nonstream(rec, "simple", plain, path=COUNT)
    nonstream(rec, "system_tools_thinking_disabled", {**plain, "system": "Be brief.", "tools": [UNIT_TOOL],
                                                      "tool_choice": {"type": "auto"},
                                                      "thinking": {"type": "disabled"}}, path=COUNT)
    nonstream(rec, "with_render_fields", {**copy.deepcopy(plain), "max_tokens": 5, "stream": True}, path=COUNT,
              description="fields a count request does not have are ignored")
    nonstream(rec, "err_unknown_model", {**plain, "model": "claude-x"}, path=COUNT)
    nonstream(rec, "err_bad_block", {**plain, "messages": [{"role": "user", "content": [{"type": "nope"}]}]},
              path=COUNT, description="request validation: OpenAI shape in vLLM")
    nonstream(rec, "err_image", {**plain, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]}]}, path=COUNT)
    rec.write()


if __name__ == "__main__":
    record_nonstream()
    record_stream()
    record_count_tokens()
