"""Render: an OpenAI chat/completion request -> vLLM 0.33's GenerateRequest
(docs/vllm-wire-spec.md §2.1, 2.2, 2.3, 3, 7).

The output is a plain dict in GenerateRequest's declaration order, ready for orjson; nothing
here builds pydantic models after the request itself was validated. Checks run in vLLM's order
so a request that breaks several rules gets vLLM's first complaint:

    model -> beam search -> tool_choice vs parsers -> trusted template -> token budget params
    -> template + tokenization + length -> parser adjust_request -> max_tokens -> sampling params

`render_chat` / `render_completion` are synchronous CPU work (template, tokenizer); the HTTP
layer runs them inline or in its thread pool depending on the prompt size (`request_size`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.chat_template import build_conversation, developer_to_system, load_template, render, select_template
from core.errors import RequestError, bad_request, model_not_found
from core.fast_encode import FastEncoder, cached_encoder
from core.model import ModelInfo
from core.parsers.base import ParserContext, ReasoningParser, ToolParser
from core.protocol.chat import ChatCompletionNamedToolChoiceParam, ChatCompletionRequest, has_non_text
from core.protocol.common import MAX_N_SEQUENCES, VLLMValidationError, random_uuid
from core.protocol.completion import CompletionRequest
from core.sampling import chat_sampling_params, completion_sampling_params, get_max_tokens, hoist_transfer_params
from core.template_sandbox import TemplateBudget, TemplateBudgetExceeded, TemplateTimeout, bounded
from core.tokenizer import Tokenizer

REQUEST_TEMPLATE_TIMEOUT = 5.0  # seconds (--request-template-timeout)
# choices per request (prompts x n) by default: vLLM's largest default max_num_seqs, the most
# sequences one engine runs at once (every choice is one sequence on the engine)
MAX_CHOICES = 1024
# what a request's own chat template counts for in request_size: its cost is unknown (it runs
# under a time budget), so it always goes to the thread pool, never inline on the event loop
REQUEST_TEMPLATE_SIZE = 1 << 24
LARGE_REQUEST_SIZE = 1 << 20  # request_size stops counting here (the HTTP layer's threshold is far below)

# vLLM adds this Cohere renderer default to every server's default chat-template kwargs
# (`--cohere-format`, default cmd4); it shows up in parse_context / reasoning_parser_kwargs.
COHERE_FORMAT_DEFAULT = {"cohere_format": "cmd4"}


@dataclass(frozen=True)
class RenderOptions:
    """The server flags that change rendering, with the parser classes resolved once at start-up."""

    default_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    trust_request_chat_template: bool = False
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    enable_auto_tool_choice: bool = False
    exclude_tools_when_tool_choice_none: bool = False
    tool_parser_cls: type[ToolParser] | None = None
    reasoning_parser_cls: type[ReasoningParser] | None = None
    # vLLM's --reasoning-effort-map: rewrite a requested effort to one the template supports
    reasoning_effort_map: dict[str, str] = field(default_factory=dict)
    # seconds a request's own chat template may take to compile and render (core.template_sandbox)
    request_template_timeout: float = REQUEST_TEMPLATE_TIMEOUT
    # choices one request may ask for (prompts x n; --max-choices; 0: vLLM's own limits only)
    max_choices: int = MAX_CHOICES

    @classmethod
    def build(cls, *, default_chat_template_kwargs: dict[str, Any] | None = None,
              trust_request_chat_template: bool = False, tool_call_parser: str | None = None,
              reasoning_parser: str | None = None, enable_auto_tool_choice: bool = False,
              exclude_tools_when_tool_choice_none: bool = False,
              reasoning_effort_map: dict[str, str] | None = None,
              request_template_timeout: float = REQUEST_TEMPLATE_TIMEOUT,
              max_choices: int = MAX_CHOICES) -> RenderOptions:
        """Resolve parser names; an unknown name is a start-up error (ValueError), never a per-request one."""
        from core.parsers.registry import get_reasoning_parser, get_tool_parser

        defaults = dict(default_chat_template_kwargs or {})
        for key, value in COHERE_FORMAT_DEFAULT.items():
            defaults.setdefault(key, value)
        try:
            # like vLLM, a tool parser is only used with --enable-auto-tool-choice
            tool_cls = get_tool_parser(tool_call_parser) if tool_call_parser and enable_auto_tool_choice else None
            reasoning_cls = get_reasoning_parser(reasoning_parser) if reasoning_parser else None
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        return cls(default_chat_template_kwargs=defaults, trust_request_chat_template=trust_request_chat_template,
                   tool_call_parser=tool_call_parser, reasoning_parser=reasoning_parser,
                   enable_auto_tool_choice=enable_auto_tool_choice,
                   exclude_tools_when_tool_choice_none=exclude_tools_when_tool_choice_none,
                   tool_parser_cls=tool_cls, reasoning_parser_cls=reasoning_cls,
                   reasoning_effort_map=dict(reasoning_effort_map or {}),
                   request_template_timeout=request_template_timeout, max_choices=max_choices)

    @classmethod
    def from_config(cls, config: Any) -> RenderOptions:
        """From `proxy.config.ServerConfig` (duck-typed: core never imports proxy)."""
        return cls.build(default_chat_template_kwargs=config.default_chat_template_kwargs,
                         trust_request_chat_template=config.trust_request_chat_template,
                         tool_call_parser=config.tool_call_parser, reasoning_parser=config.reasoning_parser,
                         enable_auto_tool_choice=config.enable_auto_tool_choice,
                         exclude_tools_when_tool_choice_none=config.exclude_tools_when_tool_choice_none,
                         reasoning_effort_map=getattr(config, "reasoning_effort_map", None),
                         request_template_timeout=getattr(config, "request_template_timeout",
                                                          REQUEST_TEMPLATE_TIMEOUT),
                         max_choices=getattr(config, "max_choices", MAX_CHOICES))

    @property
    def has_parser(self) -> bool:
        return self.tool_parser_cls is not None or self.reasoning_parser_cls is not None


UNTRUSTED_TEMPLATE = ("Chat template is passed with request, but --trust-request-chat-template is not set. "
                      "Refused request with untrusted chat template.")


# -- shared pieces -----------------------------------------------------------------------


def check_model(model: ModelInfo, requested: str | None) -> None:
    if not model.is_served(requested):
        raise model_not_found(str(requested), model.served_model_names)


def check_choices(options: RenderOptions, prompts: int, n: int | None) -> None:
    """Bound the choices of one request (prompts x n) by what an engine serves, before any work:
    each is a sequence on the engine and per-choice state here. Requests past vLLM's own limit
    on n get vLLM's message (from the sampling parameters) instead."""
    n = 1 if n is None else n
    if not options.max_choices or not isinstance(n, int) or n > MAX_N_SEQUENCES:
        return
    if prompts * n > options.max_choices:
        asked = f"{prompts} prompts x n={n} = {prompts * n}" if prompts > 1 else f"n={n}"
        raise VLLMValidationError(
            f"This server generates at most {options.max_choices} choices per request (prompts x n, "
            f"--max-choices); this request asks for {asked}. Please ask for fewer choices, or send several "
            "requests.", parameter="n", value=prompts * n)


