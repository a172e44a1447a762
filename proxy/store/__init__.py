"""The Responses API's store: stored responses for `previous_response_id`, GET, DELETE and
background mode, shared by every worker and replica that points at the same store.

vLLM keeps stored responses in a process-local dict that is never freed; ours is bounded and
shared:

* `sqlite:///relative.db` / `sqlite:////absolute.db` (SQLAlchemy's spelling): one file, shared
  by every `--workers` process of a host (WAL mode); the embedded default lives under the user's
  data directory;
* `redis://HOST:PORT/DB` (`rediss://` for TLS): for several replicas behind a load balancer
  (a standalone Redis or a Sentinel-managed primary; not Redis Cluster: a record's keys are
  computed inside one script);
* `none`: no store (then `store: true` is ignored, as vLLM does, and what needs a store is a 400).

Every record expires after `ttl` seconds (OpenAI keeps responses 30 days) and the store holds at
most `max_bytes` of records: a write past that evicts the oldest. Expired records are purged a
bounded batch at a time as records are written, never by a scan per request. A store that cannot
be reached raises `StoreUnavailable`, which the routes answer with a 503; requests that need no
store keep working.

A record is a JSON object: `id`, `response` (the response object as GET returns it), `input`
(the input items a continuation replays: the earlier responses' items, then this request's),
`cancel` (a cancellation asked for on another replica), `owner` (the process running it in the
background). `status` mirrors `response.status` so that a write can be made conditional on it.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from proxy.store.base import DEFAULT_MAX_BYTES, DEFAULT_TTL, PURGE_BATCH, ResponseStore, StoreUnavailable

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_TTL", "PURGE_BATCH", "ResponseStore", "StoreUnavailable", "open_store",
           "default_sqlite_path"]

def default_sqlite_path() -> Path:
    """`$XDG_DATA_HOME/derender-proxy/responses.db` (`~/.local/share/...` by default)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "derender-proxy" / "responses.db"


def open_store(url: str | None, *, ttl: float = DEFAULT_TTL, max_bytes: int = DEFAULT_MAX_BYTES) -> ResponseStore | None:
    """The store a `--response-store` URL names (None: the embedded default; "none": no store).
    A malformed URL is a ValueError naming the flag (a start-up error)."""
    if url is not None and url.strip().lower() == "none":
        return None
    if url is None:
        from proxy.store.sqlite import SQLiteStore

        return SQLiteStore(default_sqlite_path(), ttl=ttl, max_bytes=max_bytes, url="sqlite (default)")
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        # SQLAlchemy: sqlite:///relative/path.db, sqlite:////absolute/path.db
        if parts.netloc or not parts.path.startswith("/") or len(parts.path) < 2:
            raise ValueError(f"--response-store {url!r}: expected sqlite:///RELATIVE.db or sqlite:////ABSOLUTE.db")
        from proxy.store.sqlite import SQLiteStore

        return SQLiteStore(Path(parts.path[1:]), ttl=ttl, max_bytes=max_bytes, url=url)
    if parts.scheme in ("redis", "rediss"):
        if not parts.hostname:
            raise ValueError(f"--response-store {url!r}: expected redis://HOST:PORT/DB")
        from proxy.store.redis import RedisStore

        return RedisStore(url, ttl=ttl, max_bytes=max_bytes)
    raise ValueError(f"--response-store {url!r}: expected sqlite:///PATH, redis://HOST:PORT/DB or none")
