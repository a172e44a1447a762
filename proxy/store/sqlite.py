"""The embedded response store: one SQLite file, shared by every worker process of a host.

Calls run on one thread of their own (SQLite is blocking I/O), each write in one `BEGIN
IMMEDIATE` transaction, so processes sharing the file never see half a write. The file is in WAL
mode (readers do not wait for the writer) with a busy timeout for the writers. The total size of
the records is kept by triggers in a one-row table, so the size bound needs no scan; expiry is
an indexed column, so purging expired records reads only those.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar

import orjson

from proxy.store.base import PURGE_BATCH, ResponseStore, StoreUnavailable

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY, status TEXT NOT NULL, record BLOB NOT NULL, size INTEGER NOT NULL,
    expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS responses_by_expiry ON responses (expires_at);
CREATE TABLE IF NOT EXISTS totals (k INTEGER PRIMARY KEY CHECK (k = 0), bytes INTEGER NOT NULL);
INSERT OR IGNORE INTO totals VALUES (0, 0);
CREATE TRIGGER IF NOT EXISTS responses_added AFTER INSERT ON responses
    BEGIN UPDATE totals SET bytes = bytes + NEW.size; END;
CREATE TRIGGER IF NOT EXISTS responses_changed AFTER UPDATE OF size ON responses
    BEGIN UPDATE totals SET bytes = bytes + NEW.size - OLD.size; END;
CREATE TRIGGER IF NOT EXISTS responses_removed AFTER DELETE ON responses
    BEGIN UPDATE totals SET bytes = bytes - OLD.size; END;
"""

BUSY_TIMEOUT = 10.0  # seconds a writer waits for another's lock


def _enter_wal_mode(db: sqlite3.Connection) -> None:
    """WAL mode. Switching a new file to it takes a lock that SQLite's busy timeout does not wait
    for (two replicas opening the file at once: "database is locked" at once), so wait here."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)  # the store's own thread: the event loop is not blocked


class SQLiteStore(ResponseStore):
    def __init__(self, path: Path, *, ttl: float, max_bytes: int, url: str) -> None:
        self.path = path
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.url = url
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="response-store")
        self._db: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
            _enter_wal_mode(db)
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(SCHEMA)
            self._db = db
        return self._db

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            try:
                return fn(self._connect())
            except (sqlite3.Error, OSError) as exc:
                if self._db is not None:  # reconnect on the next call
                    self._db.close()
                    self._db = None
                raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from None
        return await asyncio.get_running_loop().run_in_executor(self._thread, call)

    async def get(self, response_id: str) -> dict[str, Any] | None:
        def read(db: sqlite3.Connection) -> bytes | None:
            row = db.execute("SELECT record FROM responses WHERE id = ? AND expires_at > ?",
                             (response_id, time.time())).fetchone()
            return row[0] if row else None
        raw = await self._run(read)
        return None if raw is None else orjson.loads(raw)

    async def put(self, record: dict[str, Any], *, if_status: Collection[str] | None = None) -> bool:
        payload = orjson.dumps(record)
        status = str(record["response"].get("status"))
        response_id = record["id"]

        def write(db: sqlite3.Connection) -> bool:
            now = time.time()
            db.execute("BEGIN IMMEDIATE")
            try:
                if if_status is not None:
                    row = db.execute("SELECT status FROM responses WHERE id = ? AND expires_at > ?",
                                     (response_id, now)).fetchone()
                    if row is None or row[0] not in if_status:
                        db.execute("ROLLBACK")
                        return False
                db.execute("INSERT INTO responses (id, status, record, size, expires_at) VALUES (?, ?, ?, ?, ?) "
                           "ON CONFLICT (id) DO UPDATE SET status = excluded.status, record = excluded.record, "
                           "size = excluded.size, expires_at = excluded.expires_at",
                           (response_id, status, payload, len(payload), now + self.ttl))
                db.execute("DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE expires_at <= ? "
                           "ORDER BY expires_at LIMIT ?)", (now, PURGE_BATCH))
                while db.execute("SELECT bytes FROM totals").fetchone()[0] > self.max_bytes:
                    # over the bound: the oldest records go (never the one just written)
                    removed = db.execute("DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE id != ? "
                                         "ORDER BY expires_at LIMIT ?)", (response_id, PURGE_BATCH)).rowcount
                    if not removed:
                        break
                db.execute("COMMIT")
                return True
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return await self._run(write)

    async def delete(self, response_id: str) -> bool:
        def remove(db: sqlite3.Connection) -> bool:
            return db.execute("DELETE FROM responses WHERE id = ? AND expires_at > ?",
                              (response_id, time.time())).rowcount > 0
        return await self._run(remove)

    async def close(self) -> None:
        def shut(db: sqlite3.Connection) -> None:
            db.close()
            self._db = None
        if self._db is not None:
            try:
                await self._run(shut)
            except StoreUnavailable:
                pass
        self._thread.shutdown(wait=False)
