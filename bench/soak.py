"""``toolkeep proxy`` soaked: many conversations over a long run with the disk capped, on loopback.

Starts the scripted model server (tests/upstream_server.py, each answer a stream of 20 chunks 5 ms
apart) and one ``toolkeep proxy`` in front of it with its disk cap at ``--cap-mb`` (50) MB (the
proxy's ``--max-disk-bytes``, passed when ``toolkeep proxy --help`` lists it; without it the run
still measures, and says the proxy has no cap). Then ``--conversations`` (2,000) agent
conversations start evenly over ``--minutes`` (30), at most ``--concurrency`` (32) at once. Each
grows by one tool call and one result a turn for ``--turns`` (12) turns, ``--think`` (1) s between
an answer and its next request; the results are 800 to 25,000 chars, every line naming its
conversation (so nothing is shared between them and the archive grows with every one). Every
request is a streamed Anthropic Messages request.

Checked, and printed (``--write`` records them in bench/results.md, section "Soak"):

- disk: what the cap covers, the proxy's saved results and archive, as ``du`` counts them
  (allocated blocks, a hard-linked file once), sampled every ``--sample`` (5) s, never over the
  cap (the whole workspace, statistics included, shown beside);
- memory: the proxy's RSS, sampled alike, flat once its table of conversations is full (from the
  start of conversation ``--live`` on; before, it grows with each conversation by design): the
  median of the last quarter of those samples no more than ``--rss-growth`` (15 %) over the
  median of their first quarter (not measured, and said so, in a run too short to fill it);
- recall: every ``<<ccr:KEY>>`` marker in the last request the upstream got from each live
  conversation (the ``--live`` (256) conversations that ended last: the proxy's table holds 256)
  recalls its original through the proxy's own recall route (its MCP server at /toolkeep/mcp);
  the markers of the older conversations are counted too, for information;
- validity: every request the upstream got passes the provider's rules (the project's validators,
  :func:`toolkeep.requests.validate_request`), and every answer reached the client (status 200).

    python bench/soak.py [--minutes 30] [--conversations 2000] [--cap-mb 50] [--write]

Run by hand, not in CI (a short run: ``--minutes 3 --conversations 200``). Exits 1 when a check
fails. Bounded: conversations still running at twice ``--minutes`` (plus 5) are cancelled and
counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from tests.upstream_proxy import TOOLKEEP, ProxyProcess  # noqa: E402
from tests.upstream_server import Handler, Recorder, Server  # noqa: E402

MARKER = re.compile(r"<<ccr:([0-9a-f]{16})>>")
TAG = re.compile(r"\[soak c(\d+)\]")
SIZES = (800, 3_000, 6_000, 12_000, 25_000, 2_000, 9_000)
"""Chars of the results, turn by turn (cycled): some under every limit, one over the proxy's
20,000-char per-result limit (cut as it enters)."""
Sample = tuple[float, int, int, int, float]
"""Seconds into the run, bytes under the cap, bytes of the workspace, files, RSS in MB."""
LIVE = 256
"""Conversations the proxy keeps in its table (``max_conversations``): the last ones to end are
live."""


# -- the upstream, in its own process ---------------------------------------------------------------


class SoakRecorder(Recorder):
    """Keeps, per conversation, the markers of the last request it sent; checks every request."""

    def __init__(self) -> None:
        super().__init__(keep=False)
        self.last: dict[str, list[str]] = {}
        self.invalid: list[str] = []

    def add(self, entry: dict[str, Any]) -> None:
        from toolkeep.requests import validate_request

        if entry["method"] != "POST" or entry["path"] != "/v1/messages":
            return
        text = entry["body"]
        problem = ""
        try:
            body = json.loads(text)
            breaches = validate_request(body, "anthropic")
            problem = str(breaches[0]) if breaches else ("not UTF-8" if "\ufffd" in text else "")
        except ValueError as exc:
            problem = f"not JSON: {exc}"
        tag = TAG.search(text[:2_000])
        with self.lock:
            self.count += 1
            if problem:
                self.invalid.append(problem[:300])
            if tag:
                self.last[tag.group(1)] = sorted(set(MARKER.findall(text)))


class SoakHandler(Handler):
    def do_GET(self) -> None:
        if self.path == "/_soak/state":
            recorder: Any = self.server.recorder
            with recorder.lock:
                state = {"requests": recorder.count, "invalid": recorder.invalid, "last": recorder.last}
            self._plain(200, json.dumps(state).encode(), [("content-type", "application/json")])
            return
        super().do_GET()


def serve_upstream() -> None:
    server = Server(0, [], record=False, handler=SoakHandler)
    server.recorder = SoakRecorder()
    sys.stderr.write(f"listening on http://127.0.0.1:{server.server_address[1]}\n")
    sys.stderr.flush()
    server.serve_forever()


# -- the load ----------------------------------------------------------------------------------------


def result_text(conversation: int, turn: int) -> str:
    size = SIZES[(conversation + turn) % len(SIZES)]
    line = f"conversation {conversation} turn {turn} line {{}}: output of the tool, some of it\n"
    out, i = [], 0
    while sum(map(len, out)) < size:
        out.append(line.format(i))
        i += 1
    return "".join(out)


async def conversation(
    client: httpx.AsyncClient, url: str, number: int, args: argparse.Namespace, outcome: dict[str, Any]
) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"[soak c{number}] fix the bug in module {number}"}
    ]
    for turn in range(args.turns):
        call_id = f"toolu_{number}_{turn}"
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "Read",
                                                "input": {"file_path": f"/src/m{number}/f{turn}.py"}}]}
        )  # fmt: skip
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id,
                                           "content": result_text(number, turn)}]}
        )  # fmt: skip
        body = json.dumps({"model": "load", "stream": True, "max_tokens": 100, "messages": messages})
        try:
            async with client.stream(
                "POST", f"{url}/v1/messages", content=body,
                headers={"content-type": "application/json", "x-api-key": "soak"},
            ) as response:  # fmt: skip
                async for _ in response.aiter_raw():
                    pass
                if response.status_code != 200:
                    outcome["errors"].append(f"{response.status_code}")
        except httpx.HTTPError as exc:
            outcome["errors"].append(type(exc).__name__)
        outcome["requests"] += 1
        await asyncio.sleep(args.think)
    outcome["ended"].append(number)


async def run_load(url: str, args: argparse.Namespace, outcome: dict[str, Any]) -> None:
    gate = asyncio.Semaphore(args.concurrency)
    interval = args.minutes * 60 / args.conversations
    started = time.monotonic()
    limits = httpx.Limits(max_connections=args.concurrency * 2, max_keepalive_connections=args.concurrency)

    async def one(client: httpx.AsyncClient, n: int) -> None:
        await asyncio.sleep(max(0.0, started + n * interval - time.monotonic()))
        async with gate:
            if n == args.live:  # the proxy's table of conversations is full from now on
                outcome["full_at"] = time.monotonic() - started
            await conversation(client, url, n, args, outcome)

    async with httpx.AsyncClient(timeout=httpx.Timeout(120.0), limits=limits) as client:
        tasks = [asyncio.create_task(one(client, n)) for n in range(args.conversations)]
        _, pending = await asyncio.wait(tasks, timeout=args.minutes * 120 + 300)
        for task in pending:
            task.cancel()
        outcome["cancelled"] = len(pending)
    outcome["seconds"] = time.monotonic() - started


# -- samples and checks -----------------------------------------------------------------------------


CAPPED = ("tool-results", "archive")
"""The folders of the workspace the proxy's disk cap covers: its saved results and its archive."""


