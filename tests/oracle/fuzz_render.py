"""Differential fuzzing of render against the live vLLM render servers (dev tool, not run in CI).

    /work/venv/bin/python tests/oracle/fuzz_render.py [--seed 1] [--n 300] [--kind chat|completion|llama]

Random chat requests (roles, content parts, tool calls with good and bad arguments, tool results,
reasoning history, developer messages, special-token text, unicode, tools and tool_choice,
template kwargs, reasoning_effort, continue_final_message and a spread of sampling knobs) or
completion requests are sent to vLLM (8110 parsers / 8111 plain Qwen3, 8112 Llama-3 at
max_model_len 256) and rendered in-process by us; status and body must be equal (random request
ids aside). Differences are printed and appended to /tmp/render_fuzz_failures.jsonl. Every
difference found this way so far became a case in record_render.py.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

from oracle_client import post  # noqa: E402

from core.errors import RequestError  # noqa: E402
from core.protocol.chat import ChatCompletionRequest  # noqa: E402
from core.protocol.completion import CompletionRequest  # noqa: E402
from core.render import RenderOptions, render_chat, render_completion  # noqa: E402
from proxy.model_loader import load_model  # noqa: E402
from tests.models import write_model  # noqa: E402

ATOMS = ["abc", "xyz", "Hello,", "world!", "你好", "🎉", "é\u0301", "\n\n\t", "123", "<tool_call>", "</think>",
         "<think>", '{"a":', "1}", "''", "<|im_end|>", "\u3000", "", " "]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "g", "description": "G!",
                                      "parameters": {"type": "object", "properties": {}}}}]


class Fuzzer:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def text(self) -> str:
        r = self.r
        return "".join(r.choice(ATOMS) + r.choice([" ", "", "\n"]) for _ in range(r.randint(0, 12)))

    def message(self) -> dict[str, Any]:
        r, k = self.r, self.r.random()
        if k < 0.35:
            return {"role": "user", "content": self.text()}
        if k < 0.45:
            return {"role": "user", "content": [{"type": "text", "text": self.text()} for _ in range(r.randint(0, 3))]}
        if k < 0.6:
            extra = {"reasoning_content": self.text()} if r.random() < 0.3 else {}
            return {"role": "assistant", "content": self.text(), **extra}
        if k < 0.72:
            return {"role": "assistant", "content": r.choice([None, "", self.text()]), "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {
                    "name": r.choice(["f", "g"]), "arguments": r.choice(['{"a": 1}', "{}", "", "bad", '{"x": "你"}'])}}
                for i in range(r.randint(1, 2))]}
        if k < 0.85:
            return {"role": "tool", "tool_call_id": "c0", "content": self.text()}
        if k < 0.93:
            return {"role": "system", "content": self.text()}
        return {"role": "developer", "content": self.text()}

    def chat(self, tools: bool = True) -> dict[str, Any]:
        r = self.r
        body: dict[str, Any] = {"messages": [self.message() for _ in range(r.randint(1, 5))]}
        if tools and r.random() < 0.3:
            body["tools"] = TOOLS[:r.randint(1, 2)]
            if r.random() < 0.3:
                body["tool_choice"] = r.choice(["none", "auto", "required", {"type": "function", "function": {"name": "f"}}])
        if r.random() < 0.3:
            body["chat_template_kwargs"] = {"enable_thinking": r.choice([True, False])}
        if r.random() < 0.2:
            body["reasoning_effort"] = r.choice(["none", "low", "high"])
        if r.random() < 0.15:
            body["add_generation_prompt"] = False
        if r.random() < 0.1:
            body.update(continue_final_message=True, add_generation_prompt=False)
        knobs = {"temperature": [0, 0.5, 1, 1.7], "top_p": [0.1, 1], "top_k": [-1, 0, 5], "max_tokens": [1, 16, 100, 40000],
                 "n": [1, 2], "stop": ["x", ["a", "bb"]], "seed": [-1, 0, 7], "include_reasoning": [True, False],
                 "parallel_tool_calls": [False], "min_tokens": [0, 2], "logprobs": [True], "echo": [True],
                 "skip_special_tokens": [True, False]}
        for key, values in knobs.items():
            if r.random() < 0.12:
                body[key] = r.choice(values)
        return body

    def completion(self) -> dict[str, Any]:
        r, k = self.r, self.r.random()
        if k < 0.3:
            prompt: Any = self.text()
        elif k < 0.5:
            prompt = [self.text() for _ in range(r.randint(1, 3))]
        elif k < 0.7:
            prompt = [r.randint(0, 151000) for _ in range(r.randint(1, 5))]
        else:
            prompt = [[r.randint(0, 151000) for _ in range(r.randint(0, 3))] for _ in range(r.randint(1, 3))]
        body: dict[str, Any] = {"prompt": prompt}
        knobs = {"echo": [True], "max_tokens": [0, 1, 16, None, 40000], "logprobs": [0, 2],
                 "add_special_tokens": [True, False], "truncate_prompt_tokens": [-1, 1, 2], "temperature": [0, 1.2],
                 "n": [2], "stream": [True], "suffix": ["s"]}
        for key, values in knobs.items():
            if r.random() < 0.15:
                body[key] = r.choice(values)
        return body


def ours(model: Any, options: RenderOptions, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    try:
        data = json.loads(json.dumps(body))
        if "chat" in path:
            return 200, render_chat(model, options, ChatCompletionRequest.model_validate(data))
        return 200, render_completion(model, options, CompletionRequest.model_validate(data))
    except RequestError as exc:
        return exc.status, exc.body()


def without_ids(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(without_ids(v) for v in value)
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    if isinstance(value, dict) and "request_id" in value:
        return {**value, "request_id": None}
    return value


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--kind", choices=["chat", "completion", "llama"], default="chat")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="render-fuzz-"))
    fuzz = Fuzzer(args.seed)
    if args.kind == "llama":
        model = load_model(str(write_model("llama3", tmp / "llama3")), served_model_names=["tiny-llama3"],
                           max_model_len=256)
        targets = {8112: RenderOptions.build()}
    else:
        model = load_model(str(write_model("qwen3", tmp / "qwen3")), served_model_names=["tiny-qwen3"])
        targets = {8110: RenderOptions.build(tool_call_parser="hermes", reasoning_parser="qwen3",
                                             enable_auto_tool_choice=True), 8111: RenderOptions.build()}
    same = differ = 0
    for _ in range(args.n):
        port = fuzz.r.choice(sorted(targets))
        if args.kind == "completion":
            path, body = "/v1/completions/render", fuzz.completion()
        else:
            path, body = "/v1/chat/completions/render", fuzz.chat(tools=args.kind == "chat")
            if args.kind == "llama":
                body["chat_template_kwargs"] = {"date_string": "26 Jul 2024"}
        theirs = post(port, path, body)
        mine = ours(model, targets[port], path, body)
        if without_ids(theirs) == without_ids(mine):
            same += 1
            continue
        differ += 1
        with open("/tmp/render_fuzz_failures.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps({"port": port, "path": path, "request": body, "vllm": theirs, "ours": mine},
                                 ensure_ascii=False) + "\n")
        if differ <= 5:
            print("DIFF", port, json.dumps(body, ensure_ascii=False)[:400])
    print(f"same {same}, different {differ}")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
