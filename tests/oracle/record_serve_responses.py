"""Record the coupled `vllm serve`'s own `POST /v1/responses` answers (response objects and stream events).

Dev tool, never run in CI; for the front door's tests (issue 12). Writes
tests/fixtures/oracle/serve_responses_nonstream.json and serve_responses_stream.json.

Server: `cd /root/vllm-oracle && ./start-serve.sh tiny-qwen3 8115` (vLLM **0.32.0**, the only coupled
server the oracle has: hermes + qwen3 reasoning + auto tool choice, --max-model-len 8192, ~3.5 GB;
stop it afterwards). The weights are random, so outputs are forced: greedy sampling, a
`structured_outputs.regex` for the text after the reasoning, and a small `logit_bias` on `</think>`
(151668) tuned so the reasoning ends after a few tokens (the grammar applies only once the
reasoning has ended). The values recorded are vLLM 0.32's; vLLM 0.33's code differs in a few
places (see `DIFFERENCES_033`, from its source).

Stream cases store the parsed events as `response` ([{"event", "data"}]); the first case also its raw SSE text
(`event: NAME\ndata: JSON\n\n` per event, and no `data: [DONE]` at the end). Ids (`resp_`, `msg_`, `rs_`, `fc_`, `chatcmpl-tool-`) and
`created_at` are random per call: compare by shape.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from oracle_client import Recorder, http  # noqa: E402
from record_render import expand  # noqa: E402

SCRIPT = "tests/oracle/record_serve_responses.py"
PORT = 8115
SERVER = "serve-q3"
THINK_END = "151668"
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
CALL_RE = "<tool_call>\n\\{\"name\": \"get_weather\", \"arguments\": \\{\"city\": \"{city}\"\\}\\}\n</tool_call>"
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
BASE = {"model": "tiny-qwen3", "temperature": 0}

DIFFERENCES_033 = [
    "0.33's response objects add prompt_cache_key, prompt_cache_options, prompt_cache_retention and "
    "safety_identifier (echoed from the request) next to the 0.32 fields",
    "0.33 builds the last output item of a length-cut answer with status 'incomplete' (message, function_call); "
    "0.32 writes 'completed' (utils.build_response_output_items, response_item_status)",
    "0.33 closes the last streamed item with status 'incomplete' on finish_reason length "
    "(SimpleStreamingEventProcessor.close_current(response_item_status(finish_reason)))",
    "0.32 ends every stream with response.completed, even when that response's status is 'incomplete'; 0.33 "
    "sends response.incomplete then (serving.responses_stream_generator)",
    "0.33's final streamed response reuses the streamed items (same ids, no re-parse: "
    "SimpleContext.streamed_output_items); 0.32 re-parses the whole output, so its final output can differ "
    "from the streamed items (see call_cut_by_length)",
]

CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("text_length", "content cut by max_output_tokens: status incomplete, incomplete_details max_output_tokens",
     {**NO_THINK, "input": "Hi", "max_output_tokens": 8}),
    ("text_completed", "content only, ended by the grammar (EOS): status completed",
     {**NO_THINK, "input": "Say hi.", "structured_outputs": {"regex": "Hello!"}, "max_output_tokens": 60}),
    ("reasoning_then_text", "a reasoning item, then a message item",
     {"input": "Say hi.", "logit_bias": {THINK_END: 1.5}, "structured_outputs": {"regex": "Hello!"},
      "max_output_tokens": 60}),
    ("reasoning_length", "reasoning never ends: one reasoning item, incomplete",
     {"input": "Say hi.", "max_output_tokens": 12}),
    ("reasoning_text_call", "reasoning, text, then a function_call item (hermes)",
     {"input": "Weather in Paris?", "tools": [WEATHER], "logit_bias": {THINK_END: 1.6},
      "structured_outputs": {"regex": "Let me check\\.\n" + CALL_RE.replace("{city}", "Paris")},
      "max_output_tokens": 100}),
    ("call_only", "only a function call (no text, no reasoning)",
     {**NO_THINK, "input": "Weather in Paris?", "tools": [WEATHER],
      "structured_outputs": {"regex": CALL_RE.replace("{city}", "Paris")}, "max_output_tokens": 100}),
    ("two_calls", "two function calls in one answer",
     {**NO_THINK, "input": "Paris and Rome?", "tools": [WEATHER], "structured_outputs": {
         "regex": CALL_RE.replace("{city}", "Paris") + "\n" + CALL_RE.replace("{city}", "Rome")},
      "max_output_tokens": 160}),
    ("two_calls_parallel_false", "parallel_tool_calls false keeps the first call",
     {**NO_THINK, "input": "Paris and Rome?", "tools": [WEATHER], "parallel_tool_calls": False,
      "structured_outputs": {"regex": CALL_RE.replace("{city}", "Paris") + "\n" + CALL_RE.replace("{city}", "Rome")},
      "max_output_tokens": 160}),
    ("call_cut_by_length", "the answer ends inside a tool call",
     {"input": "Weather in Paris?", "tools": [WEATHER], "logit_bias": {THINK_END: 1.55},
      "structured_outputs": {"regex": "Let me check\\.\n" + CALL_RE.replace("{city}", "Paris")},
      "max_output_tokens": 100}),
    ("logprobs", "include message.output_text.logprobs with top_logprobs 2",
     {**NO_THINK, "input": "Say hi.", "structured_outputs": {"regex": "Hello!"}, "max_output_tokens": 20,
      "include": ["message.output_text.logprobs"], "top_logprobs": 2}),
    ("include_reasoning_false", "include_reasoning false drops the reasoning item",
     {"input": "Say hi.", "logit_bias": {THINK_END: 1.5}, "structured_outputs": {"regex": "Hello!"},
      "max_output_tokens": 60, "include_reasoning": False}),
    ("echoed_fields", "the request fields a response echoes",
     {**NO_THINK, "input": "Say hi.", "instructions": "Be brief.", "metadata": {"k": "v"}, "user": "u-1",
      "top_p": 0.5, "tools": [WEATHER], "tool_choice": "auto", "parallel_tool_calls": False,
      "text": {"format": {"type": "json_object"}}, "reasoning": {"effort": "low"}, "max_output_tokens": 5,
      "service_tier": "auto", "store": False, "truncation": "auto", "max_tool_calls": 2}),
]

ERRORS: list[tuple[str, str, dict[str, Any]]] = [
    ("previous_response_id_unknown", "the store is off by default: every id is unknown (404)",
     {"input": "Hi", "previous_response_id": "resp_nope"}),
    ("background_without_store", "background needs VLLM_ENABLE_RESPONSES_API_STORE",
     {"input": "Hi", "background": True}),
    ("prompt_too_long", "the front door's own length check",
     {"input": {"$repeat": ["hello ", 9000]}}),
    ("max_output_tokens_over_context", "", {"input": "Hi", "max_output_tokens": 9000}),
]


def post_sse(body: dict[str, Any]) -> tuple[int, str, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}/v1/responses", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            return resp.status, resp.headers.get("content-type", ""), resp.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("content-type", ""), exc.read().decode("utf-8")


def parse_events(raw: str) -> list[dict[str, Any]]:
    events = []
    for block in raw.split("\n\n"):
        if not block.strip():
            continue
        name, data = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: "):])
        events.append({"event": name, "data": data})
    return events


def main() -> None:
    flags = ["--tool-call-parser", "hermes", "--reasoning-parser", "qwen3", "--enable-auto-tool-choice",
             "--max-model-len", "8192"]
    nonstream = Recorder("serve_responses_nonstream", "POST /v1/responses of the coupled vllm serve, non-streaming "
                         "(shapes for the front door; see differences_033)", SCRIPT)
    stream = Recorder("serve_responses_stream", "POST /v1/responses of the coupled vllm serve, streaming "
                      "(event order and shapes for the front door; see differences_033)", SCRIPT)
    for rec in (nonstream, stream):
        rec.server(SERVER, PORT, "tiny-qwen3", flags, kind="render")
        rec.servers[SERVER]["kind"] = "serve"
        rec.servers[SERVER]["command"] = "vllm serve tiny-qwen3 " + " ".join(flags)
    for name, description, body in CASES:
        request = {**BASE, **body}
        status, resp, _ = http(PORT, "/v1/responses", request)
        assert status == 200, (name, resp)
        nonstream.add({"name": name, "server": SERVER, "description": description, "method": "POST",
                       "path": "/v1/responses", "request": request, "status": status, "response": resp})
        request = {**request, "stream": True}
        status, content_type, raw = post_sse(request)
        assert status == 200, (name, raw)
        case = {"name": name, "server": SERVER, "description": description, "method": "POST",
                "path": "/v1/responses", "request": request, "status": status, "content_type": content_type,
                "response": parse_events(raw)}
        if not stream.cases:
            case["raw"] = raw
        stream.add(case)
    for name, description, body in ERRORS:
        request = {**BASE, **body}
        status, resp, _ = http(PORT, "/v1/responses", expand(request))
        nonstream.add({"name": name, "server": SERVER, "description": description, "method": "POST",
                       "path": "/v1/responses", "request": request, "status": status, "response": resp})
    status, resp, _ = http(PORT, "/v1/responses/resp_nope", method="GET")
    nonstream.add({"name": "retrieve_unknown", "server": SERVER, "description": "GET of an unknown id",
                   "method": "GET", "path": "/v1/responses/resp_nope", "request": None, "status": status,
                   "response": resp})
    nonstream.write(differences_033=DIFFERENCES_033)
    stream.write(differences_033=DIFFERENCES_033)


if __name__ == "__main__":
    main()
