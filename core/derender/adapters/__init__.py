"""Output adapters: the one derender machine's events and results in each API's shapes.

Pure functions (and, for streams, small writers) of `core.derender.choice.ChoiceEvent` /
`ChoiceResult`; no rule about what a choice says lives here, only how an API writes it:

* `raw`: vLLM's derender endpoints (full dumps, the role inside the first delta);
* `chat`, `completion`: `vllm serve`'s chat.completion(.chunk) and text_completion shapes;
* `sse`: the stream writers the proxy's one SSE loop drives.
"""
