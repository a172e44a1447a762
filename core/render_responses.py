"""Render a Responses request: `POST /v1/responses/render` exactly as vLLM 0.33's render server.

A Responses request is rendered as the chat conversation it stands for. `render_responses`
turns it into that conversation (instructions, optional earlier items, then the input items),
templates and tokenizes it with the chat render's own functions, runs the parsers'
`adjust_request` on the chat-equivalent request, and builds the `GenerateRequest` dict vLLM's
`ServingRender.render_responses_request` writes. It also returns that chat-equivalent request
(`ResponsesRender.chat`): the front door derenders the engine's output with it, through the same
per-choice machines as chat completions.

Checks run in vLLM's order, so a request that breaks several rules gets vLLM's first complaint:

    model -> [ours: unsupported tool / tool_choice types] -> trusted template -> items to messages
    -> per-request mm kwargs -> token budget -> template + tokenization + length -> parser
    adjust_request -> max_tokens -> sampling params

`previous_response_id` is refused by the render route (vLLM's render server is stateless), not
here: the front door passes the stored response's items as `prior_items` instead.

A gpt-oss model (`renderer == "harmony"`) is rendered as vLLM renders it, with its own Harmony
conversation (`core/renderers/harmony_responses.py`, `_render_harmony`); a continuation passes
the stored Harmony messages (`HarmonyHistory`) instead of items, and its output is built by
`core/derender/adapters/harmony_responses.py`.

Where we answer differently from vLLM 0.33 (each a 500 or a silent acceptance there):

* tools other than `function`, `custom` and `namespace` (web_search, file_search, computer_use,
  mcp, code_interpreter, ...): vLLM drops them without a word (the model never sees them); we
  answer 400 `param: "tools[i].type"` naming the supported types. So do a custom tool inside a
  namespace (vLLM drops it too) and a tool_choice naming a built-in tool type or `allowed_tools`
  (vLLM ignores the restriction).
* an assistant output message whose first part is a refusal, or whose content is empty: vLLM
  answers 500 (`content[0].text`); we render the refusal text, or empty content.

Output side, for the front door (vLLM 0.33, `vllm/entrypoints/openai/responses/`):

* Request handling (`serving.py` `_create_responses`): model check, then `background` without a
  store is a 400 (param background), then the template check; `previous_response_id` with the
  store off (vLLM's default) or unknown is a 404 `Response with id '<id>' not found.`
  (`invalid_request_error`, param `response_id`). A prompt of max_model_len tokens or more is a
  400 `The engine prompt length <n> exceeds the max_model_len <m>. Please reduce prompt.` (param
  input), checked before max_tokens (`_validate_generator_input`). The engine request id is
  `<request_id>_<turn>` (`_0` for a plain answer), `reasoning_ended` is True when the parser's
  grammar covers the reasoning (`grammar_from_parser`) else None, `reasoning_parser_kwargs` only
  with a reasoning parser. X-Request-Id is not used: the id is the body's `request_id`.

* Non-streaming (`serving.py` `responses_full_generator`, `_make_response_output_items`,
  `utils.py` `build_response_output_items`, `protocol.py` `ResponsesResponse.from_request`): the
  parser splits the output into reasoning, content and tool calls (`Parser.parse`, tool calls
  only with tool_choice auto / required / named, none under "none"; `include_reasoning: false`
  drops the reasoning and the logprobs; `parallel_tool_calls: false` keeps the first call). Output
  items in this order: one `reasoning` item (`id` `rs_<16 hex>`, `summary: []`,
  `content: [{"type": "reasoning_text", "text"}]`, `status: null`) when there is reasoning text;
  one `message` item (`msg_<16 hex>`, role assistant, one `output_text` part with
  `annotations: []` and `logprobs` (a list when requested, else null), `status` "completed" when
  tool calls follow, else "incomplete" on finish_reason length, else "completed") when the
  content is non-empty; one `function_call` item per call (`fc_<16 hex>`, `call_id` = the
  parser's id, else `chatcmpl-tool-<16 hex>` (`make_tool_call_id`), `name` and `namespace` split
  back from `<namespace>__<name>`, `arguments`, `status` "incomplete" only for the last call of
  a length-cut output) or a `custom_tool_call` (`ctc_`, `input` decoded from the shim's
  `{"input": ...}`). Without any parser: a single message item whose content is `[]` when the
  text is empty. `status` "incomplete" with `incomplete_details: {"reason": "max_output_tokens"}`
  when finish_reason is length, else "completed". `id` = the request id (`resp_...`),
  `created_at`, `object: "response"`, `model`, and the echoed request fields: instructions,
  metadata, parallel_tool_calls, temperature / top_p / presence_penalty / frequency_penalty
  (from the sampling params, so the generation-config defaults show), tool_choice, tools,
  background, max_output_tokens (= sampling max_tokens), max_tool_calls, previous_response_id,
  prompt, prompt_cache_key / _options / _retention, reasoning, service_tier, safety_identifier,
  text, top_logprobs (= sampling logprobs: null unless logprobs were included), truncation, user.
  `usage`: input_tokens, output_tokens, total_tokens, `input_tokens_details: {cached_tokens,
  cache_write_tokens, input_tokens_per_turn: [], cached_tokens_per_turn: []}`,
  `output_tokens_details: {reasoning_tokens (the parser's count_reasoning_tokens),
  tool_output_tokens: 0, output_tokens_per_turn: [], tool_output_tokens_per_turn: []}`.
* Streaming (`serving.py` `responses_stream_generator`, `_process_simple_streaming_events`;
  `streaming_events.py` `SimpleStreamingEventProcessor`, `split_delta`, `emit_simple_*`):
  `sequence_number` counts every event from 0. `response.created` then `response.in_progress`
  (both carry the response with `status: "in_progress"`, `output: []`, `usage: null`). Each
  parser delta is split into reasoning, then content, then tool calls grouped by index; each piece
  goes to a state (TOOL_CALL over REASONING over CONTENT; empty content is skipped); a change of
  state, or a tool call with a new index, closes the open item and opens the next one at
  `output_index` + 1. Reasoning: `output_item.added` (reasoning item, status in_progress,
  `summary: []`), `content_part.added` (`{"text": "", "type": "reasoning_text"}`),
  `reasoning_text.delta`..., then `reasoning_text.done`, `content_part.done`,
  `output_item.done` (status completed). Content: `output_item.added` (message, content [],
  in_progress), `content_part.added` (output_text "", `logprobs: []`), `output_text.delta` (with
  `logprobs: [...]`, `[]` when not requested)..., then `output_text.done` (`logprobs: []`),
  `content_part.done` (the full part, logprobs or null), `output_item.done`. Tool call:
  `output_item.added` (function_call, `arguments: ""`, in_progress, `call_id` from the parser
  or `make_tool_call_id()`), `function_call_arguments.delta`..., then
  `function_call_arguments.done` (with `name`), `output_item.done`. The last open item closes
  with status "incomplete" when finish_reason is length. Then `response.completed`, or
  `response.incomplete` when the final status is incomplete, carrying the full response whose
  `output` is the items already streamed (same ids). Generation errors become an `error` event.
  The SSE framing is `event: <type>\ndata: <json>\n\n` with no `data: [DONE]`.
  Recorded examples (vLLM 0.32's coupled server, whose few differences from 0.33 are listed in
  the files): tests/fixtures/oracle/serve_responses_{nonstream,stream}.json; the stream rules are
  `check_event_stream` in tests/proxy/test_responses_render_serve_fixtures.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from openai.types.responses import (
    FunctionTool,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseReasoningItem,
)
from pydantic import BaseModel, ValidationError

from core.errors import RequestError, bad_request
from core.model import ModelInfo
from core.protocol.chat import ChatCompletionRequest
from core.protocol.construct import construct
from core.protocol.common import (
    ChatCompletionNamedToolChoiceParam,
    ChatCompletionToolsParam,
    FunctionDefinition,
    VLLMValidationError,
)
from core.protocol.responses import NAMESPACE_SEPARATOR, ResponsesRequest
from core.render import (
    UNTRUSTED_TEMPLATE,
    RenderOptions,
    TokenBudget,
    adjust_for_parsers,
    check_model,
    effective_chat_kwargs,
    parser_context,
    render_chat_ids,
    request_chat_kwargs,
    reused_prompt_ids,
)
from core.sampling import (
    DEFAULT_KNOBS,
    OUTPUT_KIND_DELTA,
    OUTPUT_KIND_FINAL_ONLY,
    build_sampling_params,
    get_max_tokens,
    hoist_transfer_params,
)

SUPPORTED_TOOL_TYPES = ("function", "custom", "namespace")
# the function a custom (free-form text) tool is shown to the model as: one string argument
CUSTOM_TOOL_INPUT_KEY = "input"
CUSTOM_TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {CUSTOM_TOOL_INPUT_KEY: {"type": "string",
                                           "description": "The freeform text payload for this tool."}},
    "required": [CUSTOM_TOOL_INPUT_KEY],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ToolNames:
    """How the model's flat function names map back to Responses tools (for output items)."""

    # flat `<namespace>__<name>` -> (namespace, name)
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    # names of custom (free-form) tools: their calls are `custom_tool_call` items
    custom: frozenset[str] = frozenset()

    def resolve(self, flat_name: str) -> tuple[str | None, str]:
        """(namespace or None, name) of a called function."""
        return self.namespaced.get(flat_name, (None, flat_name))