def disk_bytes(root: Path) -> tuple[int, int, int]:
    """As ``du`` counts them (allocated blocks, a file with several names once): the bytes of the
    capped folders (:data:`CAPPED`), of the whole workspace (statistics and pins too), and the
    files in it."""
    seen: set[tuple[int, int]] = set()
    capped = whole = files = 0
    for folder, _, names in os.walk(root):
        inside = Path(folder).relative_to(root).parts[:1]
        for name in names:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            files += 1
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            whole += st.st_blocks * 512
            if inside and inside[0] in CAPPED:
                capped += st.st_blocks * 512
    return capped, whole, files


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sampler(root: Path, pid: int, every: float, samples: list[Sample], stop: threading.Event) -> None:
    started = time.monotonic()
    while not stop.wait(every):
        try:
            samples.append((time.monotonic() - started, *disk_bytes(root), rss_mb(pid)))
        except OSError:  # the proxy is gone
            return


def recall(client: httpx.Client, url: str, tool: str, key: str) -> bool:
    """Whether the proxy's MCP server recalls the original under ``key`` (its first line)."""
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": {"key": key, "end_line": 1}}}  # fmt: skip
    answer = client.post(
        f"{url}/toolkeep/mcp", json=call,
        headers={"accept": "application/json, text/event-stream"},
    )  # fmt: skip
    if answer.status_code != 200:
        return False
    text = answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        text = "".join(line[5:].strip() for line in text.splitlines() if line.startswith("data:"))
    result = json.loads(text).get("result", {})
    content = result.get("content") or [{}]
    said = str(content[0].get("text", ""))
    return not result.get("isError") and bool(said) and not said.startswith("[recall:")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="over which the conversations start")
    parser.add_argument("--conversations", type=int, default=2_000)
    parser.add_argument("--turns", type=int, default=12, help="requests of each conversation")
    parser.add_argument(
        "--think", type=float, default=1.0, help="seconds between an answer and the next request"
    )
    parser.add_argument("--concurrency", type=int, default=32, help="conversations at once, at most")
    parser.add_argument("--cap-mb", type=float, default=50.0, help="the proxy's disk cap (--max-disk-bytes)")
    parser.add_argument("--live", type=int, default=LIVE, help="the last conversations to end that are live")
    parser.add_argument(
        "--rss-growth", type=float, default=0.15, help="allowed RSS growth, second to last quarter"
    )
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between disk and RSS samples")
    parser.add_argument("--write", action="store_true", help="record the figures in bench/results.md")
    parser.add_argument("--serve-upstream", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        serve_upstream()
        return
    from toolkeep.recall import RECALL_TOOL

    cap = int(args.cap_mb * 1_000_000)
    helped = subprocess.run([*TOOLKEEP, "proxy", "--help"], capture_output=True, text=True, check=True).stdout
    capped = "--max-disk-bytes" in helped
    sys.path.insert(0, str(HERE))
    from proxy_load import start_upstream

    upstream, upstream_url = start_upstream("--serve-upstream", script=Path(__file__).resolve())
    outcome: dict[str, Any] = {"requests": 0, "errors": [], "ended": [], "cancelled": 0, "seconds": 0.0}
    samples: list[Sample] = []
    command = ["--anthropic-upstream", upstream_url]
    try:
        with tempfile.TemporaryDirectory() as root:
            workspace = Path(root) / "ws"
            extra = ["--max-disk-bytes", str(cap)] if capped else []
            with ProxyProcess(*command, "--workspace", str(workspace), *extra) as proxy:
                stop = threading.Event()
                watch = threading.Thread(
                    target=sampler,
                    args=(workspace, proxy.process.pid, args.sample, samples, stop),
                    daemon=True,
                )
                watch.start()
                asyncio.run(run_load(proxy.url, args, outcome))
                stop.set()
                watch.join()
                samples.append((outcome["seconds"], *disk_bytes(workspace), rss_mb(proxy.process.pid)))
                state = httpx.get(f"{upstream_url}/_soak/state", timeout=120).json()
                ended = [str(n) for n in outcome["ended"]]
                live = set(ended[-args.live :])
                checked = {"live": [0, 0], "older": [0, 0]}
                with httpx.Client(timeout=60) as client:
                    for conv, keys in state["last"].items():
                        which = "live" if conv in live else "older"
                        for key in keys:
                            checked[which][0] += 1
                            checked[which][1] += recall(client, proxy.url, RECALL_TOOL, key)
                stopped = proxy.stop()
    finally:
        upstream.kill()
        upstream.wait()
    report(args, capped, cap, outcome, samples, state, checked, stopped)


def report(
    args: argparse.Namespace,
    capped: bool,
    cap: int,
    outcome: dict[str, Any],
    samples: list[Sample],
    state: dict[str, Any],
    checked: dict[str, list[int]],
    stopped: int,
) -> None:
    peak_disk = max((s[1] for s in samples), default=0)
    peak_whole = max((s[2] for s in samples), default=0)
    peak_files = max((s[3] for s in samples), default=0)
    rss = [s[4] for s in samples]
    full = [s[4] for s in samples if "full_at" in outcome and s[0] >= outcome["full_at"]]
    quarter = max(1, len(full) // 4)
    measured = len(full) >= 8
    first = statistics.median(full[:quarter]) if measured else float("nan")
    last = statistics.median(full[-quarter:]) if measured else float("nan")
    growth = last / first - 1 if measured else float("nan")
    tenths = [
        statistics.median(full[i * len(full) // 10 : (i + 1) * len(full) // 10] or full) for i in range(10)
    ]
    live_total, live_ok = checked["live"]
    older_total, older_ok = checked["older"]
    checks = {
        "disk under the cap": capped and peak_disk <= cap,
        "RSS flat": not measured or growth <= args.rss_growth,
        "every live marker recalls": live_ok == live_total,
        "no request invalid": not state["invalid"],
        "every answer delivered": not outcome["errors"] and not outcome["cancelled"],
    }
    lines = [
        f"`bench/soak.py --minutes {args.minutes:g} --conversations {args.conversations} --turns {args.turns} "
        f"--think {args.think:g} --concurrency {args.concurrency} --cap-mb {args.cap_mb:g}`: "
        f"{args.conversations:,} conversations started evenly over {args.minutes:g} min, at most "
        f"{args.concurrency} at once, each {args.turns} requests with results of 800-25,000 chars, "
        f"against one `toolkeep proxy` "
        + (
            f"with `--max-disk-bytes {cap}`"
            if capped
            else "(WITHOUT a disk cap: its --help lists no --max-disk-bytes)"
        )
        + f", on a {os.cpu_count()}-core machine. Ran {outcome['seconds'] / 60:.1f} min.",
        "",
        "| check | measured | passed |",
        "|---|---|---|",
        f"| disk under the cap ({cap / 1e6:g} MB) | saved results and archive: peak {peak_disk / 1e6:.1f} MB "
        f"as du counts (the whole workspace: {peak_whole / 1e6:.1f} MB, {peak_files:,} files at most), "
        f"sampled every {args.sample:g} s | {'yes' if checks['disk under the cap'] else 'NO'} |",
        f"| RSS flat once the proxy's table of {args.live} conversations is full (at most "
        f"+{args.rss_growth:.0%}) | "
        + (
            f"median {first:.0f} MB in the first quarter after it filled "
            f"({outcome['full_at'] / 60:.1f} min in), {last:.0f} MB in the last ({growth:+.1%}); "
            if measured
            else "not measured: the run was too short to fill the table (it grows with each "
            "conversation until then); "
        )
        + (f"by tenths of that time: {', '.join(f'{m:.0f}' for m in tenths)} MB; " if measured else "")
        + f"peak {max(rss, default=float('nan')):.0f} MB; {len(rss)} samples | "
        f"{('yes' if checks['RSS flat'] else 'NO') if measured else 'n/a'} |",
        f"| every marker of the last request of the {args.live} live conversations recalls | "
        f"{live_ok:,} of {live_total:,} (older conversations: {older_ok:,} of {older_total:,}) | "
        f"{'yes' if checks['every live marker recalls'] else 'NO'} |",
        f"| no request invalid | {len(state['invalid'])} of {state['requests']:,} upstream requests break the "
        f"provider's rules | {'yes' if checks['no request invalid'] else 'NO'} |",
        f"| every answer delivered | {outcome['requests']:,} requests, {len(outcome['errors'])} errors"
        + "".join(f", {n} {kind}" for kind, n in Counter(outcome["errors"]).most_common())
        + ", "
        f"{outcome['cancelled']} conversations cancelled; the proxy exited {stopped} on SIGTERM | "
        f"{'yes' if checks['every answer delivered'] else 'NO'} |",
    ]
    if state["invalid"]:
        lines += ["", f"First breach: {state['invalid'][0]}"]
    body = "\n".join(lines)
    print(body)
    if args.write:
        sys.path.insert(0, str(HERE))
        from replay import replace_section

        replace_section(HERE / "results.md", "Soak", body, "# Benchmark results\n")
    if not all(checks.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