def base_request_id(header: str | None, body_id: str | None) -> str:
    """The X-Request-Id header (even empty) wins over the body's request_id, else a random id."""
    if header is not None:
        return header
    return body_id if body_id is not None else random_uuid()


def has_request_template(request: Any) -> bool:
    """Whether a chat request (or chat /tokenize request) brings its own chat template."""
    kwargs = getattr(request, "chat_template_kwargs", None)
    return getattr(request, "chat_template", None) is not None or (
        isinstance(kwargs, dict) and kwargs.get("chat_template") is not None)


def request_size(request: Any) -> int:
    """A cheap estimate of the text to render, to decide inline vs thread pool (a chat request, a
    completion request, or /tokenize's chat form)."""
    if isinstance(request, CompletionRequest):
        prompt = request.prompt
        if isinstance(prompt, str):
            return len(prompt)
        if isinstance(prompt, list):
            return sum(len(p) if isinstance(p, (str, list)) else 1 for p in prompt)
        return 0
    # every message and tool call costs template work even when empty (a 5000-message chat of ""
    # renders for ~250 ms): count a fixed share for each
    size = 64 * len(request.messages)
    if has_request_template(request):
        size += REQUEST_TEMPLATE_SIZE
    if size >= LARGE_REQUEST_SIZE:  # large work whatever the rest says: no O(messages) walk on the loop
        return size
    for message in request.messages:
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            size += 128 * len(calls)
        content = message.get("content")
        if isinstance(content, str):
            size += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict):
                    text = part.get("text")
                    size += len(text) if isinstance(text, str) else 0
    if request.tools:
        size += 256 * len(request.tools)
    return size


def fast_encoder(tokenizer: Tokenizer) -> FastEncoder | None:
    """The tokenizer's FastEncoder, built once (None when its pipeline is not supported)."""
    return cached_encoder(tokenizer)


def special_affixes(tokenizer: Tokenizer) -> tuple[list[int], list[int]]:
    """The ids the post-processor puts around a single sequence (Llama-3: BOS before)."""
    cached = getattr(tokenizer, "_render_special_affixes", None)
    if cached is None:
        plain = tokenizer.backend.encode("a", add_special_tokens=False).ids
        full = tokenizer.backend.encode("a", add_special_tokens=True).ids
        cached = ([], [])
        for i in range(len(full) - len(plain) + 1):
            if full[i:i + len(plain)] == plain:
                cached = (full[:i], full[i + len(plain):])
                break
        tokenizer._render_special_affixes = cached  # type: ignore[attr-defined]
    return cached


def warm_up(model: ModelInfo) -> None:
    """Build the per-tokenizer caches at start-up rather than on the first request."""
    if model.tokenizer.hf_backend:
        fast_encoder(model.tokenizer)
        special_affixes(model.tokenizer)
        if model.renderer == "kimi_k3":  # message text is tokenized with special tokens read as text
            from core.renderers.kimi_k3 import text_encoder

            text_encoder(model.tokenizer)
    max_chars_per_token(model.tokenizer)


