"""Headless Chromium over the DevTools protocol on a pipe, for the inspector's tests, bench and
pictures (standard library only; the browser is Debian's ``chromium``, or ``$CHROMIUM``).

>>> with Chromium() as browser:                                   # doctest: +SKIP
...     page = browser.open("file:///tmp/report.html")
...     page.evaluate("document.title")
...     png = page.screenshot()

The browser reads commands on its fd 3 and answers on fd 4 (``--remote-debugging-pipe``), one
JSON message each, ended by a NUL byte: no port is opened. Each page records its console
errors, uncaught exceptions and the network requests it makes (:class:`Page`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["BrowserError", "Chromium", "Page", "find_chromium"]


class BrowserError(RuntimeError):
    """The browser is missing, died, or answered a command with an error."""


def find_chromium() -> str | None:
    """The Chromium executable: ``$CHROMIUM``, else ``chromium`` or ``chromium-browser`` on PATH."""
    named = os.environ.get("CHROMIUM")
    if named:
        return named
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    """One headless Chromium, driven over the DevTools pipe (a context manager)."""

    def __init__(self, width: int = 1280, height: int = 900, executable: str | None = None) -> None:
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserError("chromium not found: apt-get install chromium, or set CHROMIUM")
        self.width, self.height = width, height
        self._profile = tempfile.mkdtemp(prefix="toolkeep-chromium-")
        commands_r, self._commands = os.pipe()
        self._answers, answers_w = os.pipe()

        def fds() -> None:  # in the child: the protocol's fds 3 and 4, kept across exec
            commands, answers = os.dup(commands_r), os.dup(answers_w)  # clear of 3 and 4
            for fd, number in ((commands, 3), (answers, 4)):
                os.dup2(fd, number)
                os.set_inheritable(number, True)

        self._proc = subprocess.Popen(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds,
            close_fds=False,
        )
        os.close(commands_r)
        os.close(answers_w)
        self._next = 0
        self._lock = threading.Lock()
        self._waiting: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self._listeners: dict[str, Callable[[dict[str, Any]], None]] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the browser and remove its profile."""
        if self._proc.poll() is None:
            with contextlib.suppress(BrowserError):
                self.send("Browser.close", timeout=5)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for fd in (self._commands, self._answers):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._profile, ignore_errors=True)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 60) -> dict[str, Any]:  # fmt: skip
        """Send one command and wait for its answer's ``result``."""
        with self._lock:
            self._next += 1
            number = self._next
            done = threading.Event()
            box: list[dict[str, Any]] = []
            self._waiting[number] = (done, box)
        message: dict[str, Any] = {"id": number, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            os.write(self._commands, json.dumps(message).encode() + b"\0")
        except OSError as exc:
            raise BrowserError(f"chromium is gone ({exc})") from None
        if not done.wait(timeout):
            raise BrowserError(f"no answer to {method} within {timeout} s")
        answer = box[0]
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error'].get('message')}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def open(self, url: str) -> Page:
        """A new tab, its events recorded, at ``url`` once loaded."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        self._listeners[session] = page._event
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        viewport = {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False}
        self.send("Emulation.setDeviceMetricsOverride", viewport, session=session)
        page.goto(url)
        return page

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._answers, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                for done, _ in list(self._waiting.values()):
                    done.set()
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    waiting = self._waiting.pop(message["id"], None)
                    if waiting is not None:
                        waiting[1].append(message)
                        waiting[0].set()
                else:
                    listener = self._listeners.get(message.get("sessionId", ""))
                    if listener is not None:
                        listener(message)


class Page:
    """One tab: what it logged (``errors``), the requests it made (``requests``), and commands."""

    def __init__(self, browser: Chromium, session: str) -> None:
        self.browser = browser
        self.session = session
        self.errors: list[str] = []
        """Console errors, uncaught exceptions and error log entries, as text."""
        self.requests: list[str] = []
        """URLs of every request the page made, its own document included."""
        self._loaded = threading.Event()

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60) -> dict[str, Any]:
        return self.browser.send(method, params, self.session, timeout)

    def goto(self, url: str, timeout: float = 120) -> None:
        """Navigate to ``url`` and wait for its load event."""
        self._loaded.clear()
        self.send("Page.navigate", {"url": url})
        if not self._loaded.wait(timeout):
            raise BrowserError(f"{url} did not load within {timeout} s")

    def evaluate(self, expression: str, timeout: float = 60) -> Any:
        """The value of a JavaScript expression (a promise is awaited)."""
        answer = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout,
        )
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression[:60]}: {answer['exceptionDetails'].get('text')}")
        return answer.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"still false after {timeout} s: {expression[:80]}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the middle of the first match of ``selector``."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        if box is None:
            raise BrowserError(f"nothing matches {selector}")
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                {
                    "type": kind,
                    "x": x,
                    "y": y,
                    "button": "left",
                    "clickCount": 0 if kind == "mouseMoved" else 1,
                },
            )

    def screenshot(self, full_page: bool = False) -> bytes:
        """A PNG of the viewport (or of the whole page)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
            params["captureBeyondViewport"] = True
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])

    def _event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Page.loadEventFired":
            self._loaded.set()
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(str(details.get("exception", {}).get("description") or details.get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(
                " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            )
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(str(params["entry"].get("text")))
