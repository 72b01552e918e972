"""``toolkeep proxy`` under load on loopback: what it adds to the time to the first and the last
byte of a streamed answer, against the same load sent to the upstream directly.

C conversations (50 by default) run at once for S seconds (60), each an agent session that grows
by one tool call and a ~6 KB result a turn (a new conversation every 20 turns), every request a
streaming Anthropic Messages request answered by the scripted model server
(tests/upstream_server.py: about 9 KB of SSE in 20 chunks 5 ms apart). The same load runs directly
against the upstream, then through one proxy per policy named (``--policy``, ``economy`` by default;
several, comma-separated, compare them), and through one that forwards them as they are (to a path
it does not prepare: what relaying alone costs); per request the times to the first and the last
body byte are taken, after a few unmeasured requests to each.

Three loads: one conversation alone; C conversations back to back, each sending its next request
as soon as the last answer ends (on a 2-core machine that the load generator, the upstream and the
proxy share, this saturates the CPUs, so what it adds is mostly queueing for them); and C
conversations paced, each waiting ``--think`` seconds (1) between an answer and its next request,
as an agent waits for its model and its tools, so the machine is not saturated and what the proxy
adds is its own work. The CPU time the proxy and the upstream processes take (user and system,
from ``/proc``) is divided by the requests they served: a figure of the proxy's cost that no
other load on the machine changes much.

Also checked, once each: a proxy killed mid-stream gives the client an error, not a hang, and
every original it archived is still there; 429, 500 and 529 answers pass through with their
status and body.

    python bench/proxy_load.py [--seconds 60] [--conversations 50] [--think 1] [--policy economy,spec] [--write]

``--write`` records the table in bench/results.md, section "Proxy". Bounded: every phase stops by
itself after S seconds, and every request has a timeout.

``--peers`` runs instead toolkeep against its peers in one run: ``toolkeep proxy``, Headroom's
proxy and LiteLLM's (each from a venv of its own under ~/.cache/toolkeep-bench, made with the
pinned version on first use) and direct, against one scripted upstream that records what it gets,
with the real trajectories of ../shared/bench-data replayed request by request. Per way: added
time to the first byte (p50, p99) for one conversation alone and for ``--at-once`` (20) at once,
throughput at saturation, CPU per request, peak RSS, the cache-aware cost of what reached the
upstream over direct's, and the upstream requests that break the provider's rules; the versions
and the commands. ``--write`` records it in section "Proxy against peers".

    python bench/proxy_load.py --peers [--ways toolkeep,headroom,litellm] [--largest-kb 300] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from tests.upstream_proxy import ProxyProcess  # noqa: E402
from tests.upstream_server import Handler, Recorder, Server  # noqa: E402

TURN_CHARS = 6_000
TURNS = 20
PREPARED = "/v1/messages"
RELAYED = "/v1/messages/relay"
"""A path the proxy forwards as it is (as it does ``count_tokens``), which the scripted upstream
answers with the same stream: what relaying alone costs, beside relaying and preparing."""
WARM_UP = 3
"""Requests of a conversation of its own sent before the measured loads, so that what the first
request costs once (imports, the first connection) is not in them."""


def start_upstream(
    *args: str, script: Path = REPO / "tests" / "upstream_server.py"
) -> tuple[subprocess.Popen[bytes], str]:
    """``python SCRIPT ARGS`` (by default the scripted upstream keeping no request) and the URL it
    says it listens on."""
    process = subprocess.Popen(
        [sys.executable, str(script), *(args or ["--no-record"])], stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    line = process.stderr.readline().decode()
    match = re.match(r"listening on (\S+)", line)
    if not match:
        process.kill()
        raise SystemExit(f"the scripted upstream did not start: {line!r}")
    return process, match.group(1)


def history(conversation: int, turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"conversation {conversation}: fix the bug"}
    ]
    for t in range(turns):
        text = "".join(
            f"conv {conversation} turn {t} line {i}: output of the tool\n" for i in range(TURN_CHARS // 45)
        )
        call = {
            "type": "tool_use",
            "id": f"toolu_{conversation}_{t}",
            "name": "Read",
            "input": {"file_path": f"/f{t}"},
        }
        result = {"type": "tool_result", "tool_use_id": f"toolu_{conversation}_{t}", "content": text}
        messages += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    return messages


async def conversation(
    client: httpx.AsyncClient,
    url: str,
    number: int,
    deadline: float,
    times: list[tuple[float, float]],
    errors: list[str],
    think: float = 0.0,
    path: str = PREPARED,
) -> None:
    turn, generation = 0, 0
    if think:  # the paced conversations start spread over one think time, not all at once
        await asyncio.sleep(think * number / 50 % think)
    while time.monotonic() < deadline:
        body = {
            "model": "load",
            "stream": True,
            "max_tokens": 100,
            "messages": history(number * 1_000 + generation, turn + 1),
        }
        started = time.perf_counter()
        first = None
        try:
            async with client.stream("POST", f"{url}{path}", json=body) as response:
                async for chunk in response.aiter_raw():
                    if first is None and chunk:
                        first = time.perf_counter() - started
                if response.status_code != 200:
                    errors.append(str(response.status_code))
        except httpx.HTTPError as exc:
            errors.append(type(exc).__name__)
            await asyncio.sleep(0.1)
            continue
        times.append((first if first is not None else float("nan"), time.perf_counter() - started))
        if think:
            await asyncio.sleep(think)
        turn += 1
        if turn == TURNS:
            turn, generation = 0, generation + 1


async def load(
    url: str, conversations: int, seconds: float, think: float = 0.0, path: str = PREPARED
) -> tuple[list[tuple[float, float]], list[str], float]:
    times: list[tuple[float, float]] = []
    errors: list[str] = []
    limits = httpx.Limits(max_connections=conversations * 2, max_keepalive_connections=conversations * 2)
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0), limits=limits) as client:
        started = time.monotonic()
        deadline = started + seconds
        await asyncio.gather(
            *(
                conversation(client, url, n, deadline, times, errors, think, path)
                for n in range(conversations)
            )
        )
        elapsed = time.monotonic() - started
    return times, errors, elapsed


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time ``pid`` has taken so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Measured:
    """One load's requests (first and last byte times), errors, duration, and the CPU time the
    proxy (if any) and the upstream took while it ran."""

    def __init__(self, upstream_pid: int, proxy_pid: int | None) -> None:
        self.pids = {"upstream": upstream_pid, "proxy": proxy_pid}
        self.before = {k: cpu_seconds(p) for k, p in self.pids.items() if p is not None}
        self.times: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.elapsed = 0.0
        self.cpu: dict[str, float] = {}

    def run(
        self, url: str, conversations: int, seconds: float, think: float = 0.0, path: str = PREPARED
    ) -> Measured:
        self.times, self.errors, self.elapsed = asyncio.run(load(url, conversations, seconds, think, path))
        self.cpu = {k: cpu_seconds(p) - self.before[k] for k, p in self.pids.items() if p is not None}
        return self

    def cpu_ms(self, process: str) -> float:
        """CPU ms ``process`` took per request of this load."""
        return (
            1_000 * self.cpu[process] / len(self.times)
            if process in self.cpu and self.times
            else float("nan")
        )


def warm_up(url: str, path: str = PREPARED) -> None:
    """:data:`WARM_UP` requests of a conversation no load has, unmeasured."""
    for turn in range(WARM_UP):
        body = {"model": "load", "stream": True, "max_tokens": 100, "messages": history(999_998, turn + 1)}
        httpx.post(f"{url}{path}", json=body, timeout=60).raise_for_status()


def served_by(pid: int) -> str:
    """The event loop and the HTTP parser uvicorn serves the proxy with, as process ``pid`` has
    them loaded."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    loop = "uvloop" if "/uvloop/" in maps else "asyncio"
    parser = "httptools" if "/httptools/" in maps else "h11"
    return f"uvicorn on {loop}, parsing with {parser}"


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def killed_mid_stream(upstream: str) -> str:
    """A proxy SIGKILLed while streaming: the client's error, and the archive checked after."""
    from toolkeep.shorten import archive_key
    from toolkeep.stores import FileStore

    with tempfile.TemporaryDirectory() as root:
        process = ProxyProcess("--anthropic-upstream", upstream, "--workspace", root)
        h = history(99_999, 6)
        httpx.post(f"{process.url}/v1/messages", json={"model": "echo", "messages": h}, timeout=60)
        store = FileStore(Path(root) / "archive")
        originals = [m["content"][0]["content"] for m in h[2::2]]
        archived = [o for o in originals if store.get(archive_key(o)) == o]
        outcome = "no error"
        started = time.monotonic()
        body = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        try:
            with httpx.stream("POST", f"{process.url}/v1/messages", json=body, timeout=30) as response:
                chunks = response.iter_raw()
                next(chunks)
                os.kill(process.process.pid, signal.SIGKILL)
                for _ in chunks:
                    pass
        except httpx.HTTPError as exc:
            outcome = f"{type(exc).__name__} after {time.monotonic() - started:.1f} s"
        process.stop()
        after = FileStore(Path(root) / "archive")
        kept = sum(after.get(archive_key(o)) == o for o in archived)
        return f"the client got {outcome}; {kept} of the {len(archived)} originals archived before the kill intact after it"


