"""Make a store from a URL.

==========================================  ==============================================
``memory://``                               a fresh in-memory store
``file:///path/dir`` (or a bare path)       one file per original in a directory
``sqlite:///path/archive.db``               one SQLite file (``sqlite://rel/a.db``: relative)
``redis://[:password@]host:port/db``        a Redis server (``rediss://`` for TLS)
==========================================  ==============================================

Limits go in the query string and apply to every scheme: ``max_bytes`` (``64M``, ``1G``, or a
number of bytes), ``max_entries``, ``ttl`` (seconds, or ``30m``, ``12h``, ``7d``). Redis also takes
``prefix`` (its namespace), how long to wait for the server, ``socket_timeout`` (an answer,
default 10 s) and ``connect_timeout`` (a connection, default 5 s; redis-py's
``socket_connect_timeout`` too), and ``retry_after`` (how long a server that did not answer is
left alone, default 5 s, counted from the end of the call that gave up), and hands ``db``,
``username``, ``password``, ``client_name``, ``health_check_interval``, ``socket_keepalive``,
``max_connections``, ``protocol`` and, with ``rediss://``, ``ssl_*`` on to redis-py::

    redis://127.0.0.1:6379/0?prefix=agent1&max_bytes=256M&ttl=7d
    redis://10.0.0.5:6379/0?socket_timeout=0.5&connect_timeout=0.5&retry_after=10

Explicit ``limits`` passed to :func:`open_store` win over the query string.

Whatever quotes a store URL (an error, a log line, the recall tool's answer) quotes
:func:`mask_url` of it: the password is replaced by ``***``, in the userinfo
(``redis://user:***@host``, whatever chars it holds) and in the query (``?password=***``).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ..config import Config
from ..exceptions import ConfigError
from ._base import ArchiveStore, Clock, Limits
from ._masking import mask_url
from .file import FileStore
from .memory import MemoryStore

__all__ = ["mask_url", "open_store", "parse_limits", "store_for_config"]

# ASCII digits, and few enough that int() and float() take them (no 5,000-digit limit)
_SIZE = re.compile(r"([0-9]{1,19})\s*([KMG]i?B?|B)?", re.IGNORECASE)
_COUNT = re.compile(r"[0-9]{1,19}")
_DURATION = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,9})?)\s*([smhd]?)", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_OURS = ("max_bytes", "max_entries", "ttl", "prefix")
_REDIS_SCHEMES = ("redis", "rediss", "unix")
_REDIS_OURS = ("socket_timeout", "connect_timeout", "socket_connect_timeout", "retry_after")
_REDIS_PASSED = ("db", "username", "password", "client_name", "health_check_interval", "socket_keepalive",
                 "max_connections", "protocol")  # fmt: skip
"""What a Redis URL hands on to redis-py (and ``ssl_*`` with ``rediss://``); anything else is
refused here, rather than become an unexpected keyword deep inside redis-py."""


def _quoted(url: str) -> str:
    """A store URL as an error message quotes it: masked, and cut if very long."""
    shown = mask_url(url)
    return repr(shown if len(shown) <= 200 else f"{shown[:150]}...{shown[-40:]}")


def parse_limits(query: dict[str, str], url: str = "") -> Limits:
    """The :class:`Limits` named by a store URL's query parameters."""
    where = f" in store URL {_quoted(url)}" if url else ""
    max_bytes = max_entries = None
    if "max_bytes" in query:
        m = _SIZE.fullmatch(query["max_bytes"].strip())
        if not m:
            raise ConfigError(
                f"max_bytes={_value(query, 'max_bytes')}{where}: expected e.g. 1048576, 64M, 1G"
            )
        max_bytes = int(m[1]) * _SIZE_UNITS[(m[2] or "")[:1].lower()]
    if "max_entries" in query:
        if not _COUNT.fullmatch(query["max_entries"].strip()):
            raise ConfigError(f"max_entries={_value(query, 'max_entries')}{where}: expected a whole number")
        max_entries = int(query["max_entries"])
    ttl = _seconds(query, "ttl", where)
    return Limits(max_bytes=max_bytes, max_entries=max_entries, ttl=ttl)


def _seconds(query: dict[str, str], name: str, where: str) -> float | None:
    """The duration ``query[name]`` names (``90``, ``0.5``, ``30m``, ``12h``, ``7d``), if there."""
    if name not in query:
        return None
    m = _DURATION.fullmatch(query[name].strip())
    if not m:
        raise ConfigError(f"{name}={_value(query, name)}{where}: expected seconds, or e.g. 0.5, 30m, 12h, 7d")
    return float(m[1]) * _SECONDS[m[2].lower()]


def _value(query: dict[str, str], name: str) -> str:
    """A query value as an error quotes it: short (a 5,000-digit number is not repeated)."""
    value = query[name]
    return repr(value) if len(value) <= 40 else f"{value[:30]!r}... ({len(value):,} chars)"


def open_store(
    url: str, *, limits: Limits | None = None, clock: Clock | None = None, create: bool = True
) -> ArchiveStore:
    """Open the store a URL names (see the module docstring for the schemes).

    ``create=False`` is for reading: a file store's directory or a SQLite file that is missing
    is :class:`StoreNotFoundError`, never created (memory and Redis stores have nothing to create).

    >>> open_store("memory://?max_entries=10").stats().max_entries
    10
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # "redis://[::1": an IPv6 address left open
        raise ConfigError(f"store URL {_quoted(url)} is malformed ({exc})") from None
    if "\x00" in unquote(url):
        raise ConfigError(f"store URL {_quoted(url)} holds a NUL byte")
    scheme = parts.scheme.lower()
    if len(scheme) == 1:  # a Windows drive letter, not a scheme
        return FileStore(url, limits=limits, clock=clock, create=create)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    known = set(_OURS)
    if scheme in _REDIS_SCHEMES:
        known.update(_REDIS_OURS, _REDIS_PASSED)
        if scheme == "rediss":
            known.update(k for k in query if k.startswith("ssl_"))
    unknown = sorted(set(query) - known)
    if unknown:
        names = ", ".join(repr(name[:40]) for name in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise ConfigError(f"unknown store URL parameter(s) {names} in {_quoted(url)}")
    parsed = parse_limits(query, url)
    if limits is not None:
        parsed = replace(
            parsed,
            **{k: v for k in ("max_bytes", "max_entries", "ttl") if (v := getattr(limits, k)) is not None},
        )
    if scheme == "memory":
        return MemoryStore(limits=parsed, clock=clock)
    if scheme in ("file", ""):
        path = unquote(parts.netloc + parts.path) if scheme else parts.path
        if not path:
            raise ConfigError(f"store URL {_quoted(url)} names no directory")
        return FileStore(path, limits=parsed, clock=clock, create=create)
    if scheme == "sqlite":
        path = unquote(parts.netloc + parts.path)
        if not path:
            raise ConfigError(f"store URL {_quoted(url)} names no database file")
        from .sqlite import SQLiteStore

        return SQLiteStore(path, limits=parsed, clock=clock, create=create)
    if scheme in _REDIS_SCHEMES:
        from .redis import RedisStore, check_server_url

        check_server_url(url)

        where = f" in store URL {_quoted(url)}"
        timing: dict[str, Any] = {}  # only what the URL names: RedisStore's defaults are the rest
        for name, given in (("socket_timeout", "socket_timeout"), ("connect_timeout", "connect_timeout"),
                            ("connect_timeout", "socket_connect_timeout"), ("retry_after", "retry_after")):  # fmt: skip
            value = _seconds(query, given, where)
            if value is not None:
                timing.setdefault(name, value)
        ours = (*_OURS, *_REDIS_OURS)
        rest = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in ours]
        server = urlunsplit(parts._replace(query=urlencode(rest)))
        if scheme == "unix" and not parts.netloc:  # urlunsplit drops the "//" of unix:///path
            server = "unix://" + server[len("unix:") :]
        prefix = query.get("prefix", "toolkeep")
        return RedisStore(server, prefix=prefix, limits=parsed, clock=clock, **timing)
    raise ConfigError(
        f"unsupported store URL scheme {scheme[:20]!r} in {_quoted(url)} "
        "(use memory://, file:///dir, sqlite:///file.db or redis://host:port/db)"
    )


def store_for_config(config: Config, archive_dir: str | os.PathLike[str]) -> ArchiveStore:
    """The store a session's config asks for: ``config.store_url`` if set, else a
    :class:`FileStore` in ``archive_dir`` (the workspace's ``archive/``); either way with the
    config's ``store_max_bytes`` and ``store_ttl_seconds``."""
    ttl = config.store_ttl_seconds
    limits = Limits(max_bytes=config.store_max_bytes, ttl=float(ttl) if ttl is not None else None)
    if config.store_url:
        return open_store(config.store_url, limits=limits)
    return FileStore(archive_dir, limits=limits)
