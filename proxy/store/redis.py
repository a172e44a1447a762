"""The replicas' response store: Redis.

Each record is a hash (`record`, `status`) that expires by itself; an index (a sorted set scored
by expiry time), a hash of record sizes and a running total let one write purge what has
expired and evict the oldest records past the size bound. Every write is one Lua script, so
replicas writing at once never see each other's half-writes, and a conditional write (the
cancellation of a background response racing its completion) is a compare-and-set.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from proxy.store.base import PURGE_BATCH, ResponseStore, StoreUnavailable

PREFIX = "derender:responses"

# KEYS: index, sizes, total. ARGV: prefix, id, record, status, ttl, now, max_bytes, batch,
# allowed statuses ("" = unconditional, else "|a|b|").
_PUT = """
local prefix, id, record, status = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ttl, now, max_bytes, batch = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local key = prefix .. ':r:' .. id
if ARGV[9] ~= '' then
  local current = redis.call('HGET', key, 'status')
  if not current or not string.find(ARGV[9], '|' .. current .. '|', 1, true) then return 0 end
end
local function forget(other)
  local size = tonumber(redis.call('HGET', KEYS[2], other) or '0')
  redis.call('DEL', prefix .. ':r:' .. other)
  redis.call('ZREM', KEYS[1], other)
  redis.call('HDEL', KEYS[2], other)
  redis.call('DECRBY', KEYS[3], size)
end
local old = tonumber(redis.call('HGET', KEYS[2], id) or '0')
redis.call('HSET', key, 'record', record, 'status', status)
redis.call('PEXPIRE', key, math.floor(ttl * 1000))
redis.call('HSET', KEYS[2], id, string.len(record))
redis.call('INCRBY', KEYS[3], string.len(record) - old)
redis.call('ZADD', KEYS[1], now + ttl, id)
for _, other in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, batch)) do forget(other) end
while tonumber(redis.call('GET', KEYS[3]) or '0') > max_bytes do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 1)
  local victim = oldest[1]
  if victim == id then victim = oldest[2] end
  if not victim then break end
  forget(victim)
end
return 1
"""

# KEYS: index, sizes, total. ARGV: prefix, id.
_DELETE = """
local key = ARGV[1] .. ':r:' .. ARGV[2]
local existed = redis.call('EXISTS', key)
local size = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
redis.call('DEL', key)
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('DECRBY', KEYS[3], size)
return existed
"""


class RedisStore(ResponseStore):
    def __init__(self, url: str, *, ttl: float, max_bytes: int, prefix: str = PREFIX) -> None:
        self.url = url
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.prefix = prefix
        # short timeouts: a store that does not answer is a 503 soon, not a hung request
        self._redis = aioredis.Redis.from_url(url, socket_connect_timeout=2.0, socket_timeout=5.0,
                                              health_check_interval=30)
        self._keys = [f"{prefix}:index", f"{prefix}:sizes", f"{prefix}:bytes"]
        self._put = self._redis.register_script(_PUT)
        self._delete = self._redis.register_script(_DELETE)

    def _key(self, response_id: str) -> str:
        return f"{self.prefix}:r:{response_id}"

    async def get(self, response_id: str) -> dict[str, Any] | None:
        try:
            raw = await self._redis.hget(self._key(response_id), "record")
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from None
        return None if raw is None else orjson.loads(raw)

    async def put(self, record: dict[str, Any], *, if_status: Collection[str] | None = None) -> bool:
        allowed = "" if if_status is None else "|" + "|".join(if_status) + "|"
        try:
            written = await self._put(keys=self._keys, args=[
                self.prefix, record["id"], orjson.dumps(record), str(record["response"].get("status")),
                self.ttl, time.time(), self.max_bytes, PURGE_BATCH, allowed])
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from None
        return bool(written)

    async def delete(self, response_id: str) -> bool:
        try:
            return bool(await self._delete(keys=self._keys, args=[self.prefix, response_id]))
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from None

    async def close(self) -> None:
        try:
            await self._redis.aclose()
        except (RedisError, OSError):
            pass