@dataclass
class ResponsesRender:
    """What rendering a Responses request yields."""

    # vLLM's GenerateRequest, as JSON-ready dict (the render route's whole answer)
    generate_request: dict[str, Any]
    # the chat-equivalent request after the parsers' adjust_request: messages (the conversation
    # rendered), tools (function tools, namespaces flattened, custom tools as their shim),
    # tool_choice (chat form), parallel_tool_calls, include_reasoning, structured_outputs,
    # logprobs / top_logprobs, skip_special_tokens, grammar_from_parser
    chat: ChatCompletionRequest
    # the chat template kwargs parsers see (server defaults under the request's)
    chat_template_kwargs: dict[str, Any]
    tool_names: ToolNames
    # gpt-oss: every Harmony message of the prompt (openai_harmony Messages), for the store
    harmony_messages: list[Any] | None = None


# -- tools -------------------------------------------------------------------------------


def _unsupported(message: str, param: str) -> RequestError:
    return RequestError(message, 400, "invalid_request_error", param)


def check_supported_tools(request: ResponsesRequest) -> None:
    """Our 400 for tools and tool choices the model cannot be shown (vLLM drops them silently)."""
    supported = ", ".join(SUPPORTED_TOOL_TYPES)
    for i, tool in enumerate(request.tools):
        if tool.type not in SUPPORTED_TOOL_TYPES:
            raise _unsupported(f"Tool type '{tool.type}' is not supported: this server runs no built-in tools. "
                               f"Supported tool types: {supported}.", f"tools[{i}].type")
        if tool.type == "namespace":
            for j, member in enumerate(tool.tools):
                if member.type != "function":
                    raise _unsupported(f"Tool type '{member.type}' is not supported inside a namespace. Supported "
                                       "tool types in a namespace: function.", f"tools[{i}].tools[{j}].type")
    choice = request.tool_choice
    if not isinstance(choice, str) and choice.type not in ("function", "custom"):
        raise _unsupported(f"tool_choice of type '{choice.type}' is not supported. Supported: \"none\", \"auto\", "
                           "\"required\", or a function or custom tool by name.", "tool_choice")


