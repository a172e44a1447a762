"""`--tokenizer-mode mistral`: Mistral's own tokenizer and prompt format, through mistral-common,
as vLLM 0.33 renders and decodes in that mode (vllm/tokenizers/mistral.py, vllm/renderers/mistral.py).

* Render: the request's messages and tools become mistral-common's `ChatCompletionRequest`
  (`from_openai`), validated in test mode and encoded by `encode_chat_completion`; there is no
  Jinja template. Before that vLLM rewrites the request (every assistant message gets a
  `tool_calls` list, tool-call ids longer than 9 characters keep their last 9) and refuses
  `chat_template` / `chat_template_kwargs` and unknown `reasoning_effort`s; whatever mistral-common
  refuses is a 400 carrying its message.
* Decode: vLLM's `MistralTokenizer` token strings, not Hugging Face's: a token is its Tekken piece
  (`[TOOL_CALLS]` for a control token), a piece holding a partial UTF-8 character is taken as its
  bytes, and joining a window drops every control token except `[TOOL_CALLS]`, `[ARGS]`, `[THINK]`,
  `[/THINK]`, which stay in the text even with `skip_special_tokens` (the tool parser reads them).
  `MistralModeTokenizer` gives the incremental detokenizer exactly those strings.

* Grammar (Tekken v11 and newer, where mistral-common's GrammarFactory applies): with the
  mistral tool or reasoning parser vLLM's adjust_request builds a Lark grammar for every chat
  request. vLLM 0.33 calls mistral-common 1.13.1's `get_lark_from_jinja` without its
  `force_tool_names` argument, so every such request is a 400 carrying that TypeError's message;
  only tool_choice "none" with a JSON schema (a json_object / json_schema response format, or
  structured_outputs json / json_object) takes the JSON-only grammar, which works
  (`apply_grammar`). A regex / choice / grammar / whitespace_pattern / structural_tag
  constraint, a structural_tag format or the Responses API keep the pre-v11 path.

SentencePiece tokenizers (`tokenizer.model.v*`, which need the sentencepiece package) take the
same render; their token strings are SentencePiece pieces (no byte joining), and a window is
SentencePiece's decoding of its pieces, the kept four control tokens as their text. The
mistral-common tokenizer object and the grammar templates are given by the I/O layer
(`proxy/model_loader.py`); this module never reads files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from core.errors import bad_request
from core.protocol.common import VLLMValidationError
from core.tokenizer import Tokenizer

# the control tokens vLLM's MistralTokenizer keeps in decoded text (what its parsers read)
KEPT_CONTROL_TOKENS = ("[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]")
TOOL_CALL_ID_LENGTH = 9  # Mistral's tool-call ids; vLLM keeps the last 9 characters of longer ones
TOKENIZER_FILES = "tekken.json or tokenizer.model.v*"
# from this Tekken version on, vLLM's mistral parser builds mistral-common's grammar for every request
GRAMMAR_VERSION = 11
# what vLLM 0.33's call of mistral-common 1.13.1's GrammarFactory.get_lark_from_jinja raises
GRAMMAR_CALL_ERROR = "GrammarFactory.get_lark_from_jinja() missing 1 required positional argument: 'force_tool_names'"
DEFAULT_JSON_SCHEMA: dict[str, Any] = {"anyOf": [{"type": "object"}, {"type": "array"}]}
# structured-output kinds mistral-common's grammar does not take (vLLM keeps the pre-v11 path)
NON_GRAMMAR_CONSTRAINTS = ("regex", "choice", "grammar", "whitespace_pattern", "structural_tag")
REPLACEMENT_CHAR = "\ufffd"
U32_MAX = 2**32 - 1


class BytePiece(str):
    """A Tekken piece that is not whole UTF-8 (it shows U+FFFD): vLLM joins it by its raw bytes."""

    __slots__ = ("raw",)
    raw: bytes

    def __new__(cls, text: str, raw: bytes) -> BytePiece:
        piece = super().__new__(cls, text)
        piece.raw = raw
        return piece


class _NoBackend:
    """What the Hugging Face-only code paths find on `Tokenizer.backend` in this mode: no
    pre-tokenizer, decoder or post-processor, and ids outside the vocabulary unknown (past u32
    an OverflowError, as the Rust lookup raises)."""

    pre_tokenizer = None
    decoder = None
    post_processor = None

    @staticmethod
    def id_to_token(token_id: int) -> str | None:
        if not 0 <= token_id <= U32_MAX:
            raise OverflowError("token id out of range")
        return None


class MistralModeTokenizer(Tokenizer):
    """The `Tokenizer` surface over a mistral-common tokenizer (Tekken or SentencePiece), with
    vLLM's `MistralTokenizer` rules for token strings, special tokens and decoding."""

    hf_backend = False

    def __init__(self, mistral: Any,  # noqa: super().__init__ needs a tokenizer.json
                 grammar_templates: dict[str, str] | None = None) -> None:
        """`grammar_templates`: mistral-common's Lark templates ("base", "think": its
        guidance/data/*_grammar.lark.jinja), needed from Tekken v11 on."""
        from mistral_common.tokens.tokenizers.sentencepiece import SentencePieceTokenizer
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        self.mistral = mistral  # mistral_common MistralTokenizer (validator + instruct encoder)
        inner = mistral.instruct_tokenizer.tokenizer
        if not isinstance(inner, (Tekkenizer, SentencePieceTokenizer)):
            raise ValueError(f"--tokenizer-mode mistral: unsupported tokenizer {type(inner).__name__}")
        self.inner = inner
        self.is_tekken = isinstance(inner, Tekkenizer)
        self.version = int(str(inner.version.value).split("v")[-1])
        # mistral-common's GrammarFactory.is_supported: vLLM's grammar path and plain-text <think>
        self.supports_grammar = self.is_tekken and self.version >= GRAMMAR_VERSION
        if self.supports_grammar and not grammar_templates:
            raise ValueError(f"--tokenizer-mode mistral with a Tekken v{self.version} tokenizer needs "
                             "mistral-common's grammar templates")
        self._grammar_templates = grammar_templates or {}
        self.backend = _NoBackend()  # type: ignore[assignment]
        self.config: dict[str, Any] = {}
        self.chat_template = None
        self._decoder = None  # the detokenizer joins windows with convert_tokens_to_string
        self.decoder_type = None
        self.pre_tokenizer_type = None
        self.vocab_size = inner.n_words
        self.max_token_id = self.vocab_size - 1
        self.added_token_ids = frozenset()
        # (SentencePiece: its control pieces, anywhere in the vocabulary)
        scope = range(inner.num_special_tokens) if self.is_tekken else range(self.vocab_size)
        specials = [i for i in scope if inner.is_special(i)]
        self._special_texts = {i: inner.id_to_piece(i) for i in specials}
        self.all_special_ids = frozenset(specials)
        kept = {inner.get_special_token(t) for t in KEPT_CONTROL_TOKENS if inner.is_special(t)}
        self.decode_skip_ids = self.all_special_ids - kept
        self._kept_texts = frozenset(KEPT_CONTROL_TOKENS)
        self._dropped_texts = frozenset(self._special_texts.values()) - self._kept_texts
        self.special_tokens_map = {"bos_token": inner.id_to_piece(inner.bos_id),
                                   "eos_token": inner.id_to_piece(inner.eos_id),
                                   "unk_token": inner.id_to_piece(inner.unk_id)}
        self.additional_special_tokens: list[str] = []
        self.bos_token_id = inner.bos_id
        self.eos_token_id = inner.eos_id
        piece = self._piece if self.is_tekken else inner.id_to_piece
        self._id_to_token_cache: list[str | None] = [piece(i) for i in range(self.vocab_size)]
        # without skip_special_tokens vLLM takes every piece as text: a partial character stays U+FFFD
        self._plain_token_cache: list[str | None] = [None if t is None else str(t) for t in self._id_to_token_cache]
        self._vocab: dict[str, int] | None = None

    def _piece(self, token_id: int) -> str:
        special = self._special_texts.get(token_id)
        if special is not None:
            return special
        if token_id < self.inner.num_special_tokens:  # a filler id: Tekken decodes it as its string
            return self.inner.id_to_piece(token_id)
        raw = self.inner.id_to_byte_piece(token_id)
        text = raw.decode("utf-8", errors="replace")
        return BytePiece(text, raw) if REPLACEMENT_CHAR in text else text

    # -- mistral-common's grammar (v11+) ------------------------------------------------

    def json_grammar(self, schema: dict[str, Any] | None) -> str:
        """mistral-common's GrammarFactory.get_lark_for_json_schema: the Lark grammar that only
        accepts JSON of `schema` (its template for this version, special tokens as `<[id]>`)."""
        from jinja2 import Template

        tekken = self.inner
        lark = {tekken.id_to_piece(i): f"<[{i}]>" for i in range(tekken.num_special_tokens)}
        begin, end = lark.get("[THINK]"), lark.get("[/THINK]")
        variant = "think" if self.version >= 13 and begin is not None else "base"
        return str(Template(self._grammar_templates[variant]).render(
            mode="none", fcall="", json_schema_str=json.dumps(schema, ensure_ascii=False) if schema else None,
            parallel_tool_calls=True, json_only=True, think_with_json=self.version >= 15,
            begin_think_token=begin, end_think_token=end))

    # -- ids <-> text -------------------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.inner.encode(text, bos=add_special_tokens, eos=False)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """transformers' MistralCommonBackend.decode: mistral-common's, control tokens kept or dropped
        (SentencePiece keeping them joins the raw pieces)."""
        from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy

        policy = SpecialTokenPolicy.IGNORE if skip_special_tokens else SpecialTokenPolicy.KEEP
        return self.inner.decode(list(ids), special_token_policy=policy)

    def token_strings(self, skip_special_tokens: bool) -> list[str | None]:
        """vLLM's MistralTokenizer.convert_ids_to_tokens: with skip_special_tokens a partial
        UTF-8 piece is its bytes (joined into characters later), without it its U+FFFD text."""
        return self._id_to_token_cache if skip_special_tokens else self._plain_token_cache

    def convert_ids_to_tokens(self, ids: Iterable[int], skip_special_tokens: bool = False) -> list[str | None]:
        skip = self.decode_skip_ids if skip_special_tokens else frozenset()
        top, cache = self.max_token_id, self.token_strings(skip_special_tokens)
        return [cache[i] if 0 <= i <= top else None for i in ids if i not in skip]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """vLLM's MistralTokenizer.convert_tokens_to_string. Tekken: control tokens other than
        the kept four are dropped; the rest are joined, through their bytes when a piece is partial
        UTF-8 (text runs decoded with replacement, control tokens as their own text).
        SentencePiece: the kept four as their text, each run of other pieces through
        SentencePiece's own decoding of pieces (which drops control pieces)."""
        if not self.is_tekken:
            return self._sentencepiece_string(tokens)
        dropped = self._dropped_texts  # (a BytePiece's text holds U+FFFD: never a control token's)
        kept = [t for t in tokens if t not in dropped]
        if not any(isinstance(t, BytePiece) for t in kept):
            return "".join(kept)
        parts: list[str] = []
        run = bytearray()
        for token in kept:
            if isinstance(token, BytePiece):
                run += token.raw
            elif token in self._kept_texts:
                parts.append(run.decode("utf-8", errors="replace"))
                run.clear()
                parts.append(token)
            else:
                run += token.encode("utf-8")
        parts.append(run.decode("utf-8", errors="replace"))
        return "".join(parts)

    def _sentencepiece_string(self, tokens: list[str]) -> str:
        from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy

        kept, decode = self._kept_texts, self.inner.decode
        if not any(t in kept for t in tokens):
            return decode(tokens, SpecialTokenPolicy.IGNORE) if tokens else ""
        parts: list[str] = []
        run: list[str] = []
        for token in tokens:
            if token in kept:
                if run:
                    parts.append(decode(run, SpecialTokenPolicy.IGNORE))
                    run = []
                parts.append(token)
            else:
                run.append(token)
        if run:
            parts.append(decode(run, SpecialTokenPolicy.IGNORE))
        return "".join(parts)

    def token_to_id(self, token: str | None) -> int | None:
        if token is None:
            return None
        return self.get_vocab().get(token)

    def get_vocab(self) -> dict[str, int]:
        """vLLM's vocabulary dict: each token string to its lowest id."""
        if self._vocab is None:
            vocab: dict[str, int] = {}
            for i, piece in enumerate(self._id_to_token_cache):
                if piece is not None and not isinstance(piece, BytePiece):  # vLLM's keys for these are bytes
                    vocab.setdefault(piece, i)
            self._vocab = vocab
        return self._vocab


