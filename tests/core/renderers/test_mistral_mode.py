"""`--tokenizer-mode mistral` at start-up (which directories load, the one-line refusals) and the
mode's decoding rules on mistral-common's Tekken and SentencePiece tokenizers (core/renderers/mistral.py).
The render and derender answers themselves are checked against vLLM in tests/proxy/test_mistral_mode.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.detokenizer import IncrementalDetokenizer
from proxy.model_loader import ModelLoadError, load_model
from tests.mistral_models import write_mistral_model
from tests.proxy.test_mistral_mode import NAME, mistral_model, write_tiny_mistral  # noqa: F401


def test_the_mode_loads_tekken_and_names_its_renderer(mistral_model):  # noqa: F811
    assert mistral_model.renderer == "mistral"
    assert mistral_model.eos_token_ids == [2]
    assert mistral_model.max_model_len == 32768


def test_auto_picks_the_mode_for_mistral_format_directories(tmp_path):
    """vLLM's `auto`: consolidated weights and a Mistral tokenizer file mean mistral mode."""
    path = write_tiny_mistral(tmp_path / "m")
    (path / "consolidated.safetensors").write_bytes(b"")
    assert load_model(str(path)).renderer == "mistral"


def test_a_directory_without_a_mistral_tokenizer_is_a_one_line_error(tmp_path):
    path = tmp_path / "empty"
    path.mkdir()
    (path / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match=r"--tokenizer-mode mistral needs a Mistral tokenizer file \(tekken.json "
                                             r"or tokenizer.model.v\*\)") as err:
        load_model(str(path), tokenizer_mode="mistral")
    assert "\n" not in str(err.value)


def test_sentencepiece_loads_with_its_pieces(tmp_path):
    """tokenizer.model.v7: SentencePiece pieces as token strings, control pieces special, no grammar."""
    model = load_model(str(write_mistral_model(tmp_path / "sp", "tiny-mistral-sp")), tokenizer_mode="mistral")
    tok = model.tokenizer
    assert (model.renderer, tok.version, tok.is_tekken, tok.supports_grammar) == ("mistral", 7, False, False)
    assert tok.convert_ids_to_tokens(tok.encode("Hi there")) == ["▁Hi", "▁there"]
    assert tok.token_to_id("[TOOL_CALLS]") in tok.all_special_ids and tok.token_to_id("[ARGS]") is None
    assert tok.convert_tokens_to_string(["▁Hi", "[TOOL_CALLS]", "▁there", "[INST]"]) == "Hi[TOOL_CALLS]there"


def test_sentencepiece_without_its_package_is_a_one_line_error(tmp_path, monkeypatch):
    import mistral_common.imports

    path = write_mistral_model(tmp_path / "sp", "tiny-mistral-sp")
    monkeypatch.setattr(mistral_common.imports, "is_sentencepiece_installed", lambda: False)
    with pytest.raises(ModelLoadError, match=r"SentencePiece tokenizer \(tokenizer.model.v7\) needs the "
                                             r"sentencepiece package") as err:
        load_model(str(path), tokenizer_mode="mistral")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name, version, think", [("tiny-mistral-v11", 11, False), ("tiny-mistral-v13", 13, True)])
def test_tekken_v11_and_later_load_with_their_grammar(tmp_path, name, version, think):
    """From v11 vLLM builds mistral-common's grammar (its templates come from the package)."""
    model = load_model(str(write_mistral_model(tmp_path / name, name)), tokenizer_mode="mistral")
    tok = model.tokenizer
    assert (model.renderer, tok.version, tok.supports_grammar) == ("mistral", version, True)
    assert tok.token_to_id("[ARGS]") == 32 and (tok.token_to_id("[THINK]") == 34) is think
    grammar = tok.json_grammar({"type": "object"})
    assert grammar.startswith("start: ") and '%json {"type": "object"}' in grammar
    assert ("<[34]>" in grammar) is think  # the think template names [THINK] by id


TEXTS = st.text(alphabet=st.sampled_from(list("ab ,.\n") + ["東", "京", "🗼", "é", "🌞", "ß"]), max_size=24)


@settings(max_examples=60, deadline=None)
@given(TEXTS)
def test_skipping_special_tokens_decodes_characters_split_over_byte_tokens(mistral_model, text):  # noqa: F811
    """With skip_special_tokens the incremental text is Tekken's own decode (partial pieces are joined
    by their bytes); without it a piece that is not whole UTF-8 stays U+FFFD, as in vLLM."""
    tok = mistral_model.tokenizer
    ids = tok.encode(text)
    detok = IncrementalDetokenizer.seeded(tok, [1, 3], skip_special_tokens=True)
    assert detok.feed(ids) + detok.feed([tok.eos_token_id]) == text
    plain = IncrementalDetokenizer.seeded(tok, [1, 3], skip_special_tokens=False)
    out = plain.feed(ids) + plain.feed(tok.encode(" x"))
    assert out == "".join(tok.decode([i]) for i in ids) + " x"  # each byte piece its own U+FFFD


def test_control_tokens_in_text(mistral_model):  # noqa: F811
    """[TOOL_CALLS] stays (the parser reads it) even when skipping; [INST] never shows."""
    tok = mistral_model.tokenizer
    tool_calls, inst = tok.token_to_id("[TOOL_CALLS]"), tok.token_to_id("[INST]")
    ids = [*tok.encode("a"), tool_calls, *tok.encode("b"), inst, *tok.encode("c")]
    for skip in (True, False):
        assert IncrementalDetokenizer.seeded(tok, [1], skip_special_tokens=skip).feed(ids) == "a[TOOL_CALLS]bc"
    assert tok.token_to_id("[ARGS]") is None  # v3: the pre-v11 tool-call form


@pytest.mark.slow
def test_serve_exits_with_one_line_naming_the_flag(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "no-tokenizer"
    path.mkdir()
    proc = subprocess.run([sys.executable, "-m", "proxy.cli", "serve", str(path), "--tokenizer-mode", "mistral",
                           "--engine-url", "http://127.0.0.1:9", "--port", "0"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--tokenizer-mode mistral needs a Mistral tokenizer file" in lines[0]