def function_tools(request: ResponsesRequest) -> tuple[list[ChatCompletionToolsParam], ToolNames]:
    """The tools as the model sees them: chat function tools, in request order (vLLM's get_function_tools)."""
    tools: list[ChatCompletionToolsParam] = []
    namespaced: dict[str, tuple[str, str]] = {}
    custom: set[str] = set()
    for tool in request.tools:
        if tool.type == "function":
            tools.append(_chat_tool(tool.name, tool.description, tool.parameters, tool.strict, tool.defer_loading))
        elif tool.type == "custom":
            custom.add(tool.name)
            tools.append(_chat_tool(tool.name, tool.description, CUSTOM_TOOL_PARAMETERS, None, None))
        elif tool.type == "namespace":
            for member in tool.tools:
                flat = f"{tool.name}{NAMESPACE_SEPARATOR}{member.name}"
                if member.parameters is not None and not isinstance(member.parameters, dict):
                    _check_namespace_function(member, flat)
                namespaced[flat] = (tool.name, member.name)
                tools.append(_chat_tool(flat, member.description, member.parameters,  # type: ignore[arg-type]
                                        member.strict, member.defer_loading))
    return tools, ToolNames(namespaced, frozenset(custom))


def _check_namespace_function(member: Any, flat_name: str) -> None:
    """vLLM validates a namespace function as a FunctionTool (whose parameters must be an object)
    and answers that pydantic error's text as a 400."""
    try:
        FunctionTool.model_validate({**member.model_dump(by_alias=True), "name": flat_name})
    except ValidationError as exc:
        raise RequestError(str(exc)) from None


