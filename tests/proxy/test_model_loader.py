"""Model loading as `derender-proxy serve` does it: directories, the offline HF cache, and the
flags that change what is loaded (--tokenizer, --chat-template, --served-model-name, --max-model-len)."""

from __future__ import annotations

import shutil

import pytest

from proxy.app import create_app
from proxy.cli import build_parser
from proxy.config import config_from_args
from proxy.model_loader import ModelLoadError, load_model, load_served_model

MESSAGES = [{"role": "user", "content": "hi"}]


def serve_config(*argv: str):
    return config_from_args(build_parser().parse_args(["serve", *argv]))


def test_repo_id_resolves_in_the_local_hf_cache_only(tmp_path, monkeypatch, model_dirs):
    snapshot = tmp_path / "hub" / "models--Qwen--Qwen3-0.6B" / "snapshots" / "0123abc"
    shutil.copytree(model_dirs["qwen3"], snapshot)
    (tmp_path / "hub" / "models--Qwen--Qwen3-0.6B" / "refs").mkdir()
    (tmp_path / "hub" / "models--Qwen--Qwen3-0.6B" / "refs" / "main").write_text("0123abc")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    model = load_model("Qwen/Qwen3-0.6B")
    assert model.served_model_names == ["Qwen/Qwen3-0.6B"]
    assert model.max_model_len == 40960 and model.eos_token_ids == [151645, 151643]
    with pytest.raises(ModelLoadError, match="never downloads"):
        load_model("Qwen/Not-In-Cache")


def test_max_model_len_flag_overrides_config(model_dirs):
    model = load_served_model(serve_config(str(model_dirs["qwen3"]), "--max-model-len", "4096"))
    assert model.max_model_len == 4096


def test_tokenizer_flag_takes_the_tokenizer_from_another_directory(tmp_path, model_dirs):
    weights_only = tmp_path / "weights"
    weights_only.mkdir()
    shutil.copy(model_dirs["llama3"] / "config.json", weights_only / "config.json")
    model = load_served_model(serve_config(str(weights_only), "--tokenizer", str(model_dirs["llama3"])))
    assert model.tokenizer.bos_token_id == 128000 and model.max_model_len == 131072


@pytest.mark.slow  # over a second: CI runs it, the fast loop does not
@pytest.mark.parametrize("how", ["file", "inline"])
async def test_chat_template_flag_file_or_inline(aiohttp_client, tmp_path, model_dirs, how):
    template = "{% for m in messages %}<<{{ m.role }}:{{ m.content }}>>{% endfor %}"
    if how == "file":
        path = tmp_path / "t.jinja"
        path.write_text(template)
        arg = str(path)
    else:
        arg = template
    config = serve_config(str(model_dirs["qwen3"]), "--chat-template", arg)
    model = load_served_model(config)
    client = await aiohttp_client(create_app(config, model))
    resp = await client.post("/v1/chat/completions/render", json={"messages": MESSAGES})
    assert resp.status == 200
    ids = (await resp.json())["token_ids"]
    assert model.tokenizer.decode(ids) == "<<user:hi>>"


@pytest.mark.slow  # over a second: CI runs it, the fast loop does not
async def test_served_model_name_aliases(aiohttp_client, model_dirs):
    config = serve_config(str(model_dirs["qwen3"]), "--served-model-name", "alpha", "beta")
    client = await aiohttp_client(create_app(config, load_served_model(config)))
    listed = [m["id"] for m in (await (await client.get("/v1/models")).json())["data"]]
    assert listed == ["alpha", "beta"]
    ok = await client.post("/v1/chat/completions/render", json={"model": "beta", "messages": MESSAGES})
    assert ok.status == 200
    missing = await client.post("/v1/chat/completions/render", json={"model": "gamma", "messages": MESSAGES})
    assert missing.status == 404
    assert (await missing.json())["error"]["message"] == "The model `gamma` does not exist. Valid aliases: alpha, beta."


def test_embedded_default_without_model():
    model = load_served_model(serve_config())
    assert model.served_model_names == ["Qwen/Qwen3-0.6B"]
    assert model.sampling_defaults == {"temperature": 0.6, "top_k": 20, "top_p": 0.95}


def test_directory_without_tokenizer_is_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="tokenizer.json"):
        load_model(str(tmp_path))


@pytest.mark.parametrize("argv, expected", [
    (["/nonexistent-model-dir"], "never downloads models"),
    (["--tool-call-parser", "nope"], "unknown tool-call parser 'nope'"),
    (["--reasoning-parser", "nope", "--port", "0"], "unknown reasoning parser 'nope'"),
    (["--engine-url", "localhost:8000", "--port", "0"], "--engine-url 'localhost:8000': expected http(s)://HOST:PORT"),
    (["--engine-url", "http://e:1", "--engine-api-key", "key\nX-Other: 1", "--port", "0"],
     "--engine-api-key: printable ASCII characters only"),
])
@pytest.mark.slow
def test_serve_start_up_errors_are_one_line_and_exit_2(argv, expected):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "proxy.cli", "serve", *argv], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert expected in proc.stderr and "Traceback" not in proc.stderr
