"""Derender: engine token ids -> OpenAI chat / completion responses and stream chunks.

* `nonstream.derender_chat` / `derender_completion`: whole responses (spec 2.4, 2.5);
* `stream.ChatStreamDerenderer` / `CompletionStreamDerenderer`: per-choice streaming state
  machines, usable in-process (front door) or through `stream_state` (raw endpoints);
* `stream.derender_chat_stream` / `derender_completion_stream`: the raw streaming calls;
* `state`: the `stream_state` codec; `checks`: pre-decode bounds; `output`: response dicts.
"""

from core.derender.nonstream import derender_chat, derender_completion
from core.derender.settings import DerenderSettings
from core.derender.stream import (ChatStreamDerenderer, CompletionStreamDerenderer, derender_chat_stream,
                                  derender_completion_stream)

__all__ = ["ChatStreamDerenderer", "CompletionStreamDerenderer", "DerenderSettings", "derender_chat",
           "derender_chat_stream", "derender_completion", "derender_completion_stream"]
