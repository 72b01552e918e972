"""A scripted Gemini API on loopback, for the proxy tests: the scripted upstream's recording
(:mod:`tests.upstream_server`), speaking ``generateContent``, ``streamGenerateContent`` (an SSE
stream with ``?alt=sse``, else one JSON array, each in many small chunks split inside events and
inside UTF-8 chars), ``countTokens`` and the model list.

A request's answer is a short text naming how many chars its body had, so a test sees what the
model was sent. ``GET /_upstream/requests`` (and :meth:`ScriptedGemini.requests`) gives what it
recorded, each request's ``query`` as it came.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from tests.upstream_server import Handler, ScriptedUpstream


class GeminiHandler(Handler):
    """The scripted upstream's handler, answering as the Gemini API does."""

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        if path == "/_upstream/requests" or "/models" not in path:
            super().do_GET()
            return
        entry = self._record(b"")
        name = path.rsplit("/", 1)[-1]
        model = {"name": f"models/{name}", "displayName": "Scripted ünïcode", "inputTokenLimit": 1_048_576}
        self._json(entry, 200, {"models": [model]} if name == "models" else model)

    def _answer(self, entry: dict[str, Any], request: dict[str, Any]) -> None:
        model, _, method = entry["path"].rsplit("/", 1)[-1].partition(":")
        size = len(entry["body"])
        if method == "countTokens":
            self._json(entry, 200, {"totalTokens": size // 4})
        elif method == "generateContent":
            self._json(entry, 200, response(model, f"read {size} chars", size))
        elif method == "streamGenerateContent":
            self._stream_gemini(entry, model, size, "alt=sse" in entry["query"].split("&"))
        else:
            error = {"error": {"code": 404, "message": f"method {method!r} not found", "status": "NOT_FOUND"}}
            self._json(entry, 404, error)

    def _stream_gemini(self, entry: dict[str, Any], model: str, size: int, sse: bool) -> None:
        pieces = [response(model, f"chunk {i} ünïcödé ✓ of {size} chars ", size) for i in range(30)]
        if sse:  # as Google sends it: "data: JSON" and a blank line, CRLF
            data = b"".join(
                b"data: " + json.dumps(p, ensure_ascii=False).encode() + b"\r\n\r\n" for p in pieces
            )
        else:  # one JSON array, written as it goes
            data = ("[" + ",\r\n".join(json.dumps(p, ensure_ascii=False) for p in pieces) + "]").encode()
        cuts = [*range(0, len(data), 37), len(data)]  # inside events, inside UTF-8 chars
        self._stream(entry, [data[a:b] for a, b in itertools.pairwise(cuts)], 0.001)


def response(model: str, text: str, size: int) -> dict[str, Any]:
    """A ``GenerateContentResponse`` holding ``text``."""
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": size // 4,
            "candidatesTokenCount": 10,
            "totalTokenCount": size // 4 + 10,
        },
        "modelVersion": model,
        "responseId": "scripted",
    }


class ScriptedGemini(ScriptedUpstream):
    """The scripted Gemini API in a thread of the test process: ``url``, ``requests()``, ``close()``."""

    def __init__(self) -> None:
        super().__init__(handler=GeminiHandler)
