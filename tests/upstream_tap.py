"""A TCP tap on loopback: relays every connection to a target and records both directions, so
that a test can read the HTTP/1.1 responses a real client (Claude Code, Codex) received, byte
for byte, without changing a byte of them."""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class Exchange:
    """One connection: what the client sent and what it received."""

    sent: bytearray = field(default_factory=bytearray)
    received: bytearray = field(default_factory=bytearray)


class Tap:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.exchanges: list[Exchange] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            exchange = Exchange()
            self.exchanges.append(exchange)
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, server, exchange.sent), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, exchange.received), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, record: bytearray) -> None:
        try:
            while data := source.recv(65536):
                record += data
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self.listener.close()

    def responses(self) -> list[tuple[str, str, int, bytes]]:
        """``(method, path, status, body)`` of every response received, the body as its bytes
        after HTTP framing (chunked or sized) is taken off."""
        out: list[tuple[str, str, int, bytes]] = []
        for exchange in self.exchanges:
            requests = _requests(bytes(exchange.sent))
            data = bytes(exchange.received)
            pos = 0
            for method, path in requests:
                if pos >= len(data):
                    break
                status, body, pos = _response(data, pos, method == "HEAD")
                out.append((method, path, status, body))
        return out


def _head(data: bytes, pos: int) -> tuple[str, dict[str, str], int]:
    end = data.index(b"\r\n\r\n", pos)
    lines = data[pos:end].decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers, end + 4


def _requests(data: bytes) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(data):
        first, headers, pos = _head(data, pos)
        method, target, _ = first.split(" ", 2)
        pos += int(headers.get("content-length", "0"))
        out.append((method, target.split("?", 1)[0]))
    return out


def _response(data: bytes, pos: int, head_only: bool) -> tuple[int, bytes, int]:
    first, headers, pos = _head(data, pos)
    status = int(first.split(" ", 2)[1])
    if head_only or status in (204, 304) or 100 <= status < 200:
        return status, b"", pos
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            if pos >= len(
                data
            ):  # the client closed before the last chunk (Codex does, once it has read the end)
                return status, bytes(body), pos
            line_end = data.index(b"\r\n", pos)
            size = int(data[pos:line_end].split(b";")[0], 16)
            pos = line_end + 2
            if size == 0:
                pos = data.index(b"\r\n", pos) + 2  # no trailers here
                return status, bytes(body), pos
            body += data[pos : pos + size]
            pos += size + 2
    if "content-length" in headers:
        n = int(headers["content-length"])
        return status, data[pos : pos + n], pos + n
    return status, data[pos:], len(data)