def max_chars_per_token(tokenizer: Tokenizer) -> int:
    """Longest token string in the vocab (vLLM bounds prompt text by max_model_len times this)."""
    cached = getattr(tokenizer, "_render_max_chars_per_token", None)
    if cached is None:
        cached = max((len(t) for t in tokenizer.get_vocab()), default=1)
        tokenizer._render_max_chars_per_token = cached  # type: ignore[attr-defined]
    return cached


@dataclass(frozen=True)
class TokenBudget:
    """vLLM's TokenizeParams: the prompt-length and truncation rules, validated on construction."""

    max_model_len: int | None  # None: no limit (/tokenize)
    max_output_tokens: int | None
    truncate_prompt_tokens: int | None
    truncation_side: str | None
    add_special_tokens: bool
    max_output_tokens_param: str = "max_tokens"

    def __post_init__(self) -> None:
        m = self.max_model_len
        if m is None:
            return
        if self.max_output_tokens is not None and self.max_output_tokens > m:
            raise VLLMValidationError(
                f"{self.max_output_tokens_param}={self.max_output_tokens} cannot be greater than "
                f"max_model_len={m}. Please request fewer output tokens.",
                parameter=self.max_output_tokens_param, value=self.max_output_tokens)
        t = self.truncate_prompt_tokens
        if t is not None and t > m:
            raise VLLMValidationError(
                f"truncate_prompt_tokens={t} cannot be greater than max_model_len = {m}. "
                "Please request a smaller truncation size.", parameter="truncate_prompt_tokens", value=t)

    def _keep(self) -> int | None:
        t = self.truncate_prompt_tokens
        if t is not None and t < 0:
            if self.max_model_len is None:
                return None
            # hold one token of context back for output (a 0-token generation is useless)
            return self.max_model_len if self.max_output_tokens == 0 else max(0, self.max_model_len - 1)
        return t

    def check_text(self, tokenizer: Tokenizer, text: str) -> str:
        if self.max_model_len is None:
            return text
        limit = self.max_model_len * max_chars_per_token(tokenizer)
        if self.truncate_prompt_tokens is None:
            if len(text) > limit:
                raise VLLMValidationError(
                    f"This model's maximum context length is {self.max_model_len} tokens. However, your prompt "
                    f"contains {len(text)} characters (more than {limit} characters, which is the upper bound for "
                    f"{self.max_model_len} input tokens). Please reduce the length of the input prompt.",
                    parameter="input_text", value=len(text))
        elif self.truncation_side is not None and len(text) > limit:
            text = text[-limit:] if self.truncation_side == "left" else text[:limit]
        return text

    def encode(self, tokenizer: Tokenizer, text: str, with_offsets: bool
               ) -> tuple[list[int], list[list[int]] | None]:
        text = self.check_text(tokenizer, text)
        keep = self._keep()
        if not tokenizer.hf_backend:
            return self._encode_plain(tokenizer, text, keep)
        backend = tokenizer.backend
        if keep is not None and self.truncation_side is None:
            # tokenizer-side truncation; vLLM loads tokenizers with truncation_side="left", and the
            # special tokens the post-processor adds (BOS) survive it
            enc = backend.encode_batch([text], add_special_tokens=False)[0]  # (batch: releases the GIL)
            specials = 0
            if self.add_special_tokens and backend.post_processor is not None:
                specials = backend.post_processor.num_special_tokens_to_add(False)
            if len(enc.ids) + specials > keep:
                enc.truncate(max(0, keep - specials), direction="left")
            if self.add_special_tokens:
                enc = backend.post_process(enc, add_special_tokens=True)
        elif not with_offsets and (fast := fast_encoder(tokenizer)) is not None:
            ids = fast.encode(text)
            if self.add_special_tokens:
                prefix, suffix = special_affixes(tokenizer)
                ids = [*prefix, *ids, *suffix]
            return self.check_tokens(ids, None, encoded=True)
        else:
            # encode_batch, not encode: only the batch call releases the GIL, so a long prompt
            # tokenized in the thread pool does not stall the event loop
            enc = backend.encode_batch([text], add_special_tokens=self.add_special_tokens)[0]
        ids = enc.ids
        offsets = [list(o) for o in enc.offsets] if with_offsets else None
        return self.check_tokens(ids, offsets, encoded=True)

    def _encode_plain(self, tokenizer: Tokenizer, text: str, keep: int | None
                      ) -> tuple[list[int], list[list[int]] | None]:
        """A tokenizer without a Hugging Face pipeline (Mistral's): BOS is the only special token
        added, and tokenizer-side truncation keeps it, as transformers' backends do."""
        ids = tokenizer.encode(text, add_special_tokens=False)
        prefix = [tokenizer.bos_token_id] if self.add_special_tokens and tokenizer.bos_token_id is not None else []
        if keep is not None and self.truncation_side is None and len(ids) + len(prefix) > keep:
            room = max(0, keep - len(prefix))
            ids = ids[len(ids) - room:] if room else []
        return self.check_tokens([*prefix, *ids], None, encoded=True)

    def check_tokens(self, ids: list[int], offsets: list[list[int]] | None = None, encoded: bool = False
                     ) -> tuple[list[int], list[list[int]] | None]:
        """Truncation and the context-length check; `encoded`: ids from our own tokenization, which
        vLLM caps at max_model_len + 1 (hence its "at least")."""
        keep = self._keep()
        if keep is not None and keep < len(ids):
            side = self.truncation_side or "left"  # the tokenizer's side in vLLM
            cut = slice(0, 0) if keep == 0 else (slice(-keep, None) if side == "left" else slice(0, keep))
            ids = ids[cut]
            offsets = offsets[cut] if offsets is not None else None
        if self.max_model_len is not None and len(ids) > self.max_model_len:
            capped = encoded and self.truncate_prompt_tokens is None
            qualifier = "at least " if capped else ""
            count = self.max_model_len + 1 if capped else len(ids)
            raise VLLMValidationError(
                f"This model's maximum context length is {self.max_model_len} tokens. However, your prompt contains "
                f"{qualifier}{count} input tokens, which exceeds this limit even without any output tokens. "
                "Please reduce the length of the input prompt.", parameter="input_tokens", value=count)
        return ids, offsets


