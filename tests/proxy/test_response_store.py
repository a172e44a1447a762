"""The response store against real SQLite files and a real Redis server: round trips, expiry,
the size bound, conditional writes, sharing between processes, and a store that is down."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from proxy.store import StoreUnavailable, default_sqlite_path, open_store
from proxy.store.redis import RedisStore
from proxy.store.sqlite import SQLiteStore
from tests.services.redis_server import redis_server


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


@pytest.fixture(params=["sqlite", "redis"])
def make_store(request, tmp_path, redis_url):
    """Stores of one backend (each test closes its own)."""
    def make(ttl: float = 3600, max_bytes: int = 1 << 30):
        if request.param == "sqlite":
            store = SQLiteStore(tmp_path / "r.db", ttl=ttl, max_bytes=max_bytes, url="sqlite")
        else:  # a key prefix per test keeps the tests of one server apart
            store = RedisStore(redis_url, ttl=ttl, max_bytes=max_bytes, prefix=f"t{time.monotonic_ns()}")
        return store

    return make


def record(response_id: str, status: str = "completed", size: int = 10) -> dict:
    return {"id": response_id, "response": {"id": response_id, "status": status, "output": [], "pad": "x" * size},
            "input": [{"type": "message", "role": "user", "content": "hi 你好"}]}


async def test_round_trip_and_delete(make_store):
    store = make_store()
    assert await store.get("resp_a") is None
    assert await store.put(record("resp_a"))
    assert await store.get("resp_a") == record("resp_a")
    assert await store.put(record("resp_a", size=50))  # replace
    assert (await store.get("resp_a"))["response"]["pad"] == "x" * 50
    assert await store.delete("resp_a") and not await store.delete("resp_a")
    assert await store.get("resp_a") is None
    await store.close()


async def test_records_expire(make_store):
    store = make_store(ttl=0.3)
    await store.put(record("resp_old"))
    await asyncio.sleep(0.8)
    assert await store.get("resp_old") is None
    await store.put(record("resp_new"))  # a write purges what expired
    assert await store.get("resp_new") is not None
    if isinstance(store, SQLiteStore):
        rows = await store._run(lambda db: db.execute("SELECT id FROM responses").fetchall())
        assert rows == [("resp_new",)]
    else:
        assert await store._redis.zrange(store._keys[0], 0, -1) == [b"resp_new"]
    await store.close()


async def test_the_size_bound_evicts_the_oldest(make_store):
    one = len(orjson.dumps(record("resp_0", size=1000)))
    store = make_store(max_bytes=3 * one + one // 2)
    for i in range(6):
        await store.put(record(f"resp_{i}", size=1000))
        await asyncio.sleep(0.01)  # distinct expiry times: "oldest" is well defined
    kept = [i for i in range(6) if await store.get(f"resp_{i}") is not None]
    assert kept == [3, 4, 5]
    if isinstance(store, SQLiteStore):
        total = await store._run(lambda db: db.execute("SELECT bytes FROM totals").fetchone()[0])
    else:
        total = int(await store._redis.get(store._keys[2]))
    assert total == 3 * one
    await store.close()


async def test_a_record_larger_than_the_bound_is_still_written(make_store):
    """The bound evicts others, never the record being written (its caller needs it next)."""
    store = make_store(max_bytes=100)
    await store.put(record("resp_small", size=1))
    await store.put(record("resp_big", size=500))
    assert await store.get("resp_big") is not None and await store.get("resp_small") is None
    await store.close()


async def test_conditional_write_is_a_compare_and_set(make_store):
    store = make_store()
    active = ("queued", "in_progress")
    assert not await store.put(record("resp_c", "cancelled"), if_status=active)  # nothing stored yet
    await store.put(record("resp_c", "queued"))
    assert await store.put(record("resp_c", "cancelled"), if_status=active)
    # the background task finishing later must not overwrite the cancellation
    assert not await store.put(record("resp_c", "completed"), if_status=active)
    assert (await store.get("resp_c"))["response"]["status"] == "cancelled"
    await store.close()


async def test_concurrent_writers_keep_the_total_exact(make_store):
    store = make_store()
    await asyncio.gather(*(store.put(record(f"resp_{i % 5}", size=i)) for i in range(40)))
    sizes = [len(orjson.dumps(await store.get(f"resp_{i}"))) for i in range(5)]
    if isinstance(store, SQLiteStore):
        total = await store._run(lambda db: db.execute("SELECT bytes FROM totals").fetchone()[0])
    else:
        total = int(await store._redis.get(store._keys[2]))
    assert total == sum(sizes)
    await store.close()


WRITER = """
import asyncio, sys
from pathlib import Path
from proxy.store.sqlite import SQLiteStore
store = SQLiteStore(Path(sys.argv[1]), ttl=3600, max_bytes=1 << 30, url="sqlite")
async def main():
    for i in range(50):
        await store.put({"id": f"resp_{sys.argv[2]}_{i}", "response": {"status": "completed"}, "input": []})
    await store.close()
asyncio.run(main())
"""


async def test_processes_share_one_sqlite_file(tmp_path):
    path = tmp_path / "shared.db"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name]) for name in ("a", "b")]
    reader = SQLiteStore(path, ttl=3600, max_bytes=1 << 30, url="sqlite")
    assert [p.wait(60) for p in procs] == [0, 0]
    for name in ("a", "b"):
        for i in range(50):
            assert await reader.get(f"resp_{name}_{i}") is not None
    await reader.close()


async def test_a_redis_that_is_down_raises_store_unavailable(tmp_path):
    with redis_server(tmp_path) as server:
        store = RedisStore(server.url, ttl=60, max_bytes=1 << 20)
        await store.put(record("resp_x"))
    with pytest.raises(StoreUnavailable):
        await store.get("resp_x")
    with pytest.raises(StoreUnavailable):
        await store.put(record("resp_y"))
    await store.close()


async def test_an_unwritable_sqlite_path_raises_store_unavailable(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    store = SQLiteStore(tmp_path / "file" / "r.db", ttl=60, max_bytes=1 << 20, url="sqlite")
    with pytest.raises(StoreUnavailable):
        await store.get("resp_x")
    await store.close()


def test_store_urls(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_sqlite_path() == tmp_path / "derender-proxy" / "responses.db"
    assert isinstance(open_store(None), SQLiteStore) and open_store("none") is None
    absolute = open_store(f"sqlite:///{tmp_path}/x.db")  # sqlite:////abs/x.db
    assert isinstance(absolute, SQLiteStore) and absolute.path == Path(f"{tmp_path}/x.db")
    assert open_store("sqlite:///rel/x.db").path == Path("rel/x.db")
    assert isinstance(open_store("redis://127.0.0.1:6379/2"), RedisStore)
    for bad in ("sqlite://host/x.db", "sqlite:///", "redis:///0", "postgres://x/y", "x.db"):
        with pytest.raises(ValueError, match="--response-store"):
            open_store(bad)