def errors_pass(upstream: str) -> str:
    with (
        tempfile.TemporaryDirectory() as root,
        ProxyProcess("--anthropic-upstream", upstream, "--workspace", root) as p,
    ):
        got = []
        for model in ("error-429", "error-500", "overloaded"):
            r = httpx.post(
                f"{p.url}/v1/messages", json={"model": model, "messages": [{"role": "user", "content": "x"}]}
            )
            d = httpx.post(
                f"{upstream}/v1/messages",
                json={"model": model, "messages": [{"role": "user", "content": "x"}]},
            )
            got.append(f"{r.status_code} ({'same body' if r.content == d.content else 'BODY DIFFERS'})")
        return ", ".join(got)


# -- against peers ---------------------------------------------------------------------------------

DATA = REPO.parent / "shared" / "bench-data" / "anthropic"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolkeep-bench"
PEERS: dict[str, tuple[str, str, str]] = {  # name: (what pip installs, its distribution, pinned version)
    "headroom": ("headroom-ai[proxy]", "headroom-ai", "0.42.0"),
    "litellm": ("litellm[proxy]", "litellm", "1.106.12"),
}
"""The peers' pins: the newest releases whose ``[proxy]`` extra installs from PyPI (litellm
1.108 and later name a ``litellm-proxy-extras`` or ``litellm-proxy`` release that is not there)."""
WAYS = ("toolkeep", "headroom", "litellm")
RESUME = "continue"
KEY = "sk-toolkeep-bench-0123456789abcdef0123456789abcdef"
"""The key every client sends (LiteLLM's master key: it refuses to start without one)."""