def _generate_request(*, request_id: str, token_ids: list[int], token_offsets: list[list[int]] | None,
                      sampling_params: dict[str, Any], request: Any, kv: dict[str, Any] | None,
                      ec: dict[str, Any] | None, reasoning_ended: bool | None = None,
                      reasoning_parser_kwargs: dict[str, Any] | None = None,
                      parse_context: dict[str, Any] | None = None) -> dict[str, Any]:
    stream = bool(request.stream)
    options = request.stream_options if stream else None
    return {
        "request_id": request_id,
        "token_ids": token_ids,
        "token_offsets": token_offsets,
        "features": None,
        "content_parts": None,
        "sampling_params": sampling_params,
        "model": request.model,
        "reasoning_ended": reasoning_ended,
        "reasoning_parser_kwargs": reasoning_parser_kwargs,
        "return_token_ids": request.return_token_ids,
        "output_mode": "tokens",
        "parse_context": parse_context,
        "stream": stream,
        "stream_options": None if options is None else {
            "include_usage": options.include_usage, "continuous_usage_stats": options.continuous_usage_stats},
        "cache_salt": request.cache_salt,
        "priority": request.priority,
        "kv_transfer_params": kv,
        "ec_transfer_params": ec,
    }


# -- chat --------------------------------------------------------------------------------


