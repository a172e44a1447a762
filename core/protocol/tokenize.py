"""vLLM's /tokenize and /detokenize request bodies (a completion-style or a chat-style tokenize)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from core.protocol.common import ChatCompletionToolsParam, OpenAIBaseModel, VLLMValidationError
from core.protocol.chat import ChatMessage


class TokenizeCompletionRequest(OpenAIBaseModel):
    model: str | None = None
    prompt: str
    add_special_tokens: bool = True
    return_token_strs: bool | None = False


class TokenizeChatRequest(OpenAIBaseModel):
    model: str | None = None
    messages: list[ChatMessage]
    add_generation_prompt: bool = True
    return_token_strs: bool | None = False
    continue_final_message: bool = False
    add_special_tokens: bool = False
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    media_io_kwargs: dict[str, dict[str, Any]] | None = None
    mm_processor_kwargs: dict[str, Any] | None = None
    tools: list[ChatCompletionToolsParam] | None = None

    @model_validator(mode="before")
    @classmethod
    def _check_generation_prompt(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("continue_final_message") and data.get("add_generation_prompt"):
            raise VLLMValidationError(
                "Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
        return data


class DetokenizeRequest(OpenAIBaseModel):
    model: str | None = None
    tokens: list[Annotated[int, Field(ge=0, le=2**63 - 1)]]
