"""A real Redis server for the store tests.

CI (``.ci/run``) starts one and exports ``TOOLKEEP_TEST_REDIS_URL``; without that variable the
``redis_url`` fixture starts its own ``redis-server`` on a free loopback port (no persistence, a
temporary directory) and stops it at the end of the session. Without a binary the Redis tests are
skipped, except where ``CI`` is set: there they fail, so CI can never pass by skipping them.

Every test store gets its own namespace (:func:`fresh_prefix`), so parallel workers sharing one
server never see each other's keys.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["fresh_prefix", "redis_url", "start_redis_server"]

ENV_URL = "TOOLKEEP_TEST_REDIS_URL"
FALLBACK_BINARY = "/usr/bin/redis-server"


def fresh_prefix() -> str:
    """A namespace no other test uses."""
    return f"tktest-{uuid.uuid4().hex[:12]}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _binary() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    return FALLBACK_BINARY if os.access(FALLBACK_BINARY, os.X_OK) else None


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            reply = s.recv(16)
            return reply.startswith(b"+PONG") or reply.startswith(b"-NOAUTH")  # up, with a password
    except OSError:
        return False


def start_redis_server(directory: Path, *options: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``redis-server`` on a free loopback port, with more ``options`` if given (e.g.
    ``"--requirepass", "pw"``); the process and its URL (without any password)."""
    binary = _binary()
    if binary is None:
        raise FileNotFoundError("redis-server")
    for _ in range(5):  # another process may take the port between choosing it and binding it
        port = _free_port()
        log = open(directory / f"redis-{port}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(directory), "--daemonize", "no", *options],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        for _ in range(100):
            if _ping(port):
                return proc, f"redis://127.0.0.1:{port}/0"
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        proc.kill()
        proc.wait()
    raise RuntimeError(f"redis-server did not start; see the logs in {directory}")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The URL of a real Redis server, started here if CI did not provide one."""
    url = os.environ.get(ENV_URL)
    if url:
        yield url
        return
    if _binary() is None:
        reason = f"no redis-server binary and {ENV_URL} is not set"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}, but CI must run the Redis tests")
        pytest.skip(reason)
    directory = Path(tempfile.mkdtemp(prefix="toolkeep-redis-"))
    proc, url = start_redis_server(directory)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(directory, ignore_errors=True)