def _chat_tool(name: str, description: str | None, parameters: dict[str, Any] | None, strict: bool | None,
               defer_loading: bool | None) -> ChatCompletionToolsParam:
    function = construct(FunctionDefinition, name=name, description=description, parameters=parameters,
                         strict=strict, defer_loading=defer_loading)
    return construct(ChatCompletionToolsParam, type="function", function=function, defer_loading=None)


def _chat_tool_choice(request: ResponsesRequest) -> Any:
    choice = request.tool_choice
    if isinstance(choice, str):
        return choice
    return ChatCompletionNamedToolChoiceParam.model_validate({"type": "function", "function": {"name": choice.name}})


# -- items -> chat messages --------------------------------------------------------------


def continues_final_message(items: str | list[Any]) -> bool:
    """A last item that is an unfinished assistant message or reasoning is continued, not answered."""
    if isinstance(items, str) or not items:
        return False
    last = items[-1]
    if isinstance(last, (ResponseOutputMessage, ResponseReasoningItem)):
        return last.status in ("in_progress", "incomplete")
    if isinstance(last, dict):
        return last.get("type", "message") in ("message", "reasoning") and last.get("status") in (
            "in_progress", "incomplete")
    return False


def conversation(request: ResponsesRequest, prior_items: list[Any] | None = None) -> list[dict[str, Any]]:
    """The chat messages a Responses request stands for: instructions, earlier items, then the input.

    `prior_items`: the validated items (`core.protocol.responses.validate_items`) of a stored
    previous response, its input then its output, for `previous_response_id`. They go through
    the same conversion as the input, so an earlier tool call and its reasoning stay with their
    assistant turn (vLLM's own store replays only the previous output's message text).
    """
    messages: list[dict[str, Any]] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    items = list(prior_items or [])
    if isinstance(request.input, str):
        messages.extend(items_to_messages(items))
        messages.append({"role": "user", "content": request.input})
    else:
        messages.extend(items_to_messages([*items, *request.input]))
    return messages


def items_to_messages(items: list[Any]) -> list[dict[str, Any]]:
    """Response items -> chat messages; an assistant turn's reasoning, text and calls merge into one."""
    messages: list[dict[str, Any]] = []
    for item in items:
        message = _item_message(item, messages[-1] if messages else None)
        if message is not None:
            messages.append(message)
    return messages


