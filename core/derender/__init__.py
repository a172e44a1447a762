"""Derender: engine token ids -> every API's responses and streams, through one machine.

* `choice.ChoiceDerender`: the one per-choice machine (text, parsers, logprobs, finish rules,
  the max_tokens cap), emitting neutral `ChoiceEvent`s and building `ChoiceResult`s;
* `session.DerenderSession`: the choices of one front-door request (several prompts, n each),
  the engine's output checked, abort decisions;
* `adapters/`: the events and results in each API's shapes;
* `raw`: the raw `/derender` endpoint calls (docs/vllm-wire-spec.md §2.4, 2.5, 5), their state in `stream_state`
  (`state`: the codec; `checks`: pre-decode bounds);
* `spec.OutputSpec`: what one request asks; `settings.DerenderSettings`: the server's side, built
  once at start-up; `text`: stop tokens, detokenizer, stop strings.
"""

from core.derender.raw import derender_chat, derender_chat_stream, derender_completion, derender_completion_stream
from core.derender.settings import DerenderSettings

__all__ = ["DerenderSettings", "derender_chat", "derender_chat_stream", "derender_completion",
           "derender_completion_stream"]
