"""Record golden parser answers from the real vLLM 0.33 (run with the oracle's venv, not ours).

    $ORACLE_DIR/venv033/bin/python tests/core/parsers/vllm_oracle.py CASES.json OUT.json

Each case: {"tokenizer": dir, "reasoning_parser", "tool_parser", "request": {...ChatCompletionRequest
fields...}, "chat_template_kwargs": {...}, "text": str, "prompt_token_ids": [...]|null}.
For each case we record vLLM's non-streaming `Parser.parse` (ids shape only) and its streaming
`parse_delta` run one token at a time (aggregated), as vLLM's derender would see them.
A case whose request has `messages` is a render-side case (`run_render_case`).
With `--parse-only` (the differential fuzz, test_fuzz_oracle.py) only the non-streaming message
and finish_reason are computed (`run_parse_case`), with the parser classes cached.
This file runs in vLLM's venv; the test suite only starts it as a subprocess.
"""

import json
import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.entrypoints.openai.chat_completion.message_assembly import assemble_chat_message_fields  # noqa: E402
from vllm.entrypoints.serve.utils.tool_calls_utils import resolve_finish_reason  # noqa: E402
from vllm.parser.parser_manager import ParserManager  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402

_TOKENIZERS = {}


def tokenizer(path):
    if path not in _TOKENIZERS:
        _TOKENIZERS[path] = get_tokenizer(path)
    return _TOKENIZERS[path]


def id_shape(tool_id):
    if tool_id is None:
        return None
    if tool_id.startswith("chatcmpl-tool-") and len(tool_id) == 30:
        return "chatcmpl-tool-<16hex>"
    return tool_id


def token_texts(tok, ids):
    """Per-token delta texts as an incremental detokenizer (skip_special_tokens=False) gives them."""
    out, prev, start = [], "", 0
    for i in range(len(ids)):
        cur = tok.decode(ids[: i + 1], skip_special_tokens=False)
        if cur.endswith("\ufffd") and i + 1 < len(ids):
            out.append("")
            continue
        out.append(cur[len(prev):])
        prev = cur
    return out


def run_case(case):
    tok = tokenizer(case["tokenizer"])
    cls = ParserManager.get_parser(tool_parser_name=case.get("tool_parser"),
                                   reasoning_parser_name=case.get("reasoning_parser"),
                                   enable_auto_tools=case.get("enable_auto_tools", True), tokenizer=tok)
    body = {"model": "x", "messages": [{"role": "user", "content": "hi"}], **case.get("request", {})}
    req = ChatCompletionRequest(**body)
    kwargs = case.get("chat_template_kwargs", {})
    text = case["text"]
    ids = case.get("token_ids") or tok.encode(text, add_special_tokens=False)
    prompt = case.get("prompt_token_ids")
    if prompt is None and case.get("prompt_text") is not None:
        prompt = tok.encode(case["prompt_text"], add_special_tokens=False)
    result = {"token_ids": ids, "prompt_token_ids": prompt}
    parser = cls(tok, req.tools, chat_template_kwargs=kwargs, model_config=None)
    if prompt is not None:
        parser.set_prompt_token_ids(prompt)
    try:
        reasoning, content, calls = parser.parse(text, req, case.get("enable_auto_tools", True), ids)
        result["parse"] = {"reasoning": reasoning, "content": content, "tool_calls": [
            {"id": id_shape(c.id), "name": c.name, "arguments": c.arguments} for c in (calls or [])]}
        fields = assemble_chat_message_fields(req, reasoning, content, calls,
                                              enable_auto_tools=case.get("enable_auto_tools", True), parser_cls=cls)
        result["message"] = {"reasoning": fields.reasoning, "content": fields.content, "tool_calls": [
            {"id": id_shape(t.id), "name": t.function.name, "arguments": t.function.arguments}
            for t in fields.tool_calls]}
        result["finish_reason"] = resolve_finish_reason("stop", req, bool(fields.tool_calls))
    except Exception as exc:  # noqa: BLE001
        result["parse"] = {"error": repr(exc)}
    # streaming, one token per delta
    parser = cls(tok, req.tools, chat_template_kwargs=kwargs, model_config=None)
    prompt = prompt or []
    agg = {"reasoning": "", "content": "", "tool_calls": {}}
    try:
        texts = token_texts(tok, ids)
        for i, (t, tid) in enumerate(zip(texts, ids)):
            d = parser.parse_delta(t, [tid], req, prompt, finished=(i == len(ids) - 1))
            if d is None:
                continue
            agg["reasoning"] += d.reasoning or ""
            agg["content"] += d.content or ""
            for tc in d.tool_calls or []:
                slot = agg["tool_calls"].setdefault(str(tc.index), {"id": None, "name": "", "arguments": ""})
                if tc.id:
                    slot["id"] = id_shape(tc.id)
                if tc.function:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
        result["stream"] = agg
    except Exception as exc:  # noqa: BLE001
        result["stream"] = {"error": repr(exc)}
    try:
        adjusted = parser.adjust_request(ChatCompletionRequest(**body))
        so = adjusted.structured_outputs
        result["adjusted"] = {"skip_special_tokens": adjusted.skip_special_tokens,
                              "structural_tag": so.structural_tag if so is not None else None,
                              "json": so.json if so is not None else None,
                              "response_format_cleared": adjusted.response_format is None}
    except Exception as exc:  # noqa: BLE001
        result["adjusted"] = {"error": repr(exc)}
    try:
        result["is_reasoning_end_prompt"] = parser.is_reasoning_end(prompt) if prompt else None
    except Exception as exc:  # noqa: BLE001
        result["is_reasoning_end_prompt"] = repr(exc)
    return result