def merge_kwargs(defaults: dict[str, Any] | None, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """vLLM's merge: overrides win, but their None and "auto" values are skipped."""
    return {**(defaults or {}), **{k: v for k, v in (overrides or {}).items() if v is not None and v != "auto"}}


def request_chat_kwargs(request: ChatCompletionRequest, effort_map: dict[str, str] | None = None) -> dict[str, Any]:
    """The request's own template kwargs: chat_template_kwargs, then the request fields over them
    (docs/vllm-wire-spec.md §7.1)."""
    effort = request.reasoning_effort
    if effort is not None and effort_map:
        effort = effort_map.get(effort, effort)
    extras: dict[str, Any] = {"add_generation_prompt": request.add_generation_prompt,
                              "continue_final_message": request.continue_final_message,
                              "documents": request.documents, "reasoning_effort": effort}
    user = request.chat_template_kwargs or {}
    if effort is not None and "enable_thinking" not in user:
        extras["enable_thinking"] = effort != "none"
    return merge_kwargs(request.chat_template_kwargs, extras)


def effective_chat_kwargs(request: ChatCompletionRequest, options: RenderOptions) -> dict[str, Any]:
    """What parsers and parse_context see: server defaults underneath the request's kwargs."""
    return merge_kwargs(options.default_chat_template_kwargs, request_chat_kwargs(request,
                                                                                options.reasoning_effort_map))


def _tool_choice_wire(tool_choice: Any) -> Any:
    if isinstance(tool_choice, ChatCompletionNamedToolChoiceParam):
        return {"function": {"name": tool_choice.function.name}, "type": tool_choice.type}
    return tool_choice


def _check_tool_choice(request: ChatCompletionRequest, options: RenderOptions) -> None:
    choice = request.tool_choice
    if options.tool_parser_cls is not None or choice in (None, "none"):
        return
    if choice == "auto" and not options.enable_auto_tool_choice:
        raise bad_request('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
    if choice != "auto":
        desc = (f'function "{choice.function.name}"' if isinstance(choice, ChatCompletionNamedToolChoiceParam)
                else f'"{choice}"')
        raise bad_request(f"tool_choice={desc} requires --tool-call-parser to be set")


def render_chat_ids(model: ModelInfo, options: RenderOptions, messages: list[dict[str, Any]], *,
                    tool_dicts: list[dict[str, Any]] | None, request_template: str | None,
                    chat_kwargs: dict[str, Any], budget: TokenBudget, with_offsets: bool = False,
                    tool_choice: Any = None, response_format: Any = None
                    ) -> tuple[list[int], list[list[int]] | None]:
    """Template + tokenization of a chat (shared by chat render and /tokenize).

    `tool_choice` and `response_format`: the request's (vLLM's ChatParams; tool_choice only when
    the request has tools), which only the kimi_k3 renderer reads."""
    # the kwargs vLLM hands to apply_chat_template: server defaults and tools underneath the request's
    template_kwargs = merge_kwargs(merge_kwargs(options.default_chat_template_kwargs,
                                                {"tools": tool_dicts, "tokenize": False}), chat_kwargs)
    requested_template = request_template or template_kwargs.get("chat_template")
    template_kwargs.pop("chat_template", None)
    template_tools = template_kwargs.pop("tools", None)  # the request's tools unless its kwargs override them
    template_kwargs.pop("tokenize", None)
    if model.renderer == "harmony":  # gpt-oss: /tokenize renders a chat as the chat route does
        from core.renderers import harmony

        effort = chat_kwargs.get("reasoning_effort")
        ids = harmony.render_chat_prompt(messages, tool_dicts, effort)
        return budget.check_tokens(ids, [] if with_offsets else None)
    if model.renderer == "mistral":  # mistral-common's encoder (core/renderers/mistral.py)
        from core.renderers import mistral

        build_conversation(messages, "string", model.name)  # vLLM's parse_chat_messages: validates contents
        mistral.parse_history_arguments(messages)
        ids = mistral.render_chat_prompt(
            model.tokenizer, messages, template_tools,  # type: ignore[arg-type]
            add_generation_prompt=bool(template_kwargs.get("add_generation_prompt")),
            continue_final_message=bool(template_kwargs.get("continue_final_message")),
            reasoning_effort=template_kwargs.get("reasoning_effort"))
        return budget.check_tokens(ids, None)  # mistral-common gives no offsets (vLLM answers null)
    if model.renderer == "kimi_k3":  # K3's XTML encoder, tokenized segment by segment (core/renderers/kimi_k3.py)
        from core.renderers import kimi_k3

        check_chat_size(model, messages, budget)
        conversation = build_conversation(messages, "string", model.name)  # also validates
        ids = kimi_k3.render_chat_prompt(model.tokenizer, conversation, template_tools, template_kwargs,
                                         tool_choice=tool_choice, response_format=response_format)
        return budget.check_tokens(ids, None)  # ids, not text: no offsets (vLLM answers null)
    if model.renderer != "hf":  # a Python prompt encoder instead of a template (core/renderers)
        from core.renderers import deepseek

        content_format = deepseek.CONTENT_FORMATS[model.renderer]
        conversation = build_conversation(messages, content_format or "openai", model.name)  # also validates
        if content_format is None:
            conversation = messages
        prompt = deepseek.render_prompt(model.renderer, conversation, template_tools, template_kwargs)
        return budget.encode(model.tokenizer, prompt, with_offsets)
    source = select_template(model.tokenizer.chat_template, requested_template, tool_dicts is not None)
    if source is None:
        raise VLLMValidationError("As of transformers v4.44, default chat template is no longer allowed, so you "
                                  "must provide a chat template if the tokenizer does not define one.")
    check_chat_size(model, messages, budget)
    if requested_template is not None and source is requested_template:  # the client's own template
        prompt = _render_request_template(model, options, source, messages, template_tools, template_kwargs)
    else:
        template = load_template(source)
        prompt = render(template, _conversation(model, template, messages), tools=template_tools,
                        kwargs=template_kwargs, special_tokens=model.tokenizer.special_tokens_map)
    return budget.encode(model.tokenizer, prompt, with_offsets)


def _conversation(model: ModelInfo, template: Any, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    conversation = build_conversation(messages, template.content_format, model.name)
    if not template.knows_developer_role and any(m["role"] == "developer" for m in conversation):
        conversation = developer_to_system(conversation)
    return conversation


UNBOUNDED_TEMPLATE_CHARS = 64 * 1024 * 1024  # a request template's budget without a max_model_len


def _render_request_template(model: ModelInfo, options: RenderOptions, source: str, messages: list[dict[str, Any]],
                             tools: Any, kwargs: dict[str, Any]) -> str:
    """A request's own template (--trust-request-chat-template): compiled and rendered under a
    budget (core.template_sandbox): no string longer than the longest prompt the model takes,
    at most --request-template-timeout seconds. Over budget is a 400."""
    seconds = options.request_template_timeout
    max_chars = (model.max_model_len * max_chars_per_token(model.tokenizer) if model.max_model_len
                 else UNBOUNDED_TEMPLATE_CHARS)
    budget = TemplateBudget(seconds=seconds, max_chars=max_chars)
    try:
        with bounded(budget):
            template = load_template(source, bounded=True)
            return render(template, _conversation(model, template, messages), tools=tools, kwargs=kwargs,
                          special_tokens=model.tokenizer.special_tokens_map, budget=budget)
    except TemplateBudgetExceeded as exc:  # (at compile time; render() maps those of the render)
        raise VLLMValidationError(str(exc)) from None
    except TemplateTimeout:
        raise VLLMValidationError(f"The chat template took longer than {seconds:g} seconds to render; a request's "
                                  "chat template may take at most that (--request-template-timeout).") from None


# see check_chat_size: how far past the context a chat must be to be refused before templating
EARLY_REFUSAL_FACTOR = 2
EARLY_REFUSAL_MIN_MESSAGES = 10_000
EARLY_REFUSAL_MIN_CHARS = 4_000_000


def check_message_count(count: int, max_model_len: int) -> None:
    """A chat with far more messages than the context holds tokens is a 400 (see check_chat_size).
    The front door also runs it on the raw body, before pydantic validates every message."""
    if count > max(EARLY_REFUSAL_FACTOR * max_model_len, EARLY_REFUSAL_MIN_MESSAGES):
        raise VLLMValidationError(
            f"This model's maximum context length is {max_model_len} tokens. However, your request has {count} "
            "messages, and every message takes at least one token. Please reduce the number of messages.",
            parameter="messages", value=count)


def precheck_messages(body: dict[str, Any], max_model_len: int) -> None:
    """`check_message_count` on a raw chat body: a flood of tiny messages costs pydantic more than
    everything else (0.4 s for 300k on the event loop), so it is refused before validation.
    Truncation (`truncate_prompt_tokens`) does not lift this bound: no template drops most messages."""
    messages = body.get("messages")
    if isinstance(messages, list):
        check_message_count(len(messages), max_model_len)


def check_chat_size(model: ModelInfo, messages: list[dict[str, Any]], budget: TokenBudget) -> None:
    """Bound the render's work by the request's size before rendering (the template's cost grows
    with the messages): a chat whose messages alone cannot fit the context is a 400 at once,
    not after seconds of templating. Every message renders to at least one token in any chat
    template (its role markers), and its text to at least one token per `max_chars_per_token`
    characters; without truncation, more than max_model_len of either cannot fit. (A template
    that drops whole messages could render such a chat shorter; vLLM would render it first.)

    The bounds are twice those limits, and never below a size whose templating costs milliseconds:
    a chat just past them renders and gets vLLM's own message (its prompt's length); only one far
    past them is refused here, before any templating."""
    limit = budget.max_model_len
    if limit is None:
        return
    check_message_count(len(messages), limit)
    if budget.truncate_prompt_tokens is not None:
        return  # the rendered text is truncated, not refused
    chars_limit = limit * max_chars_per_token(model.tokenizer)
    chars = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                text = part.get("text") if isinstance(part, dict) else part
                chars += len(text) if isinstance(text, str) else 0
    if chars > max(EARLY_REFUSAL_FACTOR * chars_limit, EARLY_REFUSAL_MIN_CHARS):
        raise VLLMValidationError(
            f"This model's maximum context length is {limit} tokens. However, your messages contain {chars} "
            f"characters (more than {chars_limit} characters, which is the upper bound for {limit} input "
            "tokens). Please reduce the length of the messages.", parameter="messages", value=chars)


def parser_context(model: ModelInfo, request: ChatCompletionRequest, chat_kwargs: dict[str, Any]) -> ParserContext:
    """What the parsers know of a chat request (its tools, effective template kwargs, history)."""
    tools = request.tools
    return ParserContext(tokenizer=model.tokenizer, tools=[t.to_template() for t in tools] if tools else None,
                         chat_template_kwargs=chat_kwargs, history_tool_call_count=request.history_tool_call_count())


def adjust_for_parsers(request: ChatCompletionRequest, options: RenderOptions, ctx: ParserContext
                       ) -> ChatCompletionRequest:
    """The parsers' render-side adjust_request (constraints, skip_special_tokens), reasoning parser
    first; vLLM runs it only when a reasoning parser is set or a tool may be called (or, for
    the mistral parser over a tokenizer with mistral-common's grammar, always)."""
    if options.reasoning_parser_cls is None and request.tool_choice == "none" and not (
            options.tool_parser_cls is not None and options.tool_parser_cls.always_adjusts(ctx)):
        return request
    if options.reasoning_parser_cls is not None:
        request = options.reasoning_parser_cls(ctx).adjust_request(request)
    if options.tool_parser_cls is not None:
        request = options.tool_parser_cls(ctx).adjust_request(request)
    return request


REUSED_IDS_PARAM = "kv_transfer_params.prompt_token_ids"


def reused_prompt_ids(model: ModelInfo, request: ChatCompletionRequest) -> list[int] | None:
    """vLLM 0.33's decode-side token reuse: `kv_transfer_params.prompt_token_ids` replaces rendering.

    The key is popped (it never reaches the output); it is ignored with `echo` or media content.
    """
    kv = request.kv_transfer_params
    if not isinstance(kv, dict):
        return None
    ids = kv.pop("prompt_token_ids", None)
    if ids is None or request.echo or has_non_text(request.messages):
        return None
    if not isinstance(ids, list) or not ids or any(type(x) is not int or x < 0 for x in ids):
        raise VLLMValidationError("`kv_transfer_params['prompt_token_ids']` must be a non-empty list of "
                                  "non-negative integers.", parameter=REUSED_IDS_PARAM)
    if max(ids) > model.max_token_id:
        raise VLLMValidationError(f"Token id {max(ids)} is out of vocabulary", parameter=REUSED_IDS_PARAM)
    return ids


def render_chat(model: ModelInfo, options: RenderOptions, request: ChatCompletionRequest,
                request_id_header: str | None = None) -> dict[str, Any]:
    """POST /v1/chat/completions/render: one GenerateRequest dict. Raises RequestError."""
    check_model(model, request.model)
    if request.use_beam_search:
        raise bad_request("Beam search is not supported by the render endpoint")
    check_choices(options, 1, request.n)
    if model.renderer == "harmony":
        return _render_chat_harmony(model, options, request, request_id_header)
    if model.renderer == "mistral":  # vLLM's request rewrite and checks for Mistral tokenizers
        from core.renderers import mistral

        mistral.prepare_messages(request.messages)
        mistral.validate_request(request.chat_template, request.chat_template_kwargs, request.reasoning_effort)
    else:  # a Mistral tokenizer parses tool calls without a tool parser (vLLM skips the check)
        _check_tool_choice(request, options)
    tools = request.tools
    tool_dicts = None if tools is None or (
        request.tool_choice == "none" and options.exclude_tools_when_tool_choice_none
    ) else [tool.to_template() for tool in tools]
    user_kwargs = request.chat_template_kwargs or {}
    if not options.trust_request_chat_template and (
            request.chat_template is not None or user_kwargs.get("chat_template") is not None):
        raise bad_request(UNTRUSTED_TEMPLATE)

    if request.max_completion_tokens is not None:
        max_output, max_output_param = request.max_completion_tokens, "max_completion_tokens"
    else:
        max_output, max_output_param = request.max_tokens, "max_tokens"
    budget = TokenBudget(model.max_model_len, max_output, request.truncate_prompt_tokens, request.truncation_side,
                         request.add_special_tokens, max_output_param)

    chat_kwargs = request_chat_kwargs(request, options.reasoning_effort_map)
    effective = merge_kwargs(options.default_chat_template_kwargs, chat_kwargs)
    reused = reused_prompt_ids(model, request)
    if reused is not None:  # decode-side reuse: the prefill stage's ids, no templating
        token_ids, offsets = reused, None
    else:
        token_ids, offsets = render_chat_ids(model, options, request.messages, tool_dicts=tool_dicts,
                                             request_template=request.chat_template, chat_kwargs=chat_kwargs,
                                             budget=budget, with_offsets=bool(request.return_token_offsets),
                                             tool_choice=request.tool_choice if tools else None,
                                             response_format=request.response_format)

    ctx = None
    if options.has_parser:
        ctx = parser_context(model, request, effective)
        request = adjust_for_parsers(request, options, ctx)

    if not token_ids:
        raise bad_request("No token_ids rendered")
    max_tokens = get_max_tokens(model.max_model_len, max_output, len(token_ids), model.sampling_defaults,
                                request.truncate_prompt_tokens)
    params = chat_sampling_params(request, max_tokens, model.sampling_defaults)
    kv, ec = hoist_transfer_params(params)

    reasoning_kwargs = None
    reasoning_ended: bool | None = None
    if options.reasoning_parser_cls is not None:
        reasoning_kwargs = {"chat_template_kwargs": effective}
    if not request.include_reasoning or request.grammar_from_parser:
        reasoning_ended = True
    elif options.reasoning_parser_cls is not None:
        assert ctx is not None
        reasoning_ended = bool(options.reasoning_parser_cls(ctx).is_reasoning_end(token_ids))

    parse_context = {
        "tools": None if tools is None else [t.to_template() for t in tools],  # [] stays [] (Messages API)
        "tool_choice": _tool_choice_wire(request.tool_choice),
        "parallel_tool_calls": request.parallel_tool_calls,
        "include_reasoning": request.include_reasoning,
        "chat_template_kwargs": effective,
        "history_tool_call_cnt": request.history_tool_call_count(),
    }
    return _generate_request(
        request_id=f"chatcmpl-{base_request_id(request_id_header, request.request_id)}",
        token_ids=token_ids, token_offsets=offsets, sampling_params=params, request=request, kv=kv, ec=ec,
        reasoning_ended=reasoning_ended, reasoning_parser_kwargs=reasoning_kwargs, parse_context=parse_context)


def _render_chat_harmony(model: ModelInfo, options: RenderOptions, request: ChatCompletionRequest,
                         request_id_header: str | None) -> dict[str, Any]:
    """gpt-oss (core/renderers/harmony.py), in vLLM's order: no tool_choice or template checks, the
    Harmony parser's request adjustment, then the prompt (or the prefill stage's reused ids)."""
    from core.renderers import harmony

    if options.has_parser:
        harmony.adjust_request(request, tool_parser=options.tool_parser_cls is not None)
    tools = request.tools
    tool_dicts = None if tools is None or (
        request.tool_choice == "none" and options.exclude_tools_when_tool_choice_none
    ) else [tool.to_template() for tool in tools]
    token_ids = reused_prompt_ids(model, request)
    if token_ids is None:
        effort = request.reasoning_effort
        effort = options.reasoning_effort_map.get(effort, effort) if effort is not None else None
        token_ids = harmony.render_chat_prompt(request.messages, tool_dicts, effort)
    max_output = request.max_completion_tokens if request.max_completion_tokens is not None else request.max_tokens
    max_tokens = get_max_tokens(model.max_model_len, max_output, len(token_ids), model.sampling_defaults,
                                request.truncate_prompt_tokens)
    params = chat_sampling_params(request, max_tokens, model.sampling_defaults)
    kv, ec = hoist_transfer_params(params)
    reasoning = options.reasoning_parser_cls is not None
    reasoning_ended = True if (not request.include_reasoning or reasoning) else None
    parse_context = {
        "tools": [t.to_template() for t in tools] if tools else None,
        "tool_choice": _tool_choice_wire(request.tool_choice),
        "parallel_tool_calls": request.parallel_tool_calls,
        "include_reasoning": request.include_reasoning,
        "chat_template_kwargs": {},  # vLLM parses Harmony output without template kwargs
        "history_tool_call_cnt": request.history_tool_call_count(),
    }
    return _generate_request(
        request_id=f"chatcmpl-{base_request_id(request_id_header, request.request_id)}",
        token_ids=token_ids, token_offsets=None, sampling_params=params, request=request, kv=kv, ec=ec,
        reasoning_ended=reasoning_ended,
        reasoning_parser_kwargs={"chat_template_kwargs": effective_chat_kwargs(request, options)} if reasoning else None,
        parse_context=parse_context)


# -- completions -------------------------------------------------------------------------


def _completion_prompts(request: CompletionRequest) -> list[str | list[int]]:
    prompt = request.prompt
    if prompt is None:
        return []
    if isinstance(prompt, str):
        return [prompt]
    if prompt and all(isinstance(p, int) for p in prompt):
        return [list(prompt)]  # type: ignore[arg-type]
    return list(prompt)  # type: ignore[arg-type]


FIM_RENDERERS = ("deepseek_v4", "deepseek_v41")  # renderer modes with a fill-in-the-middle completion prompt


def render_completion(model: ModelInfo, options: RenderOptions, request: CompletionRequest,
                      request_id_header: str | None = None) -> list[dict[str, Any]]:
    """POST /v1/completions/render: one GenerateRequest dict per prompt. Raises RequestError."""
    check_model(model, request.model)
    if request.use_beam_search:
        raise bad_request("Beam search is not supported by the render endpoint")
    if request.suffix is not None:
        if request.echo:
            raise bad_request("Echo is unsupported with suffix.", param="suffix")
        if request.prompt_embeds is not None:
            raise bad_request("suffix is not supported with prompt_embeds", param="suffix")
        if request.truncate_prompt_tokens is not None:
            raise bad_request("suffix is not supported with truncate_prompt_tokens", param="suffix")
        texts = isinstance(request.prompt, str) or (isinstance(request.prompt, list)
                                                    and all(isinstance(p, str) for p in request.prompt))
        if not texts:
            raise bad_request("suffix requires text prompt input for FIM completion rendering", param="suffix")
        if model.renderer not in FIM_RENDERERS:
            raise bad_request("suffix is only supported for models with FIM completion rendering", param="suffix")
    if request.echo and request.prompt_embeds is not None:
        raise bad_request("Echo is unsupported with prompt embeds.")
    if request.prompt_logprobs is not None and request.prompt_embeds is not None:
        raise bad_request("prompt_logprobs is not compatible with prompt embeds.")
    if request.prompt_embeds is not None:
        raise VLLMValidationError("You must set `--enable-prompt-embeds` to input `prompt_embeds`.",
                                  parameter="prompt_embeds")

    budget = TokenBudget(model.max_model_len, request.max_tokens or 0, request.truncate_prompt_tokens,
                         request.truncation_side, request.add_special_tokens)
    prompts = _completion_prompts(request)
    if request.suffix is not None:  # DeepSeek V4's fill-in-the-middle prompt (core/renderers/deepseek.py)
        from core.renderers.deepseek import fim_prompt

        prompts = [fim_prompt(p, request.suffix) for p in prompts]
    if not prompts:
        raise VLLMValidationError("You must pass at least one prompt", parameter="prompt")
    check_choices(options, len(prompts), request.n)
    encoded: list[tuple[list[int], list[list[int]] | None]] = []
    for prompt in prompts:
        if isinstance(prompt, str):
            encoded.append(budget.encode(model.tokenizer, prompt, bool(request.return_token_offsets)))
        else:
            encoded.append(budget.check_tokens(list(prompt)))

    base = f"cmpl-{base_request_id(request_id_header, request.request_id)}"
    out = []
    for i, (token_ids, offsets) in enumerate(encoded):
        if not token_ids:
            raise bad_request("No token_ids rendered")
        max_tokens = get_max_tokens(model.max_model_len, request.max_tokens, len(token_ids), model.sampling_defaults,
                                    request.truncate_prompt_tokens)
        params = completion_sampling_params(request, max_tokens, model.sampling_defaults)
        kv, ec = hoist_transfer_params(params)
        out.append(_generate_request(request_id=base if len(encoded) == 1 else f"{base}-{i}",
                                     token_ids=token_ids, token_offsets=offsets, sampling_params=params,
                                     request=request, kv=kv, ec=ec))
    return out


__all__ = ["RenderOptions", "RequestError", "render_chat", "render_completion", "request_size",
           "effective_chat_kwargs", "check_model", "base_request_id"]
