"""An archive store on a Redis server, for agents that run on many machines (needs redis-py).

Layout under a namespace ``prefix`` (default ``toolkeep``), all in one hash slot so that it also
works on a cluster::

    {prefix}:data    hash   key -> original (UTF-8 bytes)
    {prefix}:sizes   hash   key -> size in bytes
    {prefix}:lru     zset   key scored by its last use (the client's clock, in seconds)
    {prefix}:meta    hash   bytes, hits, misses, evictions, expirations

Each operation is one Lua script, so it is atomic across every process sharing the server: the
namespace's own LRU order, size cap and TTL hold whatever Redis's server-wide ``maxmemory``
policy is, and the counters are the whole namespace's.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from ..exceptions import ConfigError, StoreError
from ._base import Clock, GcResult, Limits, StoreBase, StoreStats, decode_text, encode_text, validate_key
from .url import mask_url

if TYPE_CHECKING:  # pragma: no cover
    import redis

__all__ = ["RedisStore"]

_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,64}")

_COMMON = """
local data, sizes, lru, meta = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local function drop(k)
  local s = tonumber(redis.call('HGET', sizes, k) or '0')
  redis.call('HDEL', data, k)
  redis.call('HDEL', sizes, k)
  redis.call('ZREM', lru, k)
  redis.call('HINCRBY', meta, 'bytes', -s)
end
local function expire(now, ttl, limit)
  if ttl < 0 then return 0 end
  local old = redis.call('ZRANGEBYSCORE', lru, '-inf', string.format('%.17g', now - ttl),
                         'LIMIT', 0, limit)
  for _, k in ipairs(old) do drop(k) end
  if #old > 0 then redis.call('HINCRBY', meta, 'expirations', #old) end
  return #old
end
local function evict(maxb, maxn, keep)
  local n = 0
  while true do
    local total = tonumber(redis.call('HGET', meta, 'bytes') or '0')
    local count = redis.call('ZCARD', lru)
    if not ((maxb >= 0 and total > maxb) or (maxn >= 0 and count > maxn)) then break end
    local oldest = redis.call('ZRANGE', lru, 0, 1)
    local victim = oldest[1]
    if victim == keep then victim = oldest[2] end
    if not victim then break end
    drop(victim)
    n = n + 1
  end
  if n > 0 then redis.call('HINCRBY', meta, 'evictions', n) end
  return n
end
"""

_PUT = (
    _COMMON
    + """
local key, body, size, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local ttl, maxb, maxn = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
expire(now, ttl, 1000)
if redis.call('HEXISTS', data, key) == 1 then
  redis.call('ZADD', lru, string.format('%.17g', now), key)
  return 0
end
redis.call('HSET', data, key, body)
redis.call('HSET', sizes, key, size)
redis.call('ZADD', lru, string.format('%.17g', now), key)
redis.call('HINCRBY', meta, 'bytes', size)
evict(maxb, maxn, key)
return 1
"""
)

_GET = (
    _COMMON
    + """
local key, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local used = redis.call('ZSCORE', lru, key)
if used and ttl >= 0 and now - tonumber(used) >= ttl then
  drop(key)
  redis.call('HINCRBY', meta, 'expirations', 1)
  used = false
end
local body = false
if used then body = redis.call('HGET', data, key) end
if not body then
  redis.call('HINCRBY', meta, 'misses', 1)
  return false
end
redis.call('ZADD', lru, string.format('%.17g', now), key)
redis.call('HINCRBY', meta, 'hits', 1)
return body
"""
)

_DELETE = (
    _COMMON
    + """
if redis.call('ZSCORE', lru, ARGV[1]) then
  drop(ARGV[1])
  return 1
end
return 0
"""
)

_GC = (
    _COMMON
    + """