# -- render ------------------------------------------------------------------------------


def prepare_messages(messages: list[dict[str, Any]]) -> None:
    """vLLM's request rewrite in this mode (maybe_serialize_tool_calls, truncate_tool_call_ids),
    in place: every assistant message gets a `tool_calls` list, ids keep their last 9 characters."""
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            calls = message.get("tool_calls")
            calls = list(calls) if calls is not None else []
            for call in calls:
                if isinstance(call, dict) and isinstance(call.get("id"), str) \
                        and len(call["id"]) > TOOL_CALL_ID_LENGTH:
                    call["id"] = call["id"][-TOOL_CALL_ID_LENGTH:]
            message["tool_calls"] = calls
        elif role in ("tool_results", "tool"):
            call_id = message.get("tool_call_id")
            if isinstance(call_id, str) and len(call_id) > TOOL_CALL_ID_LENGTH:
                message["tool_call_id"] = call_id[-TOOL_CALL_ID_LENGTH:]


def parse_history_arguments(messages: list[dict[str, Any]]) -> None:
    """Earlier tool calls' arguments as dicts (`{}` when not a JSON object), in the request's own
    messages: vLLM's parse_chat_messages parses them in place, and mistral-common then reads them."""
    from core.chat_template import parse_tool_call_arguments

    parse_tool_call_arguments([m for m in messages if m.get("role") == "assistant"
                               and isinstance(m.get("tool_calls"), list) and m["tool_calls"]])


