"""The store's contract and shared constants (the backends import this, not the package)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import Any

DEFAULT_TTL = 30 * 24 * 3600
DEFAULT_MAX_BYTES = 2 << 30
PURGE_BATCH = 100  # expired records removed per write


class StoreUnavailable(Exception):
    """The store could not be read or written (down, unreachable, disk error)."""


class ResponseStore(ABC):
    url: str

    @abstractmethod
    async def get(self, response_id: str) -> dict[str, Any] | None:
        """The record, or None when unknown, deleted or expired."""

    @abstractmethod
    async def put(self, record: dict[str, Any], *, if_status: Collection[str] | None = None) -> bool:
        """Write the record (insert or replace). With `if_status`, only when a stored record exists
        whose status is one of those (a compare-and-set); returns whether it was written."""

    @abstractmethod
    async def delete(self, response_id: str) -> bool:
        """Remove the record; whether there was one."""

    @abstractmethod
    async def close(self) -> None:
        ...
