"""A scripted model server on loopback: the upstream of the proxy tests.

It speaks just enough of Anthropic Messages, OpenAI Chat Completions and OpenAI Responses for
real clients (Claude Code, Codex CLI) and for the tests, records every request it is sent and
every response body it sends, and does what the request's ``model`` asks:

- ``stream``: an SSE stream of the route's kind, in many small chunks with pauses (multibyte
  text included); ``slow``: the same with long pauses (for disconnects); ``load``: a shorter
  one in 20 chunks 5 ms apart (for the load bench);
- ``error-429``, ``error-500``, ``overloaded``: that error, with a body and headers of its own;
- ``gzip``: a JSON answer compressed, with ``content-encoding: gzip``;
- ``echo`` and anything else without the agent's tools: a short answer (JSON or SSE, as the
  request's ``stream`` asks);
- with a read or shell tool among the request's tools, the scripted agent: it reads each of the
  big files (``--files DIR``) one turn at a time with the client's own tool; then, if a tool
  result carries a ``<<ccr:KEY>>`` marker and names a recall tool the request declares (an MCP
  tool such as ``mcp__toolkeep__recall``), calls that tool with that key; else, if a result
  names a saved file (``full output saved to PATH``), reads that file; then it finishes.

Gemini ``generateContent`` and ``streamGenerateContent`` (SSE with ``alt=sse``) are spoken too,
with ``functionCall`` parts for Gemini CLI's ``read_file``.

Run it as ``python tests/upstream_server.py --files DIR`` (prints ``listening on URL``), or in
a test with :class:`ScriptedUpstream`. ``GET /_upstream/requests`` gives what it recorded.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import gzip
import itertools
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SAVED = re.compile(r"full output saved to ([^\]\n]+)\]")
MARKER = re.compile(r"<<ccr:([0-9a-f]{16})>>")
READ_TOOLS = ("Read", "read_file")
SHELL_TOOLS = ("shell", "exec_command", "shell_command", "local_shell")


class Recorder:
    def __init__(self, keep: bool = True) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.keep = keep
        self.count = 0

    def add(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.count += 1
            if self.keep:
                self.requests.append(entry)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as real servers set it: else each small write after the headers waits for the
    # client's delayed ACK (40 ms on Linux), and the first byte of a stream came 40 ms late
    disable_nagle_algorithm = True
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        if self.path == "/_upstream/requests":
            with self.server.recorder.lock:
                data = json.dumps(self.server.recorder.requests).encode()
            self._plain(200, data, [("content-type", "application/json")])
            return
        self._record(b"")
        self._plain(
            200, json.dumps({"object": "list", "data": []}).encode(), [("content-type", "application/json")]
        )

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        entry = self._record(body)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if not isinstance(request, dict):
            self._finish(
                entry,
                400,
                _error_body("invalid_request_error", "not JSON"),
                [("content-type", "application/json")],
            )
            return
        self._answer(entry, request)

    def _record(self, body: bytes) -> dict[str, Any]:
        path, _, query = self.path.partition("?")
        entry: dict[str, Any] = {
            "method": self.command,
            "path": path,
            "query": query,
            "headers": [[k.lower(), v] for k, v in self.headers.items()],
            "body": body.decode("utf-8", "replace"),
            "response": None,
            "status": None,
            "disconnected": False,
        }
        self.server.recorder.add(entry)
        return entry

    # -- answers ---------------------------------------------------------------------------

    def _answer(self, entry: dict[str, Any], request: dict[str, Any]) -> None:
        path = entry["path"]
        model = str(request.get("model", ""))
        kind = (
            "anthropic"
            if path.startswith("/v1/messages")
            else "responses"
            if path.startswith("/v1/responses")
            else "gemini"
            if ":" in path.rsplit("/", 1)[-1]
            else "chat"
        )
        if kind == "gemini":
            model = path.rsplit("/", 1)[-1].split(":")[0]
        if path.endswith((":countTokens", "/count_tokens")):
            if kind == "gemini":
                self._json(entry, 200, {"totalTokens": len(entry["body"]) // 4})
                return

            self._json(entry, 200, {"input_tokens": len(entry["body"]) // 4})
            return
        if path.endswith("/compact"):
            self._json(
                entry,
                200,
                {
                    "id": "cmp_1",
                    "object": "response.compaction",
                    "output": [{"type": "compaction", "encrypted_content": "opaque"}],
                },
            )
            return
        if model in ("error-429", "error-500", "overloaded"):
            status = {"error-429": 429, "error-500": 500, "overloaded": 529}[model]
            kind_name = {
                "error-429": "rate_limit_error",
                "error-500": "api_error",
                "overloaded": "overloaded_error",
            }[model]
            headers = [("content-type", "application/json"), ("retry-after", "7"), ("x-scripted", model)]
            self._finish(entry, status, _error_body(kind_name, f"scripted {model}"), headers)
            return
        if model == "gzip":
            data = gzip.compress(json.dumps({"id": "x", "text": "ünïcode " * 200}).encode(), mtime=0)
            self._finish(
                entry, 200, data, [("content-type", "application/json"), ("content-encoding", "gzip")]
            )
            return
        if model == "load":  # for bench/proxy_load.py: 60 deltas in 20 chunks, 5 ms apart
            self._stream(entry, _test_events(kind, 60, 0), 0.005)
            return
        if model in ("stream", "slow"):
            pause = 0.2 if model == "slow" else 0.002
            self._stream(
                entry,
                _test_events(kind, 200 if model == "stream" else 40, 37 if model == "stream" else 0),
                pause,
            )
            return
        step = self._agent_step(kind, request)
        if step is None:
            step = ("text", "ok")
        with self.server.recorder.lock:
            number = self.server.recorder.count
        config = request.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if kind == "gemini" and isinstance(schema, dict):  # Gemini CLI's routing, next-speaker checks
            step = ("text", json.dumps(_instance(schema)))
        if kind == "gemini":
            whole = _gemini_whole(model, step, len(entry["body"]))
            if path.endswith(":streamGenerateContent"):
                self._stream(entry, [_sse(None, whole)], 0.0)
            else:
                self._json(entry, 200, whole)
        elif request.get("stream"):
            self._stream(entry, _events(kind, model, step, len(entry["body"]), number), 0.0)
        else:
            self._json(entry, 200, _whole(kind, model, step, len(entry["body"]), number))

    def _agent_step(self, kind: str, request: dict[str, Any]) -> tuple[str, Any] | None:
        """The scripted agent's next action, from the request alone; None without its tools."""
        tools = _tool_names(request.get("tools"))
        recall = next((t for t in tools if str(t).endswith("__recall")), None)
        if recall is not None and (step := _recall_step(kind, request, recall)) is not None:
            return step
        files = self.server.files
        if not files:
            return None
        read = next((t for t in tools if t in READ_TOOLS), None)
        shell = next((t for t in tools if t in SHELL_TOOLS), None)
        if read is None and shell is None:
            return None
        history = {"anthropic": "messages", "gemini": "contents"}.get(kind, "input")
        history = request.get(history)
        text = json.dumps(history)
        done = sum(1 for n in range(len(files)) if f"call_script_{n:02d}" in text)
        if done < len(files):
            return ("call", (read, shell, f"call_script_{done:02d}", str(files[done])))
        if "call_script_recall" in text:
            return ("text", f"done: read {done} files and recalled the cut text")
        if "call_script_saved" in text:
            return ("text", f"done: read {done} files and the saved file")
        results = _results_text(kind, history)
        way_back = _recall_named(results, [t for t in tools if t not in (read, shell)])
        if way_back is not None:
            return ("recall", way_back)
        saved = SAVED.findall(results)
        if saved:
            return ("call", (read, shell, "call_script_saved", saved[0].strip()))
        return ("text", f"done: read {done} files; no shortened result named a file")

    # -- writing ---------------------------------------------------------------------------

    def _json(self, entry: dict[str, Any], status: int, value: Any) -> None:
        self._finish(entry, status, json.dumps(value).encode(), [("content-type", "application/json")])

    def _plain(self, status: int, data: bytes, headers: list[tuple[str, str]]) -> None:
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _finish(
        self, entry: dict[str, Any], status: int, data: bytes, headers: list[tuple[str, str]]
    ) -> None:
        entry["status"] = status
        entry["response"] = base64.b64encode(data).decode()
        self._plain(status, data, headers)

    def _stream(self, entry: dict[str, Any], chunks: list[bytes], pause: float) -> None:
        entry["status"] = 200
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        sent = bytearray()
        try:
            for chunk in chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                sent += chunk
                if pause:
                    time.sleep(pause)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            entry["disconnected"] = True
            self.close_connection = True
        entry["response"] = base64.b64encode(bytes(sent)).decode()