def validate_request(chat_template: Any, chat_template_kwargs: Any, reasoning_effort: str | None) -> None:
    """vLLM's validate_request_params for Mistral tokenizers."""
    from mistral_common.protocol.instruct.request import ReasoningEffort

    if chat_template is not None or chat_template_kwargs is not None:
        raise VLLMValidationError("chat_template is not supported for Mistral tokenizers.",
                                  parameter="chat_template")
    allowed = [e.value for e in ReasoningEffort]
    if reasoning_effort and reasoning_effort not in allowed:
        raise VLLMValidationError(f"reasoning_effort={reasoning_effort} is not supported by Mistral models. "
                                  f"Supported values are: {allowed}.", parameter="reasoning_effort")


def _check_prompt_flags(messages: list[dict[str, Any]], add_generation_prompt: bool,
                        continue_final_message: bool) -> None:
    if add_generation_prompt and continue_final_message:
        raise ValueError("Cannot set both `add_generation_prompt` and `continue_final_message` to True.")
    last = messages[-1]  # an empty chat: IndexError, whose message vLLM answers
    if add_generation_prompt and last["role"] == "assistant":
        raise ValueError("Cannot set `add_generation_prompt` to True when the last message is from the assistant. "
                         "Consider using `continue_final_message` instead.")
    if continue_final_message and last["role"] != "assistant":
        raise ValueError("Cannot set `continue_final_message` to True when the last message is not from the "
                         "assistant.")


