"""One module per parser family; core/parsers/registry.py lists them by vLLM's names."""