class Server(ThreadingHTTPServer):
    daemon_threads = True

    request_queue_size = 128

    def __init__(
        self, port: int, files: list[Path], record: bool = True, handler: type[Handler] = Handler
    ) -> None:
        super().__init__(("127.0.0.1", port), handler)
        self.recorder = Recorder(record)
        self.files = files


def _error_body(kind: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


def _tool_names(tools: Any, namespace: str = "") -> list[str]:
    """Every tool name a request declares (Gemini's inside ``functionDeclarations``); a tool in a
    Responses namespace (Codex: ``mcp__toolkeep``) as ``NAMESPACE/NAME``."""
    out: list[str] = []
    for tool in tools or []:
        if not isinstance(tool, dict):
            continue
        name = tool.get("name")
        if tool.get("type") == "namespace" and isinstance(name, str):
            out += _tool_names(tool.get("tools"), name)
            continue
        if isinstance(name, str):
            out.append(f"{namespace}/{name}" if namespace else name)
        out += _tool_names(tool.get("functionDeclarations") or tool.get("function_declarations"))
    return out


def _shown(tool: str) -> list[str]:
    """The names a text may call ``tool`` by: a namespaced one as ``NAMESPACE__NAME`` or ``NAME``."""
    namespace, _, name = tool.rpartition("/")
    return [f"{namespace}__{name}", name] if namespace else [tool]


def _recall_named(results: str, tools: list[str]) -> tuple[str, str] | None:
    """(tool, key) from the first shortened result that names a declared tool beside its marker:
    what a model reads out of the shortened text (a tool whose name says recall first)."""
    for text in results.split("\n"):
        keys = MARKER.findall(text)
        named = sorted(
            ((t, shown) for t in tools for shown in _shown(t) if shown in text),
            key=lambda pair: ("recall" not in pair[1], -len(pair[1])),
        )
        if keys and named:
            return named[0][0], keys[0]
    return None


def _results_text(kind: str, history: Any) -> str:
    """The text of every tool result in ``history``, one result a line."""
    out: list[str] = []
    for item in history or []:
        if not isinstance(item, dict):
            continue
        if kind == "gemini":
            out.extend(
                json.dumps(p["functionResponse"].get("response"))
                for p in item.get("parts") or []
                if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
            )
        elif kind == "responses" and item.get("type") in ("function_call_output", "custom_tool_call_output"):
            out.append(json.dumps(item.get("output")))
        elif kind == "anthropic" and isinstance(item.get("content"), list):
            out.extend(
                json.dumps(b.get("content"))
                for b in item["content"]
                if isinstance(b, dict) and b.get("type") == "tool_result"
            )
        elif item.get("role") == "tool":
            out.append(json.dumps(item.get("content")))
    return "\n".join(out)


def _sse(event: str | None, data: Any) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _test_events(kind: str, n: int, size: int) -> list[bytes]:
    """A stream of ``n`` deltas in chunks of ``size`` bytes (0: 20 chunks), split at odd places
    (inside an event, inside a UTF-8 char)."""
    text = [f"chunk {i} ünïcödé ✓ " for i in range(n)]
    if kind == "anthropic":
        events = [
            _sse(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_s",
                        "type": "message",
                        "role": "assistant",
                        "model": "stream",
                        "content": [],
                        "stop_reason": None,
                        "usage": {"input_tokens": 1, "output_tokens": 1},
                    },
                },
            )
        ]
        events += [
            _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
            )
            for t in text
        ]
        events.append(_sse("message_stop", {"type": "message_stop"}))
    elif kind == "responses":
        events = [
            _sse("response.output_text.delta", {"type": "response.output_text.delta", "delta": t})
            for t in text
        ]
        events.append(
            _sse(
                "response.completed",
                {"type": "response.completed", "response": {"id": "resp_s", "status": "completed"}},
            )
        )
    else:
        events = [_sse(None, {"choices": [{"index": 0, "delta": {"content": t}}]}) for t in text]
        events.append(_sse(None, "[DONE]"))
    data = b"".join(events)
    cuts = [*list(range(0, len(data), size or len(data) // 20 + 1)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(cuts)]


def _recall_step(kind: str, request: dict[str, Any], recall: str) -> tuple[str, Any] | None:
    """With toolkeep's recall among the tools (an MCP server's, ``mcp__toolkeep__recall``) and a
    marker in the prompt: recall it once, then say so."""
    history = request.get("messages") if kind == "anthropic" else request.get("input")
    text = json.dumps(history)
    key = re.search(r"recall <<ccr:([0-9a-f]{16})>>", text)
    if key is None:
        return None
    if "call_script_recall" not in text:
        return ("call", (recall, None, "call_script_recall", key[1]))
    return ("text", "done: recalled the original")


def _call_arguments(read: str | None, shell: str | None, path: str) -> tuple[str, dict[str, Any]]:
    if read is not None and read.endswith("__recall"):
        return read, {"key": path}
    if read is not None:
        return read, {"file_path": path}
    assert shell is not None
    if shell == "exec_command":
        return shell, {"cmd": f"cat {path}"}
    if shell == "shell_command":
        return shell, {"command": f"cat {path}"}
    return shell, {"command": ["cat", path]}


def _call(step: tuple[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(call id, tool, arguments) of a step that calls a tool: a read or a recall."""
    what, value = step
    if what == "recall":
        return "call_script_recall", value[0], {"key": value[1]}
    return (value[2], *_call_arguments(value[0], value[1], value[3]))


def _instance(schema: dict[str, Any]) -> Any:
    """The smallest value that fits a (Gemini) JSON schema: first enum value, 1, "ok", ..."""
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        return {k: _instance(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    return {"integer": 1, "number": 1, "boolean": False}.get(kind, "ok")


def _gemini_whole(model: str, step: tuple[str, Any], size: int) -> dict[str, Any]:
    """A Gemini ``GenerateContentResponse``: the text, or one ``functionCall`` part."""
    what, value = step
    if what == "text":
        part: dict[str, Any] = {"text": value}
    else:
        call_id, name, args = _call(step)
        part = {"functionCall": {"id": call_id, "name": name, "args": args}}
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": size // 4,
            "candidatesTokenCount": 10,
            "totalTokenCount": size // 4 + 10,
        },
        "modelVersion": model,
    }


def _whole(kind: str, model: str, step: tuple[str, Any], size: int, number: int) -> Any:
    what, value = step
    if kind == "anthropic":
        if what == "text":
            content = [{"type": "text", "text": value}]
        else:
            call_id, name, args = _call(step)
            content = [{"type": "tool_use", "id": call_id, "name": name, "input": args}]
        return {
            "id": f"msg_{number:04d}", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": "end_turn" if what == "text" else "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": size // 4, "output_tokens": 10},
        }  # fmt: skip
    if kind == "responses":
        return {
            "id": f"resp_{number:04d}",
            "object": "response",
            "status": "completed",
            "model": model,
            "output": [_response_item(step, number)],
            "usage": {"input_tokens": size // 4, "output_tokens": 10, "total_tokens": size // 4 + 10},
        }
    message: dict[str, Any] = {"role": "assistant", "content": value if what == "text" else None}
    if what != "text":
        call_id, name, args = _call(step)
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        ]
    return {
        "id": f"chatcmpl-{number:04d}",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "stop" if what == "text" else "tool_calls"}
        ],
        "usage": {"prompt_tokens": size // 4, "completion_tokens": 10, "total_tokens": size // 4 + 10},
    }


def _response_item(step: tuple[str, Any], number: int) -> dict[str, Any]:
    what, value = step
    if what == "text":
        return {
            "type": "message",
            "id": f"msg_{number:04d}",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": value, "annotations": []}],
        }
    call_id, name, args = _call(step)
    namespace, _, short = name.rpartition("/")
    return {
        "type": "function_call",
        "id": "fc_" + call_id,
        "call_id": call_id,
        **({"namespace": namespace} if namespace else {}),
        "name": short,
        "arguments": json.dumps(args),
        "status": "completed",
    }


def _events(kind: str, model: str, step: tuple[str, Any], size: int, number: int) -> list[bytes]:
    _what, value = step
    if kind == "anthropic":
        whole = _whole(kind, model, step, size, number)
        start = dict(whole, content=[], stop_reason=None)
        out = [_sse("message_start", {"type": "message_start", "message": start})]
        block = whole["content"][0]
        if block["type"] == "text":
            out.append(
                _sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            out.append(
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": block["text"]},
                    },
                )
            )
        else:
            out.append(
                _sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": dict(block, input={})},
                )
            )
            args = json.dumps(block["input"])
            for i in range(0, len(args), 20):
                out.append(
                    _sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "input_json_delta", "partial_json": args[i : i + 20]},
                        },
                    )
                )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        out.append(
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": 10},
                },
            )
        )
        out.append(_sse("message_stop", {"type": "message_stop"}))
        return out
    if kind == "responses":
        item = _response_item(step, number)
        response = {
            "id": f"resp_{number:04d}",
            "object": "response",
            "created_at": 0,
            "status": "in_progress",
            "model": model,
            "output": [],
        }
        out = [
            _sse("response.created", {"type": "response.created", "sequence_number": 0, "response": response})
        ]
        out.append(
            _sse(
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": 1,
                    "output_index": 0,
                    "item": dict(item, status="in_progress"),
                },
            )
        )
        if item["type"] == "message":
            out.append(
                _sse(
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "sequence_number": 2,
                        "item_id": item["id"],
                        "output_index": 0,
                        "content_index": 0,
                        "delta": value,
                    },
                )
            )
        out.append(
            _sse(
                "response.output_item.done",
                {"type": "response.output_item.done", "sequence_number": 3, "output_index": 0, "item": item},
            )
        )
        done = dict(
            response,
            status="completed",
            output=[item],
            usage={
                "input_tokens": size // 4,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": size // 4 + 10,
            },
        )
        out.append(
            _sse("response.completed", {"type": "response.completed", "sequence_number": 4, "response": done})
        )
        return out
    whole = _whole(kind, model, step, size, number)
    message = whole["choices"][0]["message"]
    delta = {"role": "assistant", "content": message["content"]}
    if "tool_calls" in message:
        delta["tool_calls"] = [dict(message["tool_calls"][0], index=0)]
    out = [
        _sse(
            None,
            {
                "id": whole["id"],
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            },
        )
    ]
    out.append(
        _sse(
            None,
            {
                "id": whole["id"],
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": whole["choices"][0]["finish_reason"]}],
            },
        )
    )
    out.append(_sse(None, "[DONE]"))
    return out


class ScriptedUpstream:
    """The server in a thread of the test process: ``url``, ``requests()``, ``close()``."""

    def __init__(self, files: list[Path] | None = None, handler: type[Handler] = Handler) -> None:
        self.server = Server(0, files or [], handler=handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def requests(self) -> list[dict[str, Any]]:
        with self.server.recorder.lock:
            return list(self.server.recorder.requests)

    def clear(self) -> None:
        with self.server.recorder.lock:
            self.server.recorder.requests.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--files", type=Path, help="Directory of the big files the agent reads.")
    parser.add_argument("--no-record", action="store_true", help="Keep no request (for load runs).")
    args = parser.parse_args()
    files = sorted(args.files.glob("*.txt")) if args.files else []
    server = Server(args.port, files, record=not args.no_record)
    sys.stderr.write(f"listening on http://127.0.0.1:{server.server_address[1]}\n")
    sys.stderr.flush()
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