def peer_venv(name: str, install: bool) -> tuple[Path | None, str]:
    """The venv of peer ``name`` under :data:`CACHE` with its pinned version (made and installed
    when ``install``), and the command that installs it; ``None`` and why, when there is none."""
    spec, dist, version = PEERS[name]
    venv = CACHE / name
    python = venv / "bin" / "python"
    shown = f"~/.cache/toolkeep-bench/{name}"
    command = f"python -m venv {shown} && {shown}/bin/pip install '{spec.replace(']', f']=={version}')}'"
    probe = [str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"]
    have = subprocess.run(probe, capture_output=True, text=True, check=False) if python.exists() else None
    if have is not None and have.stdout.strip() == version:
        return venv, command
    if not install:
        return None, f"{dist} {version} is not installed in {venv} (run without --no-install: {command})"
    CACHE.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "install", "-q", spec.replace("]", f"]=={version}")]
    done = subprocess.run(pip, capture_output=True, text=True, check=False)
    if done.returncode:
        return None, f"installing {spec}=={version} failed: {done.stderr.strip().splitlines()[-1:]}"
    return venv, command


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Peer:
    """One way to the upstream: ``direct``, ``toolkeep`` (``toolkeep proxy``), ``headroom``
    (``headroom proxy``) or ``litellm`` (``litellm --config``, every model passed to the
    Anthropic upstream); ``url``, ``pid`` (``None`` for direct), ``command`` and ``version``."""

    def __init__(self, way: str, upstream: str, root: Path, venv: Path | None = None) -> None:
        self.way, self.pid, self.process, self.proxy = way, None, None, None
        self.url = upstream
        self.command, self.version = "", ""
        if way == "direct":
            return
        if way == "toolkeep":
            from importlib.metadata import version

            self.proxy = ProxyProcess("--anthropic-upstream", upstream, "--workspace", str(root))
            self.url, self.pid = self.proxy.url, self.proxy.process.pid
            self.command = "toolkeep proxy --port 0 --anthropic-upstream UPSTREAM --workspace TMP"
            self.version = f"toolkeep {version('toolkeep')}"
            return
        assert venv is not None
        port = free_port()
        env = {**os.environ, "HOME": str(root), "PYTHONPATH": ""}
        if way == "headroom":
            argv = [str(venv / "bin" / "headroom"), "proxy", "--host", "127.0.0.1", "--port", str(port),
                    "--anthropic-api-url", upstream, "--no-rate-limit"]  # fmt: skip
            env["HEADROOM_TELEMETRY"] = "off"
            ready = "/readyz"
        else:
            config = root / "litellm.yaml"
            config.write_text(
                "model_list:\n  - model_name: '*'\n    litellm_params:\n      model: 'anthropic/*'\n"
                f"      api_base: '{upstream}'\n      api_key: 'bench'\n"
            )
            argv = [str(venv / "bin" / "litellm"), "--config", str(config), "--host", "127.0.0.1",
                    "--port", str(port)]  # fmt: skip
            env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY="False", LITELLM_MASTER_KEY=KEY)
            ready = "/health/liveliness"
        _, dist, pinned = PEERS[way]
        self.version = f"{dist} {pinned}"
        self.command = (
            " ".join(argv)
            .replace(str(root), "TMP")
            .replace(str(venv), f"~/.cache/toolkeep-bench/{way}")
            .replace(upstream, "UPSTREAM")
            .replace(str(port), "PORT")
        )
        if way == "litellm":
            self.command += (
                " (TMP/litellm.yaml: model_name '*' -> model 'anthropic/*', api_base UPSTREAM; "
                "LITELLM_MASTER_KEY set)"
            )
        self.log = (root / "log").open("wb")
        self.process = subprocess.Popen(argv, cwd=root, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.pid, self.url = self.process.pid, f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(
                    f"{way} exited {self.process.returncode}: {(root / 'log').read_text()[-2000:]}"
                )
            try:
                if httpx.get(self.url + ready, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise SystemExit(f"{way} did not answer {ready} within 240 s")

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.log.close()


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process under it."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, grew = {pid}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        grew = bool(more)
        tree |= more
    return sorted(tree)


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid``, the processes under it and the children they have reaped."""
    total = 0.0
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def tree_peak_rss_mb(pid: int) -> float:
    return sum(peak_rss_mb(p) for p in process_tree(pid) if Path(f"/proc/{p}").exists())


def load_trajectories(
    largest_kb: float, count: int, only: str = ""
) -> list[tuple[str, list[dict[str, Any]]]]:
    """The real trajectories of ``../shared/bench-data/anthropic`` no larger than ``largest_kb``
    (or those whose names hold one of the comma-separated ``only``), smallest first, at most
    ``count`` of them (0: all)."""
    names = [n for n in only.split(",") if n]
    files = sorted(
        (f for f in DATA.glob("*.json")
         if (any(n in f.name for n in names) if names else f.stat().st_size <= largest_kb * 1024)),
        key=lambda f: f.stat().st_size,
    )  # fmt: skip
    if not files:
        raise SystemExit(f"no trajectories under {DATA}: this benchmark needs ../shared/bench-data")
    if count:
        files = files[:count]
    return [(f.stem, json.loads(f.read_text())) for f in files]


def tagged(messages: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    """``messages`` with ``tag`` before the first text of the first message (a new conversation
    for every proxy: each load sends every trajectory anew); ``messages`` are not changed."""
    first = dict(messages[0])
    content = first["content"]
    if isinstance(content, str):
        first["content"] = f"{tag} {content}"
    else:
        blocks = list(content)
        at = next((i for i, b in enumerate(blocks) if b.get("type") == "text"), None)
        if at is None:
            blocks.insert(0, {"type": "text", "text": tag})
        else:
            blocks[at] = {**blocks[at], "text": f"{tag} {blocks[at]['text']}"}
        first["content"] = blocks
    return [first, *messages[1:]]


def conversation_requests(messages: list[dict[str, Any]], turns: int) -> list[list[dict[str, Any]]]:
    """The histories a client sent in ``messages``: the one before each assistant message (at most
    ``turns`` of them, 0: all), then, where the whole trajectory is replayed and ends with the
    model's message, the history resumed with a user's "continue": the run was cut after that
    message, so its tool calls, if any, never got their results (the request is then broken)."""
    ends = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 0]
    cut = ends[:turns] if turns else ends
    histories = [messages[:i] for i in cut]
    if len(cut) == len(ends) and messages[-1].get("role") == "assistant":
        histories.append([*messages, {"role": "user", "content": RESUME}])
    return histories


async def replay_conversations(
    url: str,
    plan: list[tuple[str, list[list[dict[str, Any]]]]],
    workers: int,
    think: float,
    deadline: float,
    repeat: bool,
) -> tuple[list[float], list[str], int, float]:
    """``plan`` (tag, histories) played by ``workers`` at once, each taking the next conversation
    when its last one ends (``repeat``: anew with a new tag, until ``deadline``); each request
    streamed, ``think`` seconds apart. First byte times (s), errors, requests, seconds."""
    firsts: list[float] = []
    errors: list[str] = []
    queue = list(range(len(plan)))
    rounds = [0]
    limits = httpx.Limits(max_connections=workers * 2, max_keepalive_connections=workers * 2)

    async def worker(client: httpx.AsyncClient) -> None:
        while time.monotonic() < deadline:
            if not queue:
                if not repeat:
                    return
                rounds[0] += 1
                queue.extend(range(len(plan)))
            tag, histories = plan[queue.pop(0)]
            tag = f"{tag} r{rounds[0]}" if rounds[0] else tag
            for history in histories:
                if time.monotonic() >= deadline:
                    return
                body = json.dumps(
                    {"model": "load", "stream": True, "max_tokens": 100, "messages": tagged(history, tag)},
                    ensure_ascii=False,
                ).encode()
                started = time.perf_counter()
                first = None
                try:
                    async with client.stream(
                        "POST", f"{url}{PREPARED}", content=body,
                        headers={"content-type": "application/json", "x-api-key": KEY,
                                 "anthropic-version": "2023-06-01"},
                    ) as response:  # fmt: skip
                        async for chunk in response.aiter_raw():
                            if first is None and chunk:
                                first = time.perf_counter() - started
                        if response.status_code != 200:
                            errors.append(str(response.status_code))
                            continue
                except httpx.HTTPError as exc:
                    errors.append(type(exc).__name__)
                    continue
                firsts.append(first if first is not None else float("nan"))
                if think:
                    await asyncio.sleep(think)

    async with httpx.AsyncClient(timeout=httpx.Timeout(120.0), limits=limits) as client:
        started = time.monotonic()
        await asyncio.gather(*(worker(client) for _ in range(workers)))
        elapsed = time.monotonic() - started
    return firsts, errors, len(firsts) + len(errors), elapsed


class RecordingHandler(Handler):
    """The scripted upstream's handler, which also appends every POST body it is sent to the
    file that ``GET /_bench/record/NAME`` named (one JSON string a line)."""

    def do_GET(self) -> None:
        if self.path.startswith("/_bench/record/"):
            name = self.path.rsplit("/", 1)[1]
            recorder: Any = self.server.recorder
            with recorder.lock:
                if recorder.file is not None:
                    recorder.file.close()
                recorder.file = (recorder.folder / f"{name}.jsonl").open("a", encoding="utf-8")
            self._plain(200, b"{}", [("content-type", "application/json")])
            return
        super().do_GET()


class FileRecorder(Recorder):
    def __init__(self, folder: Path) -> None:
        super().__init__(keep=False)
        self.folder = folder
        self.file: Any = None

    def add(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.count += 1
            if self.file is not None and entry["method"] == "POST" and entry["path"] == PREPARED:
                self.file.write(json.dumps(entry["body"], ensure_ascii=False) + "\n")
                self.file.flush()


def serve_recording_upstream(folder: Path) -> None:
    """The scripted upstream (tests/upstream_server.py) with :class:`RecordingHandler`."""
    server = Server(0, [], record=False, handler=RecordingHandler)
    server.recorder = FileRecorder(folder)
    sys.stderr.write(f"listening on http://127.0.0.1:{server.server_address[1]}\n")
    sys.stderr.flush()
    server.serve_forever()


def recorded(folder: Path, name: str) -> list[str]:
    path = folder / f"{name}.jsonl"
    return (
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
    )


def check_requests(bodies: list[str]) -> int:
    """How many of ``bodies`` break the provider's rules: not JSON, or a history the project's
    validators (:func:`toolkeep.requests.validate_request`, Anthropic) find a breach in."""
    from toolkeep.requests import validate_request

    broken = 0
    for text in bodies:
        try:
            body = json.loads(text)
            broken += bool(validate_request(body, "anthropic")) or "\ufffd" in text
        except ValueError:
            broken += 1
    return broken


class CostMeter:
    """Cache-aware cost (toolkeep.costs, default prices, o200k tokens) of requests as the upstream
    got them, each after the one before it in its conversation; segment counts memoized."""

    def __init__(self) -> None:
        from toolkeep.tokens import get_counter

        counter = get_counter("auto")
        memo: dict[str, int] = {}

        class Memo:
            def count(self, text: str) -> int:
                n = memo.get(text)
                if n is None:
                    n = memo[text] = counter.count(text)
                return n

        self.counter = Memo()

    def conversation(self, bodies: list[str]) -> float:
        from toolkeep.costs import request_cost, request_segments
        from toolkeep.requests import system_text
        from toolkeep.tokens import serialize_message

        total, previous = 0.0, None
        for text in bodies:
            body = json.loads(text)
            opening = system_text(body)
            if body.get("tools"):
                opening = json.dumps([body["tools"], opening], ensure_ascii=False)
            segments = request_segments(opening, [serialize_message(m) for m in body.get("messages", [])])
            total += request_cost(previous, segments, self.counter).cost  # type: ignore[arg-type]
            previous = segments
        return total


def peers_main(args: argparse.Namespace) -> None:
    ways = ["direct", *[w.strip() for w in args.ways.split(",") if w.strip()]]
    unknown = set(ways) - {"direct", *WAYS}
    if unknown:
        raise SystemExit(f"unknown way(s): {', '.join(sorted(unknown))} (known: {', '.join(WAYS)})")
    trajectories = load_trajectories(args.largest_kb, args.trajectories, args.only)
    plan = [(f"[bench c{n}]", conversation_requests(m, args.turns)) for n, (_, m) in enumerate(trajectories)]
    requests = sum(len(h) for _, h in plan)
    skipped: dict[str, str] = {}
    venvs: dict[str, Path] = {}
    installs: dict[str, str] = {}
    for way in ways:
        if way in PEERS:
            venv, why = peer_venv(way, not args.no_install)
            if venv is None:
                skipped[way] = why
            else:
                venvs[way], installs[way] = venv, why
    ways = [w for w in ways if w not in skipped]
    folder = Path(tempfile.mkdtemp(prefix="toolkeep-peers-"))
    upstream, url = start_upstream("--serve-upstream", str(folder), script=Path(__file__).resolve())
    results: dict[str, dict[str, Any]] = {}
    loads = ("alone", "at once", "saturated")
    load_before = os.getloadavg()
    try:
        for way in ways:
            with tempfile.TemporaryDirectory() as root:
                peer = Peer(way, url, Path(root), venvs.get(way))
                try:
                    warm = [(f"[warm {way}]", conversation_requests(trajectories[0][1], 3))]
                    asyncio.run(replay_conversations(peer.url, warm, 1, 0.0, time.monotonic() + 60, False))
                    cpu0 = tree_cpu_seconds(peer.pid) if peer.pid else 0.0
                    r: dict[str, Any] = {"command": peer.command, "version": peer.version}
                    r["load"] = [os.getloadavg()[0]]
                    for load in loads:
                        httpx.get(f"{url}/_bench/record/{way}-{load.replace(' ', '-')}")
                        tag = {"alone": "a", "at once": "b", "saturated": "s"}[load]
                        phase_plan = [(t.replace("[bench", f"[bench {tag}"), h) for t, h in plan]
                        if load == "alone":
                            got = asyncio.run(
                                replay_conversations(
                                    peer.url, phase_plan, 1, 0.0, time.monotonic() + 3600, False
                                )
                            )
                        elif load == "at once":
                            got = asyncio.run(replay_conversations(
                                peer.url, phase_plan, args.at_once, args.think, time.monotonic() + args.seconds, False))  # fmt: skip
                        else:
                            got = asyncio.run(replay_conversations(
                                peer.url, phase_plan, args.at_once, 0.0, time.monotonic() + args.saturation_seconds, True))  # fmt: skip
                        r[load] = got
                    httpx.get(f"{url}/_bench/record/idle")
                    r["load"].append(os.getloadavg()[0])
                    if peer.pid:
                        r["cpu"] = tree_cpu_seconds(peer.pid) - cpu0
                        r["rss"] = tree_peak_rss_mb(peer.pid)
                    results[way] = r
                finally:
                    peer.stop()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        upstream.kill()
        upstream.wait()
    load_after = os.getloadavg()
    meter = CostMeter()
    for way, r in results.items():
        alone = recorded(folder, f"{way}-alone")
        sizes = [len(h) for _, h in plan]
        if len(alone) == sum(sizes):
            cuts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
            r["cost"] = sum(meter.conversation(alone[a:b]) for a, b in itertools.pairwise(cuts))
        else:
            r["cost"] = float("nan")
        every = [b for load in loads for b in recorded(folder, f"{way}-{load.replace(' ', '-')}")]
        r["upstream"], r["broken"] = len(every), check_requests(every)
        r["broken alone"] = check_requests(alone)
        r["sent alone"] = len(alone)
    shutil.rmtree(folder, ignore_errors=True)
    write_peers(args, trajectories, plan, requests, results, skipped, installs, load_before, load_after)


def write_peers(
    args: argparse.Namespace,
    trajectories: list[tuple[str, list[dict[str, Any]]]],
    plan: list[tuple[str, list[list[dict[str, Any]]]]],
    requests: int,
    results: dict[str, dict[str, Any]],
    skipped: dict[str, str],
    installs: dict[str, str],
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
) -> None:
    direct = results["direct"]
    ways = list(results)

    def ms(values: list[float], p: float) -> float:
        return 1_000 * percentile([v for v in values if v == v], p)

    def cell(way: str, f: Any) -> str:
        try:
            return str(f(results[way]))
        except (KeyError, ZeroDivisionError):
            return ""

    def added(load: str, p: float) -> Any:
        return lambda r: (
            f"{ms(r[load][0], p) - ms(direct[load][0], p):+.1f} ms"
            if r is not direct
            else f"{ms(r[load][0], p):.1f} ms"
        )

    rows = [
        ("added first byte p50, one conversation alone", added("alone", 50)),
        ("added first byte p99, one conversation alone", added("alone", 99)),
        (f"added first byte p50, {args.at_once} at once", added("at once", 50)),
        (f"added first byte p99, {args.at_once} at once", added("at once", 99)),
        (f"throughput at saturation ({args.at_once} back to back)",
         lambda r: f"{len(r['saturated'][0]) / r['saturated'][3]:.1f} req/s"),
        ("CPU per request", lambda r: f"{1_000 * r['cpu'] / sum(r[load][2] for load in ('alone', 'at once', 'saturated')):.1f} ms"),
        ("peak RSS", lambda r: f"{r['rss']:.0f} MB"),
        ("cache-aware cost of what reached the upstream", lambda r: f"{r['cost'] / direct['cost']:.2f}x"),
        ("upstream requests breaking the provider's rules",
         lambda r: f"{r['broken']} of {r['upstream']:,}"),
        ("of them, in the one-conversation load", lambda r: f"{r['broken alone']} of {r['sent alone']:,}"),
        ("errors (all loads)", lambda r: str(sum(len(r[load][1]) for load in ('alone', 'at once', 'saturated')))),
        ("machine's load average (1 min), before -> after the way's loads",
         lambda r: f"{r['load'][0]:.1f} -> {r['load'][1]:.1f}"),
    ]  # fmt: skip
    names = {"direct": "direct", "toolkeep": "toolkeep", "headroom": "Headroom", "litellm": "LiteLLM"}
    table = [
        "| | " + " | ".join(names[w] for w in ways) + " |",
        "|---|" + "---:|" * len(ways),
        *(f"| {label} | " + " | ".join(cell(w, f) for w in ways) + " |" for label, f in rows),
    ]
    broken_inputs = direct["broken alone"]
    text = [
        f"`bench/proxy_load.py --peers --ways {args.ways} --largest-kb {args.largest_kb:g} "
        + (f"--only {args.only} " if args.only else "")
        + (f"--trajectories {args.trajectories} " if args.trajectories else "")
        + f"--turns {args.turns} "
        f"--at-once {args.at_once} --think {args.think:g} --seconds {args.seconds:g} "
        f"--saturation-seconds {args.saturation_seconds:g}`, one run: every way in turn against the same "
        f"scripted upstream (tests/upstream_server.py, each answer a stream of 20 chunks 5 ms apart) on "
        f"loopback, on a {os.cpu_count()}-core machine that the load generator, the upstream and the proxy "
        f"share (load average {load_before[0]:.2f} before, {load_after[0]:.2f} after).",
        "",
        f"Workload: {len(trajectories)} real trajectories from `../shared/bench-data/anthropic/` ("
        + (f"those named {args.only}" if args.only else f"those up to {args.largest_kb:g} KB")
        + "), each replayed as its client sent it: the history before each "
        "assistant message"
        + (f" (the first {args.turns})" if args.turns else "")
        + f", and, where a trajectory ends with the model's message, the history resumed with a user's "
        f"\"{RESUME}\" (the run was cut there: tool calls without their results, which the provider "
        f"refuses): {requests:,} streamed Anthropic Messages requests, {broken_inputs} of them broken as "
        "sent. Each load sends every conversation anew (a tag in its first message), so no way reuses "
        "what it kept from an earlier load. Loads: one conversation at a time, all of them; "
        f"{args.at_once} at once, each waiting {args.think:g} s between an answer and its next request "
        f"(at most {args.seconds:g} s); {args.at_once} back to back for {args.saturation_seconds:g} s "
        "(requests per second at saturation). Added first byte: the way's time to the first body byte "
        "minus direct's, at the same percentile of the same load (direct's own figure in its column). "
        "CPU: user and system time of the proxy's processes over all loads, per request. Peak RSS: "
        "the sum of its processes' high-water marks. Cost: the prompt-cache-aware cost "
        "(toolkeep.costs, default prices, o200k tokens, tool definitions counted) of the requests the "
        "upstream received in the one-conversation load, each after the one before it in its "
        "conversation, over direct's. Broken: upstream request bodies that are not valid UTF-8 JSON or "
        "whose history `toolkeep.requests.validate_request` finds a breach of the provider's rules in. "
        "The ways run one after the other (direct first); the last row gives the machine's load "
        "average around each, since other work on a shared machine weighs on every time and "
        "throughput figure (not on CPU per request, cost or validity).",
        "",
        *table,
        "",
        "Versions and commands (the peers each in their own venv under `~/.cache/toolkeep-bench`, made "
        "by the bench on first use):",
        "",
        *(f"- {names[w]}: {results[w]['version']}: `{results[w]['command']}`"
          + (f"; installed with `{installs[w]}`" if w in installs else "") for w in ways if w != "direct"),
        *(f"- {names[w]}: skipped: {why}" for w, why in skipped.items()),
    ]  # fmt: skip
    body = "\n".join(text)
    print(body)
    if args.write:
        sys.path.insert(0, str(HERE))
        from replay import replace_section

        replace_section(HERE / "results.md", "Proxy against peers", body, "# Benchmark results\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--think", type=float, default=1.0, help="seconds between requests, paced load")
    parser.add_argument(
        "--policy", default="economy", help="the proxy's --policy; several, comma-separated, one proxy each"
    )
    parser.add_argument("--light-seconds", type=float, default=15.0, help="the one-conversation phase")
    parser.add_argument("--write", action="store_true", help="record the table in bench/results.md")
    peers = parser.add_argument_group("against peers (--peers)")
    peers.add_argument("--peers", action="store_true", help="toolkeep against Headroom, LiteLLM and direct")
    peers.add_argument("--ways", default="toolkeep,headroom,litellm", help="the proxies, beside direct")
    peers.add_argument("--no-install", action="store_true", help="skip a peer whose venv is not there")
    peers.add_argument("--largest-kb", type=float, default=300.0, help="the trajectories up to this size")
    peers.add_argument("--only", default="", help="the trajectories whose names hold one of these (a,b)")
    peers.add_argument("--trajectories", type=int, default=0, help="at most this many (0: all)")
    peers.add_argument("--turns", type=int, default=0, help="requests of each (0: all, then the resumed one)")
    peers.add_argument("--at-once", type=int, default=20, help="conversations at once")
    peers.add_argument("--saturation-seconds", type=float, default=30.0)
    parser.add_argument("--serve-upstream", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        serve_recording_upstream(args.serve_upstream)
        return
    if args.peers:
        peers_main(args)
        return
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    n = args.conversations
    loads = {  # name: (conversations, seconds, think)
        "1 alone": (1, args.light_seconds, 0.0),
        f"{n} back to back": (n, args.seconds, 0.0),
        f"{n} paced, {args.think:g} s apart": (n, args.seconds, args.think),
    }
    load_before = os.getloadavg()
    upstream, url = start_upstream()
    measured: dict[tuple[str, str], Measured] = {}
    proxied: dict[str, Any] = {}
    served = ""
    try:
        warm_up(url)
        for name, (count, seconds, think) in loads.items():
            measured[name, "direct"] = Measured(upstream.pid, None).run(url, count, seconds, think)
        for policy in [*policies, None]:  # None: the proxy that forwards every request as it is
            way = f"through the proxy, `{policy}`" if policy else "through the proxy, forwarded as is"
            with (
                tempfile.TemporaryDirectory() as root,
                ProxyProcess(
                    "--anthropic-upstream", url, "--workspace", root, "--policy", policy or policies[0]
                ) as proxy,
            ):
                pid = proxy.process.pid
                warm_up(proxy.url, PREPARED if policy else RELAYED)
                for name, (count, seconds, think) in loads.items():
                    measured[name, way] = Measured(upstream.pid, pid).run(
                        proxy.url, count, seconds, think, PREPARED if policy else RELAYED
                    )
                served = served or served_by(pid)
                if policy:
                    stats = httpx.get(f"{proxy.url}/toolkeep/stats").json()
                    proxied[policy] = (stats, peak_rss_mb(pid))
        killed = killed_mid_stream(url)
        passed = errors_pass(url)
    finally:
        upstream.kill()
        upstream.wait()
    load_after = os.getloadavg()
    rows = []
    added = []
    figures: dict[tuple[str, str], dict[str, float]] = {}
    for (name, way), m in sorted(measured.items(), key=lambda entry: list(loads).index(entry[0][0])):
        first = [t[0] * 1_000 for t in m.times]
        last = [t[1] * 1_000 for t in m.times]
        f = figures[name, way] = {
            "first50": statistics.median(first),
            "first99": percentile(first, 99),
            "last50": statistics.median(last),
            "last99": percentile(last, 99),
        }
        kinds = ", ".join(f"{c} {k}" for k, c in Counter(m.errors).most_common()) or "0"
        rows.append(
            f"| {name} | {way} | {len(m.times):,} | {len(m.times) / m.elapsed:.1f} | {f['first50']:.1f} "
            f"| {f['first99']:.1f} | {f['last50']:.1f} | {f['last99']:.1f} | {m.cpu_ms('proxy'):.1f} "
            f"| {m.cpu_ms('upstream'):.1f} | {kinds} |".replace("| nan |", "| |")
        )
    for policy in [*policies, None]:
        way = f"through the proxy, `{policy}`" if policy else "through the proxy, forwarded as is"
        for name in loads:
            d, p = figures[name, "direct"], figures[name, way]
            added.append(
                f"Added by the proxy ({f'`{policy}`' if policy else 'forwarded as is'}), {name}: first byte "
                f"{p['first50'] - d['first50']:+.1f} ms at p50, {p['first99'] - d['first99']:+.1f} ms at p99; "
                f"last byte {p['last50'] - d['last50']:+.1f} ms at p50, {p['last99'] - d['last99']:+.1f} ms "
                "at p99."
            )
    for policy in policies:
        stats, rss = proxied[policy]
        cost = stats["cost"]
        added.append(
            f"`{policy}`: peak RSS of the proxy {rss:.0f} MB. Tokens sent through it: "
            f"{stats['tokens']['after']:,} of {stats['tokens']['before']:,} "
            f"({stats['tokens']['saved_share']:.0%} saved); cache-aware cost {cost['managed']:,.0f} against "
            f"{cost['unmanaged']:,.0f} unmanaged (ratio {cost['ratio']}); failed open: {stats['failed_open']}."
        )
    body = "\n".join(
        [
            f"`bench/proxy_load.py --seconds {args.seconds:g} --conversations {n} --think {args.think:g} "
            f"--policy {','.join(policies)}`: on loopback, to the scripted model server "
            f"(tests/upstream_server.py), on a {os.cpu_count()}-core machine that the load generator, the "
            f"upstream and the proxy share (load average {load_before[0]:.2f} before, {load_after[0]:.2f} "
            "after). One conversation alone for "
            f"{args.light_seconds:g} s; {n} conversations for {args.seconds:g} s back to back (the next "
            f"request as soon as the answer ends: the CPUs saturate, so the proxy's added time is mostly "
            f"queueing for them); {n} for {args.seconds:g} s paced, each waiting {args.think:g} s between "
            "an answer and its next request, as an agent waits for its model and tools. Each answer is "
            "a stream of 20 chunks 5 ms apart. Times in ms from sending the request. CPU: ms of user and "
            "system time per request, of the proxy and of the upstream process. Every result is a ~6 KB "
            "read of a new file (under the 20,000-char per-result limit, so nothing is cut as it "
            "enters); a conversation starts anew every 20 turns. The proxy: "
            f'{served}; {WARM_UP} requests sent to it before the loads, unmeasured. "Forwarded as is": '
            f"the same requests to {RELAYED}, which the proxy does not prepare (as `count_tokens`) and "
            "the upstream answers alike: what relaying alone costs.",
            "",
            "| load | to the upstream | requests | per s | first byte p50 | p99 | last byte p50 "
            "| p99 | proxy CPU ms | upstream CPU ms | errors |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
            *rows,
            "",
            *added,
            f"A proxy killed mid-stream: {killed}.",
            f"Upstream 429, 500 and 529 through the proxy: {passed}.",
        ]
    )
    print(body)
    if args.write:
        sys.path.insert(0, str(HERE))
        from replay import replace_section

        replace_section(HERE / "results.md", "Proxy", body, "# Benchmark results\n")


if __name__ == "__main__":
    main()
