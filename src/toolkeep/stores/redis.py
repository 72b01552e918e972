"""An archive store on a Redis server, for agents that run on many machines (needs redis-py).

Layout under a namespace ``prefix`` (default ``toolkeep``), all in one hash slot so that it also
works on a cluster::

    {prefix}:data    hash   key -> original (UTF-8 bytes); and ``epoch`` -> the namespace's epoch
                            (in the same hash as the originals, so that nothing can lose them
                            and keep it: a FLUSHALL, a restart without persistence, a
                            ``maxmemory`` policy evicting the hash)
    {prefix}:sizes   hash   key -> size in bytes
    {prefix}:lru     zset   key scored by its last use (the client's clock, in seconds)
    {prefix}:meta    hash   bytes, hits, misses, evictions, expirations
    {prefix}:pins    hash   key -> "owner=until;..." for each session that pins it (never evicted
                            nor expired while a pin lasts; see stores/_base.py)

Each operation is one Lua script, so it is atomic across every process sharing the server: the
namespace's own LRU order, size cap and TTL hold whatever Redis's server-wide ``maxmemory``
policy is, and the counters are the whole namespace's.

Under an ``allkeys-*`` ``maxmemory`` policy Redis evicts whole keys: the ``data`` hash goes with
its epoch (the loss is seen at the next request); a lost ``lru`` or ``sizes`` leaves every
original readable (``get`` reads ``data``, and puts an entry it finds back in the order).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..exceptions import ConfigError, StoreError
from ..shorten import archive_key
from . import _base
from ._base import (
    ArchiveStore,
    Clock,
    GcResult,
    Limits,
    StoreBase,
    StoreStats,
    decode_text,
    encode_text,
    validate_key,
)
from ._masking import mask_url

if TYPE_CHECKING:  # pragma: no cover
    import redis

__all__ = ["RedisStore", "check_server_url"]

_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,64}")

_COMMON = """
local data, sizes, lru, meta, pins = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
-- pins: key -> 'owner=until;' per owner that pins it (any process); a lapsed one counts for nothing
local function held(k, now)
  local v = redis.call('HGET', pins, k)
  if not v then return false end
  for _, till in string.gmatch(v, '([^=;]+)=([^;]+);') do
    if tonumber(till) > now then return true end
  end
  return false
end
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
  local n = 0
  for _, k in ipairs(old) do
    if not held(k, now) then drop(k); n = n + 1 end
  end
  if n > 0 then redis.call('HINCRBY', meta, 'expirations', n) end
  return n
