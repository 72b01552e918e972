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
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
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

TURN_CHARS = 6_000
TURNS = 20
PREPARED = "/v1/messages"
RELAYED = "/v1/messages/relay"
"""A path the proxy forwards as it is (as it does ``count_tokens``), which the scripted upstream
answers with the same stream: what relaying alone costs, beside relaying and preparing."""
WARM_UP = 3
"""Requests of a conversation of its own sent before the measured loads, so that what the first
request costs once (imports, the first connection) is not in them."""


def start_upstream() -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "upstream_server.py"), "--no-record"], stderr=subprocess.PIPE
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
    args = parser.parse_args()
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