def _item_type(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else getattr(item, "type", None)


def _item_dict(item: Any) -> dict[str, Any]:
    return item if isinstance(item, dict) else item.model_dump()


def _item_tool_call(item: Any) -> dict[str, Any] | None:
    if isinstance(item, ResponseFunctionToolCall):
        name = f"{item.namespace}{NAMESPACE_SEPARATOR}{item.name}" if item.namespace else item.name
        return {"id": item.call_id, "function": {"name": name, "arguments": item.arguments}, "type": "function"}
    if _item_type(item) == "custom_tool_call":
        call = _item_dict(item)
        arguments = json.dumps({CUSTOM_TOOL_INPUT_KEY: call.get("input") or ""}, ensure_ascii=False)
        return {"id": call["call_id"], "function": {"name": call["name"], "arguments": arguments}, "type": "function"}
    return None


def _output_message_text(item: ResponseOutputMessage) -> str:
    if not item.content:
        return ""  # vLLM: IndexError, a 500
    part = item.content[0]
    return part.refusal if part.type == "refusal" else part.text  # vLLM: refusal -> AttributeError, a 500


def _item_message(item: Any, previous: dict[str, Any] | None) -> dict[str, Any] | None:
    """One item as a new message, or None when it was merged into the previous assistant message."""
    assistant = previous if previous is not None and previous.get("role") == "assistant" else None
    tool_call = _item_tool_call(item)
    if tool_call is not None:
        if assistant is not None:
            calls = assistant.get("tool_calls")
            if calls is None:
                assistant["tool_calls"] = [tool_call]
                return None
            if isinstance(calls, list):
                calls.append(tool_call)
                return None
        return {"role": "assistant", "tool_calls": [tool_call]}
    if isinstance(item, ResponseReasoningItem):
        if item.encrypted_content:
            raise VLLMValidationError("Encrypted content is not supported.", parameter="input")
        if item.content:
            reasoning = item.content[0].text
        elif item.summary:
            reasoning = item.summary[0].text
        else:
            reasoning = ""
        if assistant is not None and assistant.get("reasoning") is None:
            assistant["reasoning"] = reasoning
            return None
        return {"role": "assistant", "reasoning": reasoning}
    if isinstance(item, ResponseOutputMessage):
        text = _output_message_text(item)
        if assistant is not None and assistant.get("content") is None:
            assistant["content"] = text
            return None
        return {"role": "assistant", "content": text}
    item_type = _item_type(item)
    if item_type in ("function_call_output", "custom_tool_call_output"):
        output = _item_dict(item)
        return {"role": "tool", "content": output.get("output"), "tool_call_id": output.get("call_id")}
    if isinstance(item, dict) and item.get("role") == "assistant":
        content = item.get("content")
        text = content if isinstance(content, str) else (
            content[0].get("text") if isinstance(content, list) and content and isinstance(content[0], dict)
            else None)
        if text is not None:
            if assistant is not None and assistant.get("content") is None:
                assistant["content"] = text
                return None
            return {"role": "assistant", "content": text}
    if isinstance(item, dict) and "role" in item:
        return dict(item)  # a copy: a later call or reasoning item may be merged into it
    raise VLLMValidationError(f"Unsupported input item type: {item_type}", parameter="input")


# -- render ------------------------------------------------------------------------------


def _check_mm_kwargs(request: ResponsesRequest) -> None:
    """vLLM refuses per-request multimodal kwargs unless started with --trust-request-mm-kwargs."""
    if request.mm_processor_kwargs:
        raise VLLMValidationError(
            "Per-request mm_processor_kwargs are disabled by default because they can change multimodal "
            "preprocessing resource usage. Start the server with --trust-request-mm-kwargs only when clients "
            "are trusted.", parameter="mm_processor_kwargs")
    if request.media_io_kwargs:
        raise VLLMValidationError(
            "Per-request media_io_kwargs are disabled by default because they can change multimodal media "
            "loading resource usage. Start the server with --trust-request-mm-kwargs only when clients are "
            "trusted.", parameter="media_io_kwargs")


def chat_equivalent(request: ResponsesRequest, messages: list[dict[str, Any]],
                    tools: list[ChatCompletionToolsParam], continue_final: bool) -> ChatCompletionRequest:
    """The ChatCompletionRequest a Responses request renders and parses as (not validated again:
    every field comes from an already validated request)."""
    effort = request.reasoning.effort if request.reasoning is not None else None
    return construct(
        ChatCompletionRequest, messages=messages, model=request.model, tools=tools or None,
        tool_choice=_chat_tool_choice(request),
        parallel_tool_calls=request.parallel_tool_calls, include_reasoning=request.include_reasoning,
        reasoning_effort=effort, chat_template_kwargs=request.chat_template_kwargs,
        add_generation_prompt=not continue_final, continue_final_message=continue_final,
        logprobs=request.include_output_logprobs, top_logprobs=request.top_logprobs,
        max_tokens=request.max_output_tokens, temperature=request.temperature, top_p=request.top_p,
        top_k=request.top_k, min_p=request.min_p, presence_penalty=request.presence_penalty,
        frequency_penalty=request.frequency_penalty, repetition_penalty=request.repetition_penalty,
        seed=request.seed, stop=request.stop, stop_token_ids=request.stop_token_ids, ignore_eos=request.ignore_eos,
        skip_special_tokens=request.skip_special_tokens,
        spaces_between_special_tokens=request.spaces_between_special_tokens,
        include_stop_str_in_output=request.include_stop_str_in_output, logit_bias=request.logit_bias,
        stream=request.stream, cache_salt=request.cache_salt, priority=request.priority,
        kv_transfer_params=request.kv_transfer_params, ec_transfer_params=request.ec_transfer_params,
        vllm_xargs=request.vllm_xargs, request_id=request.request_id)


@dataclass(frozen=True)
class HarmonyHistory:
    """A stored gpt-oss response a continuation replays (vLLM's msg_store): every Harmony message
    of its prompt and output, and its output items (where function_call_output finds call names)."""

    messages: list[Any]
    output_items: list[Any]


def check_harmony_request(request: ResponsesRequest) -> None:
    """vLLM's front-door checks of a gpt-oss Responses request (`_validate_create_responses_input`)."""
    if request.include_output_logprobs:
        raise RequestError("logprobs are not supported with gpt-oss models", 400, "invalid_request_error", "logprobs")
    if request.previous_input_messages and request.previous_response_id:
        raise RequestError("Only one of `previous_input_messages` and `previous_response_id` can be set.", 400,
                           "invalid_request_error", "previous_response_id")


def render_responses(model: ModelInfo, options: RenderOptions, request: ResponsesRequest, *,
                     request_id: str | None = None, prior_items: list[Any] | None = None,
                     harmony_history: HarmonyHistory | None = None) -> ResponsesRender:
    """A Responses request -> vLLM 0.33's GenerateRequest and the chat-equivalent request.

    `request_id`: the engine request id (default: the request's own `request_id`, `resp_<16 hex>`
    unless the client set it). `prior_items`: validated items of a stored previous response
    (see `conversation`); for gpt-oss, `harmony_history` instead. Synchronous CPU work; raises
    RequestError.
    """
    check_model(model, request.model)
    check_supported_tools(request)
    if model.renderer == "harmony":
        return _render_harmony(model, options, request, request_id, harmony_history)
    user_kwargs = request.chat_template_kwargs or {}
    if not options.trust_request_chat_template and user_kwargs.get("chat_template") is not None:
        raise bad_request(UNTRUSTED_TEMPLATE)
    tools, tool_names = function_tools(request)
    tool_dicts = None if not request.tools or (
        request.tool_choice == "none" and options.exclude_tools_when_tool_choice_none
    ) else [tool.to_template() for tool in tools]
    messages = conversation(request, prior_items)
    continue_final = continues_final_message(request.input)
    chat = chat_equivalent(request, messages, tools, continue_final)
    _check_mm_kwargs(request)
    truncate = -1 if request.truncation != "disabled" else None
    budget = TokenBudget(model.max_model_len, request.max_output_tokens, truncate, None, True, "max_output_tokens")

    chat_kwargs = request_chat_kwargs(chat, options.reasoning_effort_map)
    effective = effective_chat_kwargs(chat, options)
    reused = reused_prompt_ids(model, chat)
    if reused is not None:  # decode-side reuse: the prefill stage's ids, no templating
        token_ids = reused
    else:
        token_ids, _ = render_chat_ids(model, options, messages, tool_dicts=tool_dicts, request_template=None,
                                       chat_kwargs=chat_kwargs, budget=budget,
                                       tool_choice=chat.tool_choice if request.tools else None)

    chat.structured_outputs = request.extract_structured_outputs()
    if options.has_parser:
        ctx = replace(parser_context(model, chat, effective), responses_api=True)
        chat = adjust_for_parsers(chat, options, ctx)

    if not token_ids:
        raise bad_request("No token_ids rendered")
    max_tokens = get_max_tokens(model.max_model_len, request.max_output_tokens, len(token_ids),
                                model.sampling_defaults, truncate)
    params = responses_sampling_params(request, chat, max_tokens, model.sampling_defaults)
    generate_request = _generate_request(request, request_id, token_ids, params, effective, options)
    return ResponsesRender(generate_request=generate_request, chat=chat, chat_template_kwargs=effective,
                           tool_names=tool_names)


def _generate_request(request: ResponsesRequest, request_id: str | None, token_ids: list[int],
                      params: dict[str, Any], effective: dict[str, Any], options: RenderOptions) -> dict[str, Any]:
    """The GenerateRequest dict vLLM's render_responses_request writes."""
    kv, ec = hoist_transfer_params(params)
    return {
        "request_id": request.request_id if request_id is None else request_id,
        "token_ids": token_ids,
        "token_offsets": None,
        "features": None,
        "content_parts": None,
        "sampling_params": params,
        "model": request.model,
        "reasoning_ended": None,
        "reasoning_parser_kwargs": ({"chat_template_kwargs": effective}
                                    if options.reasoning_parser_cls is not None else None),
        "return_token_ids": None,
        "output_mode": "tokens",
        "parse_context": None,
        "stream": bool(request.stream),
        "stream_options": None,
        "cache_salt": request.cache_salt,
        "priority": request.priority,
        "kv_transfer_params": kv,
        "ec_transfer_params": ec,
    }


def _render_harmony(model: ModelInfo, options: RenderOptions, request: ResponsesRequest, request_id: str | None,
                    history: HarmonyHistory | None) -> ResponsesRender:
    """gpt-oss (core/renderers/harmony_responses.py), in vLLM's order: template check, the Harmony
    parser's request adjustment, the conversation, then the token budget."""
    from core.renderers import harmony, harmony_responses

    user_kwargs = request.chat_template_kwargs or {}
    if not options.trust_request_chat_template and user_kwargs.get("chat_template") is not None:
        raise bad_request(UNTRUSTED_TEMPLATE)
    tools, tool_names = function_tools(request)
    chat = chat_equivalent(request, [], tools, continues_final_message(request.input))
    structured = chat.structured_outputs = request.extract_structured_outputs()
    if options.has_parser:
        harmony.adjust_request(chat, tool_parser=options.tool_parser_cls is not None)
        if structured is not None and harmony.output_format(structured) is not None:
            request.text = None  # vLLM's adjustment clears it too: the response echoes "text": null
    effort = request.reasoning.effort if request.reasoning is not None else None
    effort = options.reasoning_effort_map.get(effort, effort) if effort is not None else None
    messages = harmony_responses.conversation(request, effort, None if history is None else history.messages,
                                              [] if history is None else history.output_items)
    truncate = -1 if request.truncation != "disabled" else None
    budget = TokenBudget(model.max_model_len, request.max_output_tokens, truncate, None, True, "max_output_tokens")
    try:
        token_ids = harmony.render_ids(messages)
    except Exception as exc:  # openai-harmony's HarmonyError / ValueError on text it cannot render
        raise bad_request(str(exc)) from None
    token_ids, _ = budget.check_tokens(token_ids)
    if not token_ids:
        raise bad_request("No token_ids rendered")
    effective = effective_chat_kwargs(chat, options)
    max_tokens = get_max_tokens(model.max_model_len, request.max_output_tokens, len(token_ids),
                                model.sampling_defaults, truncate)
    params = responses_sampling_params(request, chat, max_tokens, model.sampling_defaults)
    generate_request = _generate_request(request, request_id, token_ids, params, effective, options)
    return ResponsesRender(generate_request=generate_request, chat=chat, chat_template_kwargs=effective,
                           tool_names=tool_names, harmony_messages=messages)


def responses_sampling_params(request: ResponsesRequest, chat: ChatCompletionRequest, max_tokens: int,
                              defaults: dict[str, Any]) -> dict[str, Any]:
    """ResponsesRequest.to_sampling_params as JSON; `chat` carries what the parsers adjusted
    (structured outputs, skip_special_tokens, spaces_between_special_tokens)."""
    knobs = {name: value if (value := getattr(request, name)) is not None else defaults.get(name, default)
             for name, default in DEFAULT_KNOBS.items()}
    skip_special = chat.skip_special_tokens
    if skip_special is None:
        skip_special = defaults.get("skip_special_tokens", True)
    extra_args: dict[str, Any] = dict(request.vllm_xargs) if request.vllm_xargs else {}
    if request.kv_transfer_params:
        extra_args["kv_transfer_params"] = request.kv_transfer_params
    if request.ec_transfer_params:
        extra_args["ec_transfer_params"] = request.ec_transfer_params
    structured = chat.structured_outputs
    return build_sampling_params(
        n=1, knobs=knobs, watermarking=request.watermarking, seed=request.seed, stop=request.stop,
        stop_token_ids=request.stop_token_ids, bad_words=None, thinking_token_budget=None,
        include_stop_str_in_output=request.include_stop_str_in_output, ignore_eos=request.ignore_eos,
        max_tokens=max_tokens, min_tokens=0,
        logprobs=request.top_logprobs if request.include_output_logprobs else None, prompt_logprobs=None,
        logprob_token_ids=None, skip_special_tokens=skip_special,
        spaces_between_special_tokens=chat.spaces_between_special_tokens,
        output_kind=OUTPUT_KIND_DELTA if request.stream else OUTPUT_KIND_FINAL_ONLY, stream_interval=None,
        structured_outputs=None if structured is None else structured.as_wire(), logit_bias=request.logit_bias,
        allowed_token_ids=None, extra_args=extra_args, repetition_detection=None, routed_experts_prompt_start=0)


def dump_item(item: Any) -> Any:
    """A validated item as JSON-ready data (for a store)."""
    return item.model_dump(mode="json", by_alias=True, exclude_none=False) if isinstance(item, BaseModel) else item




def request_size(request: ResponsesRequest) -> int:
    """A cheap estimate of the text to render, to decide inline vs thread pool (as core.render's)."""
    size = len(request.instructions or "") + 256 * len(request.tools)
    if isinstance(request.input, str):
        return size + len(request.input)
    for item in request.input:
        size += 64
        content = item.get("content") if isinstance(item, dict) else getattr(item, "content", None)
        if isinstance(content, str):
            size += len(content)
        elif isinstance(content, list):
            for part in content:
                text = part.get("text") if isinstance(part, dict) else getattr(part, "text", None)
                size += len(text) if isinstance(text, str) else 0
        elif isinstance(item, dict) and isinstance(item.get("output"), str):
            size += len(item["output"])
        elif isinstance(item, ResponseFunctionToolCall):
            size += len(item.arguments)
    return size


__all__ = ["ResponsesRender", "ToolNames", "HarmonyHistory", "check_harmony_request", "render_responses", "conversation", "items_to_messages",
           "check_supported_tools", "function_tools", "dump_item", "request_size"]
