"""What the in-process recorders of one family's goldens share (oracle's venv; imported by
record_step3.py, record_minimax_m3.py, record_json_block.py, record_ernie45.py,
record_hunyuan_a13b.py, record_seed_oss.py, record_gemma4.py, record_granite4.py and record_k2_horizon.py, never
by the tests).

`record_cases`: per case (tests/core/parsers/<family>_cases.py), the token ids (the text encoded,
the EOS appended unless the case ends by length: <|im_end|> unless the family's own is given), vLLM's non-streaming answer and
finish_reason and its own stream (vllm_parse.py); no prompt ids. `adjusted`: what each parser
pair's `adjust_request` sets per request (skip_special_tokens, structural tag, JSON constraint).
"""

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.parser.parser_manager import ParserManager
from vllm_parse import vllm_answer

EOS = 151645  # <|im_end|>


def parser_cls(reasoning, tool, tok):
    return ParserManager.get_parser(tool_parser_name=tool, reasoning_parser_name=reasoning,
                                    enable_auto_tools=True, tokenizer=tok)


def record_cases(cases, tok, model, eos=EOS):
    records = []
    for case in cases:
        cls = parser_cls(case["reasoning_parser"], case["tool_parser"], tok)
        text_ids = tok.encode(case["text"], add_special_tokens=False)
        ids = [*text_ids, eos] if case["finish"] == "stop" else list(text_ids)
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], **case["request"]}
        answer = vllm_answer(cls, tok, body, ids, case["finish"], kwargs=case["chat_template_kwargs"],
                             decoded_ids=text_ids)
        records.append({"case": case, "token_ids": ids, "text_ids": text_ids,
                        "engine_finish_reason": case["finish"], **answer})
    return records


def adjustment(reasoning, tool, tok, request, model):
    """What one parser pair's `adjust_request` sets on one request."""
    cls = parser_cls(reasoning, tool, tok)
    req = ChatCompletionRequest(model=model, messages=[{"role": "user", "content": "hi"}], **request)
    req = cls(tok, req.tools, model_config=None).adjust_request(req)
    so = req.structured_outputs
    return {"request": request, "skip_special_tokens": req.skip_special_tokens,
            "structural_tag": so.structural_tag if so is not None else None,
            "json": so.json if so is not None else None}


def choice_requests(tools, choices):
    """One request per tool_choice of a cases file's CHOICES, plus "auto" and no tools at all."""
    return {"auto": {"tools": tools}, "no_tools": {}, **{k: {"tools": tools, **v[1]} for k, v in choices.items()}}


def adjusted(tok, flags, requests, model):
    return {f"{flag}:{name}": {"reasoning_parser": reasoning, "tool_parser": tool,
                               **adjustment(reasoning, tool, tok, body, model)}
            for flag, (reasoning, tool) in flags.items() for name, body in requests.items()}


def reasoning_ends(tok, reasoning, prompts):
    """A fresh reasoning parser's `is_reasoning_end` on each prompt's token ids."""
    parser = parser_cls(reasoning, None, tok)(tok, None, model_config=None)
    return {name: {"prompt_token_ids": (ids := tok.encode(text, add_special_tokens=False)),
                   "is_reasoning_end": parser.is_reasoning_end(ids)} for name, text in prompts.items()}


def reasoning_ends_per_kwargs(tok, reasoning, kwargs_sets, prompts):
    """`is_reasoning_end` on each prompt, for a reasoning parser built with each set of template kwargs."""
    out = {}
    for kw_name, kwargs in kwargs_sets.items():
        parser = parser_cls(reasoning, None, tok)(tok, None, model_config=None, chat_template_kwargs=kwargs)
        for name, text in prompts.items():
            ids = tok.encode(text, add_special_tokens=False)
            out[f"{name}__{kw_name}"] = {"prompt_token_ids": ids, "chat_template_kwargs": kwargs,
                                         "is_reasoning_end": parser.is_reasoning_end(ids)}
    return out
