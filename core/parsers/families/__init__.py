"""One module per parser family; importing this package registers them all."""

from core.parsers.families import hermes, think  # noqa: F401
