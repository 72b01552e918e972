"""Store URL passwords never leave the process: not in errors, logs, ``store stats``, the CLI's
stderr or the recall tool's answer, in every form a URL can carry one (userinfo with ``@`` and
``:`` in it, redis-py's ``?password=``). One function masks them all: ``mask_url``."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep.exceptions import ConfigError, StoreError
from toolkeep.recall import recall_answer
from toolkeep.stores import mask_url, open_store
from toolkeep.stores.redis import RedisStore

from .redis_server import _binary, fresh_prefix, start_redis_server
from .strategies import property_settings

PASSWORD = "QXQX@pa:ss@w0rd:ZWZW"
"""A password with what used to leak: an ``@`` (what followed it was shown) and a ``:``."""
FRAGMENTS = ("QXQX", "ZWZW", "w0rd", "pa:ss")


def assert_masked(text: str) -> None:
    for fragment in FRAGMENTS:
        assert fragment not in text, f"{fragment!r} leaked in {text!r}"


def forms(hostport: str, password: str = PASSWORD) -> list[str]:
    """Every way a Redis URL names a password (all of them work with redis-py)."""
    encoded = quote(password, safe="")
    return [
        f"redis://default:{password}@{hostport}/0",
        f"redis://:{password}@{hostport}/0",
        f"redis://{hostport}/0?password={encoded}",
        f"redis://{hostport}/0?db=0&password={encoded}",
        f"rediss://default:{encoded}@{hostport}/0",
        f"unix://:{password}@/tmp/toolkeep-none.sock?db=0",
    ]


def query(url: str, extra: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{extra}"


@property_settings(300)
@given(core=st.text(), port=st.integers(0, 70_000), form=st.integers(0, 5))
def test_mask_url_hides_any_password(core: str, port: int, form: int) -> None:
    """Whatever chars a password holds (``@ : / ? # &``, spaces, any Unicode), neither its start
    nor its end survives masking, in any form; the host stays when it can be told apart."""
    password = f"QXQX{core}ZWZW"
    url = forms(f"127.0.0.1:{port}", password)[form]
    masked = mask_url(url)
    assert "QXQX" not in masked and "ZWZW" not in masked
    assert "***" in masked


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("redis://me:p@ss:w0rd@db:6379/0?password=x&prefix=a", "redis://me:***@db:6379/0?password=***&prefix=a"),
        ("redis://:pa/ss@db:6379/0", "redis://:***@db:6379/0"),
        ("redis://db/0?password=s3cr%40t", "redis://db/0?password=***"),
        ("redis://db/0?ssl_password=k;db=1", "redis://db/0?ssl_password=***;db=1"),
        ("unix://:pw@/run/redis.sock?db=0", "unix://:***@/run/redis.sock?db=0"),
        ("redis://db:6379/0?prefix=a", "redis://db:6379/0?prefix=a"),
        ("sqlite:///home/me@corp/a.db", "sqlite:///home/me@corp/a.db"),
        ("/var/archive", "/var/archive"),
    ],
)  # fmt: skip
def test_mask_url_examples(url: str, masked: str) -> None:
    """Passwords go, everything else stays (a path with an ``@`` is not a password)."""
    assert mask_url(url) == masked


@pytest.mark.parametrize("extra", ["ttl=soon", "max_bytes=lots", "max_entries=many", "ttl=0"])
@pytest.mark.parametrize("form", range(6))
def test_limit_errors_are_masked(extra: str, form: int) -> None:
    """A bad ttl, max_bytes or max_entries is a ConfigError that quotes the URL masked."""
    url = query(forms("127.0.0.1:1")[form], extra)
    with pytest.raises(ConfigError) as info:
        open_store(url)
    assert_masked(str(info.value))
    assert extra.split("=")[0] in str(info.value)


@pytest.mark.parametrize("form", range(6))
def test_unreachable_server_error_is_masked(form: int) -> None:
    """Nobody on the port: the StoreError names the URL, masked."""
    with pytest.raises(StoreError) as info:
        open_store(query(forms("127.0.0.1:1")[form], "socket_timeout=1"))
    assert "cannot reach" in str(info.value)
    assert_masked(str(info.value))


# ------------------------------------------------------------------ a real server with a password


@pytest.fixture
def locked_redis(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A redis-server that requires PASSWORD; its process and host:port."""
    if _binary() is None:
        if os.environ.get("CI"):
            pytest.fail("no redis-server binary, but CI must run the Redis tests")
        pytest.skip("no redis-server binary")
    proc, url = start_redis_server(tmp_path, "--requirepass", PASSWORD)
    try:
        yield proc, url.removeprefix("redis://").split("/")[0]
    finally:
        proc.kill()
        proc.wait()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLKEEP_STORE_URL"}
    return subprocess.run([sys.executable, "-m", "toolkeep", *args], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip


def big_history(n: int) -> list[Any]:
    text = "".join(f"{n}:{i:05d} a line of output\n" for i in range(3_000))
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "cat", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": text}]},
    ]


@pytest.mark.parametrize("form", range(4))
def test_a_failing_store_never_shows_its_password(
    form: int,
    locked_redis: tuple[subprocess.Popen[bytes], str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Opened with a password (so the URL is right), then the server dies: the recall tool's
    answer, the log, the report and every CLI line quote the URL masked."""
    proc, hostport = locked_redis
    url = query(forms(hostport)[form], f"prefix={fresh_prefix()}")
    stats = run_cli("store", "stats", "--store", url)
    assert stats.returncode == 0, stats.stderr
    assert_masked(stats.stdout + stats.stderr)
    bad = run_cli("store", "stats", "--store", query(url, "max_entries=many"))
    assert bad.returncode == 2 and "max_entries" in bad.stderr
    assert_masked(bad.stderr)

    store = open_store(url)
    assert isinstance(store, RedisStore) and "***" in repr(store)
    assert_masked(repr(store))
    caplog.set_level(logging.WARNING, logger="toolkeep")
    with store, toolkeep.Session(workspace=tmp_path / "ws", store=store) as session:
        out, _ = session.prepare(big_history(1))
        key = toolkeep.shorten.carried_keys(str(out))[0]
        proc.kill()
        proc.wait()
        answer = recall_answer(store, key)
        assert "could not be read" in answer
        assert_masked(answer)
        _, report = session.prepare([*out, *big_history(2)[1:]])
        assert report.save_errors
        assert_masked(" ".join(report.save_errors))
    assert "could not archive" in caplog.text
    assert_masked(caplog.text)
    gone = run_cli("store", "stats", "--store", url)
    assert gone.returncode == 2 and "cannot reach" in gone.stderr
    assert_masked(gone.stderr)


def test_a_config_never_shows_a_store_password() -> None:
    """``repr(Config)`` (what a log line or a traceback shows) leaves store URLs out."""
    import toolkeep

    config = toolkeep.Config(
        store_url="redis://user:hunter2@host:6379/0", caller_store_url="redis://:s3cret@h/1"
    )
    assert "hunter2" not in repr(config) and "s3cret" not in repr(config)