_PARSER_CLASSES = {}


def run_parse_case(case):
    """vLLM's non-streaming answer: `Parser.parse` + `assemble_chat_message_fields`, finish_reason."""
    tok = tokenizer(case["tokenizer"])
    auto = case.get("enable_auto_tools", True)
    key = (case["tokenizer"], case.get("tool_parser"), case.get("reasoning_parser"), auto)
    harmony = case.get("reasoning_parser") == "openai_gptoss"
    if key not in _PARSER_CLASSES or harmony:
        # (vLLM's get_parser sets the Harmony parser's tool and reasoning parsers on its one class:
        # it is asked again for each case, so the last flags asked for are the case's)
        _PARSER_CLASSES[key] = ParserManager.get_parser(tool_parser_name=case.get("tool_parser"),
                                                        reasoning_parser_name=case.get("reasoning_parser"),
                                                        enable_auto_tools=auto, tokenizer=tok, is_harmony=harmony)
    cls = _PARSER_CLASSES[key]
    try:
        req = ChatCompletionRequest(model="x", messages=[{"role": "user", "content": "hi"}], **case.get("request", {}))
        ids = case.get("token_ids") or tok.encode(case["text"], add_special_tokens=False)
        prompt = case.get("prompt_token_ids")
        if cls is None:
            return {"message": {"reasoning": None, "content": case["text"], "tool_calls": []},
                    "finish_reason": resolve_finish_reason("stop", req, False)}
        parser = cls(tok, req.tools, chat_template_kwargs=case.get("chat_template_kwargs", {}), model_config=None)
        if prompt is not None:
            parser.set_prompt_token_ids(prompt)
        reasoning, content, calls = parser.parse(case["text"], req, auto, ids)
        fields = assemble_chat_message_fields(req, reasoning, content, calls, enable_auto_tools=auto, parser_cls=cls)
        return {"message": {"reasoning": fields.reasoning, "content": fields.content, "tool_calls": [
            {"id": id_shape(t.id), "name": t.function.name, "arguments": t.function.arguments}
            for t in fields.tool_calls]}, "finish_reason": resolve_finish_reason("stop", req, bool(fields.tool_calls))}
    except Exception as exc:  # noqa: BLE001 - a vLLM failure is an answer too (a 500 there)
        return {"error": repr(exc)}


def run_render_case(case):
    """Render side only: the prompt vLLM's tokenizer renders for `messages`, and what
    `ChatCompletionRequest.resolve_reasoning_ended` gives after the parser's `adjust_request`
    (as vLLM's render server computes `reasoning_ended`)."""
    tok = tokenizer(case["tokenizer"])
    cls = ParserManager.get_parser(tool_parser_name=case.get("tool_parser"),
                                   reasoning_parser_name=case.get("reasoning_parser"),
                                   enable_auto_tools=True, tokenizer=tok)
    req = ChatCompletionRequest(model="x", **case["request"])
    kwargs = case.get("chat_template_kwargs", {})
    tools = [t.model_dump() for t in req.tools] if req.tools else None  # as vLLM's renderer passes them
    prompt = tok.apply_chat_template(case["request"]["messages"], tools=tools, add_generation_prompt=True,
                                     tokenize=False, **kwargs)
    ids = tok.encode(prompt, add_special_tokens=False)
    parser = cls(tok, req.tools, chat_template_kwargs=kwargs, model_config=None)
    req = parser.adjust_request(req)
    reasoning = parser if case.get("reasoning_parser") else None
    return {"prompt_token_ids": ids, "grammar_from_parser": req._grammar_from_parser,
            "reasoning_ended": req.resolve_reasoning_ended(reasoning, ids)}


def main():
    parse_only = "--parse-only" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--parse-only"]
    cases = json.load(open(args[0]))
    paths = json.loads(os.environ.get("ORACLE_TOKENIZERS", "{}"))
    for case in cases:
        case["tokenizer"] = paths.get(case["tokenizer"], case["tokenizer"])
    out = []
    for case in cases:
        if parse_only:
            result = run_parse_case(case)
        else:
            result = run_render_case(case) if "messages" in case["request"] else run_case(case)
        case["tokenizer"] = {v: k for k, v in paths.items()}.get(case["tokenizer"], case["tokenizer"])
        out.append({"case": case, "vllm": result})
    # parse-only answers may hold lone surrogates (a JSON "\\ud83d" alone): keep them escaped
    json.dump(out, open(args[1], "w"), ensure_ascii=parse_only, indent=None if parse_only else 1)


if __name__ == "__main__":
    main()
