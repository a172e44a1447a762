"""core.errors.sanitize: file paths, addresses and tracebacks are hidden as vLLM hides them, but a
URL, a request target or a model id is never read as a file."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import error_body, model_not_found, sanitize


@pytest.mark.parametrize("message,expected", [
    # as vLLM's sanitize_message writes them
    ("cannot read /usr/lib/python3/x.py", "cannot read <path>"),
    ("bad file /srv/app/models/tok.json here.", "bad file <path> here."),
    ("No such file: '/x/usr/lib/a'", "No such file: '/x<path>'"),
    ("load ./a/b/c.py failed", "load .<path> failed"),
    ("x /a/b/model.Q4_K_M.gguf.", "x <path>."),
    ("<Foo object at 0xdeadBEEF>", "<Foo object>"),
    ('Traceback:\n  File "/a/b.py", line 3, in f\n    x = 1\nboom', "Traceback:\nboom"),
    # never a URL path or a request target
    ("Not Found: GET /v1/models/Qwen/Qwen3-0.6B", "Not Found: GET /v1/models/Qwen/Qwen3-0.6B"),
    ("Not Found: POST /v1/files/a/b.json", "Not Found: POST /v1/files/a/b.json"),
    ("see https://host/tmp/a.json and http://h:8000/srv/x/y.py", "see https://host/tmp/a.json and http://h:8000/srv/x/y.py"),
    # model ids: versions and sizes are not extensions
    ("The model `org/team/Qwen3-0.6B` does not exist.", "The model `org/team/Qwen3-0.6B` does not exist."),
    ("unknown models/meta-llama/Llama-3.1-8B-Instruct", "unknown models/meta-llama/Llama-3.1-8B-Instruct"),
    ("mistralai/Mistral-7B-v0.1 and deepseek-ai/DeepSeek-V3.2-Exp",
     "mistralai/Mistral-7B-v0.1 and deepseek-ai/DeepSeek-V3.2-Exp"),
    # a path outside a URL next to one inside it
    ("GET /v1/x failed reading /opt/app/cfg.yaml", "GET /v1/x failed reading <path>"),
])
def test_sanitize(message, expected):
    assert sanitize(message) == expected


def test_model_not_found_keeps_a_slashed_model_name():
    err = model_not_found("org/sub/Qwen3-0.6B", ["Qwen/Qwen3-0.6B"])
    assert error_body(err.message, err.type, err.status)["error"]["message"] == (
        "The model `org/sub/Qwen3-0.6B` does not exist. Valid aliases: Qwen/Qwen3-0.6B.")


SEGMENT = st.text(alphabet="abcXYZ019-_.", min_size=1, max_size=12)
PATH = st.lists(SEGMENT, min_size=1, max_size=6).map(lambda s: "/" + "/".join(s))


@given(st.sampled_from(["GET", "POST", "DELETE"]), PATH, st.text(alphabet="abc .:-_0", max_size=40))
def test_request_targets_and_urls_are_never_changed(method, path, around):
    for kept in (f"{method} {path}", f"https://example.com:8443{path}"):
        assert kept in sanitize(f"{around} {kept} {around}")


@given(st.text(alphabet="/a.-_ \nFile\"0x>", max_size=3000))
def test_sanitize_is_total_and_never_grows_much(message):
    out = sanitize(message)
    assert len(out) <= len(message) + message.count("/") * len("<path>")