def _adapt_content(message: Any) -> Any:
    """transformers' `_maybe_adapt_message` for text: content parts without a type are dropped."""
    if not isinstance(message, dict):
        return message
    content = message.get("content")
    if not content or isinstance(content, str):
        return message
    return {**message, "content": [part for part in content if part.get("type", None)]}


def render_chat_prompt(tokenizer: MistralModeTokenizer, messages: list[dict[str, Any]],
                       tools: list[dict[str, Any]] | None, *, add_generation_prompt: bool,
                       continue_final_message: bool, reasoning_effort: str | None) -> list[int]:
    """The prompt's token ids, as vLLM's MistralTokenizer.apply_chat_template (through
    transformers' MistralCommonBackend) makes them; anything it refuses is a 400 with its message."""
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    try:
        _check_prompt_flags(messages, add_generation_prompt, continue_final_message)
        extra = {"reasoning_effort": reasoning_effort} if tokenizer.version >= 15 else {}
        request = ChatCompletionRequest.from_openai(
            messages=[_adapt_content(m) for m in messages], tools=tools,
            continue_final_message=continue_final_message, **extra)
        return list(tokenizer.mistral.encode_chat_completion(request).tokens)
    except Exception as exc:  # vLLM turns whatever mistral-common raises into a 400 with its text
        raise bad_request(str(exc)) from None


