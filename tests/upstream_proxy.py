"""The real ``toolkeep proxy`` in a subprocess, for the proxy tests: started on a free port, its
stderr kept line by line, stopped by a signal."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SCRIPT = Path(sys.executable).with_name("toolkeep")
TOOLKEEP = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "toolkeep"]
LISTENING = re.compile(r"^listening on (http://\S+)$")


class ProxyProcess:
    """``toolkeep proxy --port 0 ARGS`` until :meth:`stop`; ``url`` once it listens (``command``:
    another serving command, ``mcp`` for ``toolkeep mcp --transport http``)."""

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 60.0, command: str = "proxy"
    ) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [*TOOLKEEP, *command.split(), "--port", "0", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self._listening = threading.Event()
        self.url = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while not self._listening.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the proxy did not start: {self.stderr()}")

    def _read(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            match = LISTENING.match(line)
            if match and not self.url:
                self.url = match.group(1)
                self._listening.set()

    def stderr(self) -> str:
        return "\n".join(self.lines)

    def log_lines(self, path: str) -> list[str]:
        """The per-request log lines of requests to ``path``."""
        return [line for line in self.lines if line.startswith("toolkeep proxy: ") and f" {path} " in line]

    def wait_for_line(self, predicate: Any, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if predicate(line):
                    return line
            time.sleep(0.02)
        raise AssertionError(f"no such line in the proxy's stderr:\n{self.stderr()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)
        return self.process.returncode

    def __enter__(self) -> ProxyProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def big_text(n: int, tag: str) -> str:
    """``n`` lines of tool output, each naming ``tag`` and its number."""
    return "".join(f"{tag} line {i}: some output of the tool, long enough to matter\n" for i in range(n))


def read_history(results: int, size: int = 800, first: str = "read the files") -> list[dict[str, Any]]:
    """An Anthropic history: ``first``, then ``results`` Read calls, each answered by ``size``
    lines of output."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
    for n in range(results):
        call = {"type": "tool_use", "id": f"toolu_{n:02d}", "name": "Read", "input": {"file_path": f"/f{n}"}}
        result = {
            "type": "tool_result",
            "tool_use_id": f"toolu_{n:02d}",
            "content": big_text(size, f"file{n}"),
        }
        messages.append({"role": "assistant", "content": [call]})
        messages.append({"role": "user", "content": [result]})
    return messages
