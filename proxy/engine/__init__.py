"""The engine tier: HTTP client, SSE decoding and the pool of tokens-only engines."""