end
-- evict the least recently used entries down to the caps, never a pinned one nor `new`; with
-- `new` (the key a write just added), when that cannot be done, evict nothing and return -1
local function evict(maxb, maxn, new, now)
  local total = tonumber(redis.call('HGET', meta, 'bytes') or '0')
  local count = redis.call('ZCARD', lru)
  local function over() return (maxb >= 0 and total > maxb) or (maxn >= 0 and count > maxn) end
  local victims, start = {}, 0
  while over() do
    local batch = redis.call('ZRANGE', lru, start, start + 99)
    if #batch == 0 then break end
    start = start + #batch
    for _, k in ipairs(batch) do
      if not over() then break end
      if k ~= new and not held(k, now) then
        victims[#victims + 1] = k
        total = total - tonumber(redis.call('HGET', sizes, k) or '0')
        count = count - 1
      end
    end
  end
  if new ~= '' and over() then return -1 end
  for _, k in ipairs(victims) do drop(k) end
  if #victims > 0 then redis.call('HINCRBY', meta, 'evictions', #victims) end
  return #victims
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
if evict(maxb, maxn, key, now) < 0 then
  drop(key)
  return -1
end
return 1
"""
)

_GET = (
    _COMMON
    + """
local key, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local used = redis.call('ZSCORE', lru, key)
if used and ttl >= 0 and now - tonumber(used) >= ttl and not held(key, now) then
  drop(key)
  redis.call('HINCRBY', meta, 'expirations', 1)
  redis.call('HINCRBY', meta, 'misses', 1)
  return false
end
-- an original without its place in the order (the server's maxmemory evicted the order) is
-- still held: it is put back in the order below
local body = redis.call('HGET', data, key)
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
if redis.call('HEXISTS', data, ARGV[1]) == 1 then
  drop(ARGV[1])
  return 1
end
return 0
"""
)

_EPOCH = """
local e = redis.call('HGET', KEYS[1], 'epoch')
if not e then
  redis.call('HSET', KEYS[1], 'epoch', ARGV[1])
  e = ARGV[1]
end
return e
"""

_MISSING = """
local out = {}
for i = 1, #ARGV do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then out[#out + 1] = ARGV[i] end
end
return out
"""

_GC = (
    _COMMON
    + """
local now, ttl, maxb, maxn = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local expired = expire(now, ttl, -1)
return {expired, evict(maxb, maxn, '', now)}
"""
)

_PIN = (
    _COMMON
    + """
-- ARGV: owner, till, now, keys...: each key's entry for owner set to till ('': removed), lapsed
-- ones dropped
local owner, till, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
for i = 4, #ARGV do
  local kept = ''
  for o, u in string.gmatch(redis.call('HGET', pins, ARGV[i]) or '', '([^=;]+)=([^;]+);') do
    if o ~= owner and tonumber(u) > now then kept = kept .. o .. '=' .. u .. ';' end
  end
  if till ~= '' then kept = kept .. owner .. '=' .. till .. ';' end
  if kept == '' then redis.call('HDEL', pins, ARGV[i]) else redis.call('HSET', pins, ARGV[i], kept) end
end
return 0
"""
)


def _load_redis() -> Any:
    try:
        import redis
    except ImportError as exc:
        raise StoreError("the Redis store needs redis-py: pip install 'toolkeep[redis]'") from exc
    return redis


def check_server_url(url: str) -> None:
    """Refuse a Redis URL whose port is not a number (with the password masked): redis-py's own
    error quotes the port's text, and with a ``/`` in the password that text is part of it."""
    try:
        urlsplit(url).port  # noqa: B018 - the port is checked only when read
    except ValueError:
        raise ConfigError(
            f"store URL {mask_url(url)!r}: its port is not a number from 0 to 65535 "
            "(in a password, write / ? # as %2F %3F %23)"
        ) from None


class _Breaker:
    """Fails calls at once while a server that stopped answering is left alone.

    After a call fails for want of an answer (refused, reset, timed out), no call reaches the
    server for ``retry_after`` seconds counted from the moment that call gave up, so a stalled
    server costs one timeout per window, not one per call. The first call after the window is
    the only one let through (a probe; calls made while it waits fail at once); its success
    closes the breaker, its failure opens a new window.
    """

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        self._lock = threading.Lock()
        self._closed_at = float("-inf")  # monotonic time the window ends; -inf: closed
        self._probing = False
        self.last_failure = ""

    def admit(self) -> str | None:
        """``None`` if a call may go to the server, else the reason it may not."""
        with self._lock:
            if self._closed_at == float("-inf"):
                return None
            wait = self._closed_at - time.monotonic()
            if wait > 0 or self._probing:
                shown = f"asked again in {max(wait, 0):.1f} s" if wait > 0 else "being asked again now"
                return f"unreachable a moment ago ({self.last_failure}); {shown}"
            self._probing = True
            return None

    def succeeded(self) -> None:
        with self._lock:
            self._closed_at = float("-inf")
            self._probing = False

    def abandoned(self) -> None:
        with self._lock:
            self._probing = False

    def failed(self, reason: str) -> None:
        with self._lock:
            self._closed_at = time.monotonic() + self.retry_after  # from the END of the failed call
            self._probing = False
            self.last_failure = reason


class RedisStore(StoreBase):
    """Originals on a Redis server, namespaced by ``prefix``.

    ``url`` is a redis-py URL (``redis://[:password@]host:port/db``, ``rediss://`` for TLS,
    ``unix:///path.sock``); the server is pinged at once, so a wrong URL fails here. A call waits
    at most ``socket_timeout`` seconds for an answer (``connect_timeout`` for a connection) and
    is never retried by redis-py; a server that did not answer is left alone ``retry_after``
    seconds (see :class:`_Breaker`).
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
        socket_timeout: float = 10.0,
        connect_timeout: float = 5.0,
    ) -> None:
        super().__init__(limits=limits, clock=clock)
        for name, value, low in (("retry_after", retry_after, 0.0), ("socket_timeout", socket_timeout, 1e-3),
                                 ("connect_timeout", connect_timeout, 1e-3)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= 86_400:
                raise ConfigError(f"Redis store {name} must be a number of seconds from {low:g} to 86400")
        self.retry_after = retry_after
        """Seconds a server that failed to answer (refused, timed out) is not asked again, counted
        from the end of the failed call: every call meanwhile fails at once."""
        self._breaker = _Breaker(retry_after)
        if not _PREFIX.fullmatch(prefix):
            raise ConfigError(f"Redis store prefix {prefix!r} must be 1-64 chars of [A-Za-z0-9_.:-]")
        self.prefix = prefix
        check_server_url(url)
        self.url = url
        self._redis = _load_redis()
        tag = "{" + prefix + "}"
        self.keys = [f"{tag}:data", f"{tag}:sizes", f"{tag}:lru", f"{tag}:meta", f"{tag}:pins"]
        """The Redis keys this store uses (one namespace)."""
        try:
            if client is None:
                from redis.backoff import NoBackoff
                from redis.retry import Retry

                client = self._redis.Redis.from_url(
                    url,
                    socket_timeout=socket_timeout,
                    socket_connect_timeout=connect_timeout,
                    retry=Retry(NoBackoff(), 0),  # one wait per call: the breaker does the rest
                )
            self._client: redis.Redis | None = client
            client.ping()
        except (self._redis.RedisError, ValueError, TypeError) as exc:
            # ValueError: a bad port, a host idna rejects; TypeError: a parameter redis-py lacks
            raise StoreError(f"cannot reach the Redis archive at {mask_url(url)}: {exc}") from exc
        self._put = client.register_script(_PUT)
        self._get = client.register_script(_GET)
        self._delete = client.register_script(_DELETE)
        self._gc = client.register_script(_GC)
        self._pin = client.register_script(_PIN)
        self._epoch_script = client.register_script(_EPOCH)
        self._missing = client.register_script(_MISSING)

    def put(self, key: str, text: str) -> None:
        """Store ``text`` under ``key`` once; evict the least recently used entries over the caps."""
        validate_key(key)
        body = encode_text(text)
        self.limits.check_fits(key, len(body))
        lim = self.limits
        args = [key, body, len(body), _num(self.clock()), _num(lim.ttl), _num(lim.max_bytes)]
        if self._script(self._put, [*args, _num(lim.max_entries)]) == -1:
            raise _base.no_room(key)

    def get(self, key: str) -> str | None:
        """The original under ``key``, or ``None``; a hit counts as a use."""
        validate_key(key)
        body = self._script(self._get, [key, _num(self.clock()), _num(self.limits.ttl)])
        return None if body is None else decode_text(bytes(body))

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it was there."""
        validate_key(key)
        return bool(self._script(self._delete, [key]))

    def epoch(self) -> str:
        """The namespace's epoch, kept in its ``data`` hash (one round trip): written when
        missing, so it changes whenever the originals were lost with it."""
        made = _base.new_epoch()
        value = self._call(lambda _: self._epoch_script(keys=self.keys[:1], args=[made]))
        return bytes(value).decode("ascii", "replace")

    def missing(self, keys: Collection[str]) -> frozenset[str]:
        """Those of ``keys`` the namespace does not hold (one round trip; not a use)."""
        wanted = sorted({validate_key(key) for key in keys})
        if not wanted:
            return frozenset()
        gone = self._call(lambda _: self._missing(keys=self.keys[:1], args=wanted))
        return frozenset(bytes(k).decode("ascii") for k in gone)

    def stats(self) -> StoreStats:
        """Entries and bytes now, and the namespace's counts across every client."""

        def run(client: redis.Redis) -> Any:
            pipe = client.pipeline()
            pipe.zcard(self.keys[2])
            pipe.hgetall(self.keys[3])
            return pipe.execute()

        entries, meta = self._call(run)
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
        expired, evicted = self._script(self._gc, args)
        return GcResult(int(expired), int(evicted))

    def clear(self) -> None:
        """Delete the whole namespace (originals and counters)."""
        self._call(lambda client: client.delete(*self.keys))

    def _new_state_store(self, limits: Limits) -> ArchiveStore:
        """A namespace of its own on the same server and connection (closed with this store's)."""
        prefix = f"{self.prefix}:state"
        if len(prefix) > 64:
            prefix = f"state:{archive_key(self.prefix)}"
        return RedisStore(self.url, prefix=prefix, limits=limits, clock=self.clock, client=self._client)

    def close(self) -> None:
        """Close the connection pool. Safe to call more than once."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def pin(self, owner: str, keys: Iterable[str]) -> None:
        """Pin ``keys`` here and on the server (for :data:`PIN_LEASE` seconds), so that every
        client of the namespace keeps them."""
        keys = tuple(keys)
        super().pin(owner, keys)
        if keys:
            now = self.clock()
            self._script(self._pin, [owner, _num(now + _base.PIN_LEASE), _num(now), *keys])

    def release(self, owner: str) -> None:
        """Drop ``owner``'s pins, here and on the server."""
        with self._pin_lock:
            keys = sorted(self._pins.get(owner, ()))
        if keys and self._client is not None:
            self._script(self._pin, [owner, "", _num(self.clock()), *keys])
        super().release(owner)

    def _live(self) -> redis.Redis:
        if self._client is None:
            raise StoreError(f"Redis archive at {mask_url(self.url)} is closed")
        return self._client

    def _script(self, script: Any, args: list[Any]) -> Any:
        return self._call(lambda _: script(keys=self.keys, args=args))

    def _call(self, run: Callable[[redis.Redis], Any]) -> Any:
        """``run(client)``, unless the breaker is open; redis-py's errors as :class:`StoreError`
        (naming the server and the error, never an original's text)."""
        client = self._live()
        refused = self._breaker.admit()
        if refused is not None:
            raise StoreError(f"Redis archive at {mask_url(self.url)}: {refused}")
        try:
            result = run(client)
        except (self._redis.ConnectionError, self._redis.TimeoutError) as exc:
            self._breaker.failed(
                "no answer in time" if isinstance(exc, self._redis.TimeoutError) else "no connection"
            )
            raise StoreError(f"Redis archive at {mask_url(self.url)}: {type(exc).__name__}: {exc}") from exc
        except self._redis.RedisError as exc:
            self._breaker.succeeded()  # it answered, with an error
            raise StoreError(f"Redis archive at {mask_url(self.url)}: {type(exc).__name__}: {exc}") from exc
        except BaseException:
            self._breaker.abandoned()  # interrupted: no verdict, but no probe left pending
            raise
        self._breaker.succeeded()
        return result

    def __repr__(self) -> str:
        return f"RedisStore({mask_url(self.url)!r}, prefix={self.prefix!r})"


def _num(value: float | None) -> str:
    """A number as the scripts read it; ``-1`` for no limit."""
    return "-1" if value is None else repr(float(value))