local now, ttl, maxb, maxn = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local expired = expire(now, ttl, -1)
return {expired, evict(maxb, maxn, '')}
"""
)


def _load_redis() -> Any:
    try:
        import redis
    except ImportError as exc:
        raise StoreError("the Redis store needs redis-py: pip install 'toolkeep[redis]'") from exc
    return redis


class RedisStore(StoreBase):
    """Originals on a Redis server, namespaced by ``prefix``.

    ``url`` is a redis-py URL (``redis://[:password@]host:port/db``, ``rediss://`` for TLS,
    ``unix:///path.sock``); the server is pinged at once, so a wrong URL fails here.
    """

    backend = "redis"

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "toolkeep",
        limits: Limits | None = None,
        clock: Clock | None = None,
        client: redis.Redis | None = None,
        retry_after: float = 5.0,
    ) -> None:
        super().__init__(limits=limits, clock=clock)
        self.retry_after = retry_after
        """Seconds a server that failed to answer (refused, timed out) is not asked again: every
        call meanwhile fails at once, so a stalled server costs one timeout, not one per result."""
        self._down_until = float("-inf")
        if not _PREFIX.fullmatch(prefix):
            raise ConfigError(f"Redis store prefix {prefix!r} must be 1-64 chars of [A-Za-z0-9_.:-]")
        self.prefix = prefix
        self.url = url
        self._redis = _load_redis()
        tag = "{" + prefix + "}"
        self.keys = [f"{tag}:data", f"{tag}:sizes", f"{tag}:lru", f"{tag}:meta"]
        """The Redis keys this store uses (one namespace)."""
        try:
            self._client: redis.Redis | None = (
                client
                if client is not None
                else self._redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
            )
            self._client.ping()
        except (self._redis.RedisError, ValueError) as exc:  # ValueError: a bad port, a host idna rejects
            raise StoreError(f"cannot reach the Redis archive at {mask_url(url)}: {exc}") from exc
        self._put = self._client.register_script(_PUT)
        self._get = self._client.register_script(_GET)
        self._delete = self._client.register_script(_DELETE)
        self._gc = self._client.register_script(_GC)

    def put(self, key: str, text: str) -> None:
        """Store ``text`` under ``key`` once; evict the least recently used entries over the caps."""
        validate_key(key)
        body = encode_text(text)
        self.limits.check_fits(key, len(body))
        lim = self.limits
        args = [key, body, len(body), _num(self.clock()), _num(lim.ttl), _num(lim.max_bytes)]
        self._call(self._put, [*args, _num(lim.max_entries)])

    def get(self, key: str) -> str | None:
        """The original under ``key``, or ``None``; a hit counts as a use."""
        validate_key(key)
        body = self._call(self._get, [key, _num(self.clock()), _num(self.limits.ttl)])
        return None if body is None else decode_text(bytes(body))

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it was there."""
        validate_key(key)
        return bool(self._call(self._delete, [key]))

    def stats(self) -> StoreStats:
        """Entries and bytes now, and the namespace's counts across every client."""
        client = self._live()
        try:
            pipe = client.pipeline()
            pipe.zcard(self.keys[2])
            pipe.hgetall(self.keys[3])
            entries, meta = pipe.execute()
        except self._redis.RedisError as exc:
            raise StoreError(f"Redis archive at {mask_url(self.url)}: {exc}") from exc
        counts = {k.decode(): int(v) for k, v in meta.items()}
        lim = self.limits
        return StoreStats(
            self.backend,
            int(entries),
            counts.get("bytes", 0),
            counts.get("hits", 0),
            counts.get("misses", 0),
            counts.get("evictions", 0),
            counts.get("expirations", 0),
            lim.max_bytes,
            lim.max_entries,
            lim.ttl,
        )

    def gc(self) -> GcResult:
        """Delete every expired entry and evict down to the caps."""
        lim = self.limits
        args = [_num(self.clock()), _num(lim.ttl), _num(lim.max_bytes), _num(lim.max_entries)]
        expired, evicted = self._call(self._gc, args)
        return GcResult(int(expired), int(evicted))

    def clear(self) -> None:
        """Delete the whole namespace (originals and counters)."""
        client = self._live()
        try:
            client.delete(*self.keys)
        except self._redis.RedisError as exc:
            raise StoreError(f"Redis archive at {mask_url(self.url)}: {exc}") from exc

    def close(self) -> None:
        """Close the connection pool. Safe to call more than once."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _live(self) -> redis.Redis:
        if self._client is None:
            raise StoreError(f"Redis archive at {mask_url(self.url)} is closed")
        return self._client

    def _call(self, script: Any, args: list[Any]) -> Any:
        self._live()
        now = time.monotonic()
        if now < self._down_until:
            raise StoreError(
                f"Redis archive at {mask_url(self.url)}: unreachable a moment ago; "
                f"asked again after {self.retry_after:g} s"
            )
        try:
            return script(keys=self.keys, args=args)
        except (self._redis.ConnectionError, self._redis.TimeoutError) as exc:
            self._down_until = now + self.retry_after
            raise StoreError(f"Redis archive at {mask_url(self.url)}: {type(exc).__name__}: {exc}") from exc
        except self._redis.RedisError as exc:
            # the message names the server and the error, never the original's text
            raise StoreError(f"Redis archive at {mask_url(self.url)}: {type(exc).__name__}: {exc}") from exc

    def __repr__(self) -> str:
        return f"RedisStore({mask_url(self.url)!r}, prefix={self.prefix!r})"


def _num(value: float | None) -> str:
    """A number as the scripts read it; ``-1`` for no limit."""
    return "-1" if value is None else repr(float(value))
