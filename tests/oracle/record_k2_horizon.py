"""Record vLLM 0.33's K2 Horizon (`k2_horizon`) reasoning / tool parser answers in-process (oracle's venv).

    $ORACLE_DIR/venv033/bin/python tests/oracle/record_k2_horizon.py \\
        [--qwen3 $ORACLE_DIR/models/tiny-qwen3] [--out tests/core/parsers/golden_frontier/k2_horizon.json]

No K2 Horizon tokenizer can be downloaded here: the tokenizer is the oracle's tiny-qwen3 plus K2
Horizon's `<ifm|...>` tags as added tokens that are not special and its turn markers as special
tokens, `<|ifm|im_end|>` the eos (tests/core/parsers/parser_models.py `make_k2_horizon`, the
directory the tests build). Per case of tests/core/parsers/k2_horizon_cases.py the shared steps of
record_golden.py (with `<|ifm|im_end|>` as the EOS); then, per render request, what the parsers'
`adjust_request` sets or the error vLLM raises (the reasoning parser is built with the request's
template kwargs as vLLM's renderer builds it, so a bad `reasoning_effort` is refused there), and
`is_reasoning_end` on a few prompts for each reasoning effort. A recording tool, never imported by
the tests.
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

from record_golden import parser_cls, reasoning_ends_per_kwargs, record_cases  # noqa: E402
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402

from tests.core.parsers.k2_horizon_cases import (  # noqa: E402
    EFFORT_KWARGS,
    FLAGS,
    PROMPTS,
    RENDER_REQUESTS,
    cases,
)
from tests.core.parsers.parser_models import K2_HORIZON_SPECIAL, K2_HORIZON_TAGS, make_k2_horizon  # noqa: E402

MODEL = "tiny-k2-horizon"


def render_adjustment(tok, reasoning, tool, request):
    """What one parser pair's `adjust_request` sets on one request, or the error it raises."""
    cls = parser_cls(reasoning, tool, tok)
    req = ChatCompletionRequest(model=MODEL, messages=[{"role": "user", "content": "hi"}], **request)
    kwargs = req.build_chat_params(None, "auto").chat_template_kwargs
    try:
        req = cls(tok, req.tools, model_config=None, chat_template_kwargs=kwargs).adjust_request(req)
    except Exception as exc:  # noqa: BLE001 - the refusal is the answer (an unknown format or effort)
        return {"error": f"{type(exc).__name__}: {exc}"}
    so = req.structured_outputs
    return {"skip_special_tokens": req.skip_special_tokens,
            "structural_tag": so.structural_tag if so is not None else None,
            "json": so.json if so is not None else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen3", default=os.path.expanduser("~/vllm-oracle/models/tiny-qwen3"))
    ap.add_argument("--out", default="tests/core/parsers/golden_frontier/k2_horizon.json")
    args = ap.parse_args()
    import vllm

    with tempfile.TemporaryDirectory() as tmp:
        tok = get_tokenizer(str(make_k2_horizon(Path(args.qwen3), Path(tmp) / MODEL)))
        assert all(len(tok.encode(t, add_special_tokens=False)) == 1 for t in K2_HORIZON_TAGS + K2_HORIZON_SPECIAL)
        eos = tok.convert_tokens_to_ids("<|ifm|im_end|>")
        records = record_cases(cases(), tok, MODEL, eos=eos)
        render = {f"{flag}:{name}": {"reasoning_parser": reasoning, "tool_parser": tool, "request": body,
                                     **render_adjustment(tok, reasoning, tool, body)}
                  for flag, (reasoning, tool) in FLAGS.items() for name, body in RENDER_REQUESTS.items()}
        doc = {"vllm_version": vllm.__version__, "script": "tests/oracle/record_k2_horizon.py",
               "model": "tiny-qwen3 + K2 Horizon's <ifm|...> tags (not special) and turn markers (special)",
               "records": records, "render": render,
               "is_reasoning_end": reasoning_ends_per_kwargs(tok, "k2_horizon", EFFORT_KWARGS, PROMPTS)}
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