# -- grammar (Tekken v11+) -----------------------------------------------------------------


def uses_grammar(tokenizer: Any, request: Any, responses_api: bool) -> bool:
    """Whether vLLM's mistral parser takes its grammar path for this request (else the pre-v11 one)."""
    if not getattr(tokenizer, "supports_grammar", False) or responses_api:
        return False
    if request.grammar_from_parser:  # the other parser already built it: nothing more to do
        return True
    constraints = request.structured_outputs
    if constraints is not None and any(getattr(constraints, k) is not None for k in NON_GRAMMAR_CONSTRAINTS):
        return False
    response_format = request.response_format
    return response_format is None or response_format.type != "structural_tag"


def apply_grammar(tokenizer: MistralModeTokenizer, request: Any) -> Any:
    """vLLM's grammar path of the mistral parser's adjust_request (`uses_grammar` holds): the
    request's JSON schema (structured outputs first, then a non-text response format, which is
    dropped); tool_choice "none" with a schema gets the JSON-only grammar, anything else fails
    as vLLM 0.33's call of mistral-common fails."""
    if request.grammar_from_parser:
        return request
    from core.protocol.common import StructuredOutputsParams

    schema: dict[str, Any] | None = None
    constraints = request.structured_outputs
    response_format = request.response_format
    if constraints is not None:
        if constraints.json_object is not None:
            schema = DEFAULT_JSON_SCHEMA
        elif constraints.json_ is not None:
            schema = json.loads(constraints.json_) if isinstance(constraints.json_, str) else constraints.json_
        else:
            raise bad_request("Unsupported request.structured_outputs for MistralParser. "
                              "Only `json` and `json_object` are supported.")
    elif response_format is not None and response_format.type != "text":
        if response_format.type == "json_object":
            schema = DEFAULT_JSON_SCHEMA
        elif response_format.json_schema is not None:
            schema = response_format.json_schema.json_schema
        else:
            schema = DEFAULT_JSON_SCHEMA
        request.response_format = None
    if request.tool_choice != "none" or schema is None:
        raise bad_request(GRAMMAR_CALL_ERROR)
    request.structured_outputs = StructuredOutputsParams(grammar=tokenizer.json_grammar(schema))
    request.set_grammar_from_parser()
    return request
