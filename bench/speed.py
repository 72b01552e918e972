"""Speed of ``Session.prepare`` on the largest real trajectory, as ratios to ``json.dumps``.

Replays the trajectory request by request through one Session (three times, keeping each
request's fastest ``prepare``), timing ``prepare`` and ``json.dumps`` of the request it returns, in
the same process and run. Prints a table and, with ``--write``, records it in bench/results.md (section "Speed").

    python bench/speed.py [--write] [--every N] [--memory] [--uncached-every N] [--policy NAME ...]
                          [--detail NAME]

Every policy (or those named) gets the Session figures; one of them (``--detail``, default the
default policy, ``economy``) also the one-off, resumed and memory ones.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import toolkeep
from toolkeep.pipeline import POLICIES, run_pipeline

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "bench-data" / "anthropic"


def largest_trajectory() -> Path:
    files = sorted(DATA.glob("*.json"), key=lambda p: p.stat().st_size)
    if not files:
        sys.exit(f"no trajectories under {DATA}: this benchmark needs ../shared/bench-data")
    return files[-1]


def request_ends(history: list[Any]) -> list[int]:
    """End index (exclusive) of each request: every prefix of the history, as an agent that
    appends one message at a time and prepares before each model call would send it."""
    return list(range(1, len(history) + 1))


def timed(fn: Any, *args: Any, repeat: int = 1) -> tuple[float, Any]:
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - t)
    return best, out


def replay(
    history: list[Any], config: toolkeep.Config, every: int, passes: int = 3
) -> list[tuple[int, float, float]]:
    """(request number, prepare seconds, json.dumps seconds) for every ``every``-th request.

    ``passes`` sessions replay the requests, each timing ``prepare`` alone; a request's time is
    its fastest (a session's request cannot be repeated, as the repeat would find its work
    done, so the repeats are whole sessions): what a busy machine adds to one pass is gone, what
    the work costs stays. A last session, giving the same output, times ``json.dumps`` of what
    it returns. Keeping every output alive for a later pass would time the garbage collector
    walking them, not ``prepare``."""
    prep: dict[int, float] = {}
    for _ in range(passes):
        with toolkeep.Session(config) as session:
            for n, end in enumerate(request_ends(history)):
                t, _ = timed(session.prepare, history[:end], "anthropic")
                prep[n] = min(t, prep.get(n, t))
    rows = []
    with toolkeep.Session(config) as session:
        for n, end in enumerate(request_ends(history)):
            out, _ = session.prepare(history[:end], "anthropic")
            if n % every == 0:
                t_dump, _ = timed(json.dumps, out, repeat=3)
                rows.append((n, prep[n], t_dump))
    return rows


def replay_uncached(
    history: list[Any], config: toolkeep.Config, every: int
) -> list[tuple[int, float, float]]:
    """The same requests (every ``every``-th) as one-off runs: no memory of earlier requests
    (``run_pipeline``, same workspace and store, so only the computing is redone)."""
    rows = []
    with toolkeep.Session(config) as session:
        for n, end in enumerate(request_ends(history)):
            if n % every:
                continue
            request = history[:end]
            t_prep, (out, _) = timed(
                lambda r: run_pipeline(
                    r, format="anthropic", config=config, workspace=session.workspace, store=session.store
                ),
                request,
            )
            t_dump, _ = timed(json.dumps, out, repeat=3)
            rows.append((n, t_prep, t_dump))
    return rows


def median_ratio(rows: list[tuple[int, float, float]], lo: int, hi: int) -> float:
    sel = [p / d for n, p, d in rows if lo <= n < hi]
    return statistics.median(sel) if sel else float("nan")


def median_time(rows: list[tuple[int, float, float]], lo: int, hi: int) -> float:
    sel = [p for n, p, _ in rows if lo <= n < hi]
    return statistics.median(sel) if sel else float("nan")


def mean_time(rows: list[tuple[int, float, float]], lo: int, hi: int) -> float:
    sel = [p for n, p, _ in rows if lo <= n < hi]
    return statistics.fmean(sel) if sel else float("nan")


def request_kind(history: list[Any], n: int) -> str:
    """What request n adds: the role and block types of its last message (``user:tool_result``,
    ``assistant:text,tool_use``). Requests of one kind cost alike; kinds cost apart."""
    message = history[n]
    content = message.get("content")
    types = "text" if isinstance(content, str) else ",".join(sorted({str(b.get("type")) for b in content}))
    return f"{message.get('role')}:{types}"


def kind_growth(history: list[Any], rows: list[tuple[int, float, float]], late: tuple[int, int]) -> float:
    """The largest growth of the median prepare time within one kind of request (kinds with 20
    or more requests in both windows).

    The median over all requests is a poor measure of growth when the kinds cost apart: on the
    largest trajectory about half the requests add a tool result (cheap) and half an assistant
    message (dearer: the results it closes get their shortened forms), so the median sits at
    the gap between the two and moves by the cost of the gap when one window has two more
    requests of one kind. Within a kind, the work left is what is new in the request; growth
    there is growth with the session."""
    worst = 0.0
    windows = ((200, 400), late)
    by_kind: dict[str, list[list[float]]] = {}
    for n, prep, _ in rows:
        for w, (lo, hi) in enumerate(windows):
            if lo <= n < hi:
                by_kind.setdefault(request_kind(history, n), [[], []])[w].append(prep)
    for early, later in by_kind.values():
        if len(early) >= 20 and len(later) >= 20:
            worst = max(worst, statistics.median(later) / statistics.median(early))
    return worst


def resumed(history: list[Any], config: toolkeep.Config, *, runs: int = 9) -> dict[str, float]:
    """First prepare of a new Session given the whole history, as ratios to json.dumps of the
    history it was given and of the request it returned: the median over ``runs`` new sessions,
    each timed next to its own json.dumps (one cold run is at the mercy of a noisy machine).

    Two kinds of resumption: a new Session on a new workspace (the default: its archive and
    saved files are written anew), and a new Session on the workspace an earlier one kept
    (``Session(workspace=PATH)``: they are already there)."""
    out_of: dict[str, list[float]] = {"new": [], "new_out": [], "kept": []}
    with tempfile.TemporaryDirectory() as kept:
        with toolkeep.Session(config, workspace=kept) as session:
            session.prepare(history, "anthropic")
        for _ in range(runs):
            for kind, workspace in (("new", None), ("kept", kept)):
                with toolkeep.Session(config, workspace=workspace) as session:
                    gc.collect()
                    t_prep, (out, _) = timed(session.prepare, history, "anthropic")
                t_history, _ = timed(json.dumps, history)
                out_of[kind].append(t_prep / t_history)
                if kind == "new":
                    t_out, _ = timed(json.dumps, out)
                    out_of["new_out"].append(t_prep / t_out)
    return {kind: statistics.median(ratios) for kind, ratios in out_of.items()}


_CHILD = """
import gc, json, sys, time
import toolkeep
history = json.load(open(sys.argv[1], encoding="utf-8"))[: int(sys.argv[4])]
config = toolkeep.Config(policy=sys.argv[3])
gc.collect()
t = time.perf_counter(); text = json.dumps(history); dumps = time.perf_counter() - t
with toolkeep.Session(config, workspace=sys.argv[2]) as session:
    gc.collect()
    t = time.perf_counter(); out, _ = session.prepare(history, "anthropic"); prep = time.perf_counter() - t
    resume = session.conversations.current.state.resume
    adopted = resume.adopted if resume is not None else 0
t = time.perf_counter(); json.dumps(history); dumps = min(dumps, time.perf_counter() - t)
print(json.dumps({"prep": prep, "dumps": dumps, "adopted": adopted, "out": json.dumps(out)}))
"""


def in_new_process(path: Path, workspace: str, policy: str, end: int) -> dict[str, Any]:
    """A new process's first ``prepare`` of the history's first ``end`` messages on ``workspace``
    (its kept store, or an empty one): seconds, seconds of ``json.dumps`` of that history (the
    faster of one before and one after), messages adopted from the store, and the output."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), workspace, policy, str(end)],
        capture_output=True, text=True, check=True, env=dict(os.environ),
    )  # fmt: skip
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def resumed_in_new_processes(
    path: Path, history: list[Any], policy: str, *, runs: int = 5, behind: int = 8
) -> dict[str, Any]:
    """A new process given the whole history, ``runs`` times each (medians of prepare /
    json.dumps): on the store kept by a session that saw every request; on one kept by a session
    that stopped ``behind`` requests earlier (a proxy killed between two writes, or a replica
    taking over); on an empty store. Each output is checked against the incremental session's
    (paths of saved files named alike)."""
    if not 1 <= runs <= 10:
        raise SystemExit("--runs: 1 to 10 (workspaces named alike in length)")
    config = toolkeep.Config(policy=policy)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as root:
        # workspaces named alike in length: what a policy writes may fit a path into a length
        kept, late, empty = f"{root}/k0", f"{root}/l", f"{root}/e"
        with toolkeep.Session(config, workspace=kept) as session:
            for end in request_ends(history):
                sent, _ = session.prepare(history[:end], "anthropic")
            expected = json.dumps(sent).replace(kept, "WS")
        for n in range(runs):  # each run from a state `behind` requests back (a run writes)
            with toolkeep.Session(config, workspace=f"{late}{n}") as session:
                for end in request_ends(history)[:-behind]:
                    session.prepare(history[:end], "anthropic")
        for kind, workspace in (("kept", kept), ("behind", late), ("empty", None)):
            ratios, same, adopted = [], True, []
            for n in range(runs):
                ws = f"{late}{n}" if workspace == late else workspace or f"{empty}{n}"
                got = in_new_process(path, ws, policy, len(history))
                ratios.append(got["prep"] / got["dumps"])
                same = same and got["out"].replace(ws, "WS") == expected
                adopted.append(got["adopted"])
            out[kind] = {"ratio": statistics.median(ratios), "same": same, "adopted": min(adopted)}
    return out


def writing_cost(
    history: list[Any], config: toolkeep.Config, passes: int = 2
) -> tuple[float, float, float, float]:
    """What keeping the state (:mod:`toolkeep.resume`) adds to a session on a kept workspace:
    the median prepare seconds of the last 200 requests, and the mean over all requests, with it
    and with it off (``Resume.of`` giving none); fastest of ``passes`` sessions each."""
    from toolkeep.resume import Resume

    best: dict[bool, tuple[float, float]] = {}
    keep = Resume.__dict__["of"]
    try:
        for _ in range(passes):
            for on in (True, False):
                Resume.of = keep if on else classmethod(lambda cls, *args, **kwargs: None)  # type: ignore[method-assign,assignment]
                with tempfile.TemporaryDirectory() as root:
                    times = []
                    with toolkeep.Session(config, workspace=root) as session:
                        for end in request_ends(history):
                            t = time.perf_counter()
                            session.prepare(history[:end], "anthropic")
                            times.append(time.perf_counter() - t)
                    got = (statistics.median(times[-200:]), statistics.fmean(times))
                    old = best.get(on, (float("inf"), float("inf")))
                    best[on] = (min(old[0], got[0]), min(old[1], got[1]))
    finally:
        Resume.of = keep  # type: ignore[method-assign]
    return best[True][0], best[False][0], best[True][1], best[False][1]


def resume_table(path: Path, history: list[Any], policies: list[str], runs: int) -> str:
    rows = []
    for policy in policies:
        got = resumed_in_new_processes(path, history, policy, runs=runs)
        cells = [
            f"{got[k]['ratio']:.2f}x ({'same bytes' if got[k]['same'] else 'DIFFERENT BYTES'}, "
            f"{got[k]['adopted']} adopted)"
            for k in ("kept", "behind", "empty")
        ]
        rows.append(f"| `{policy}` | {' | '.join(cells)} |")
        print(rows[-1], flush=True)
    on, off, mean_on, mean_off = writing_cost(history, toolkeep.Config())
    return "\n".join(
        [
            "A new process given the whole trajectory (one `Session`, its first `prepare`; median of "
            f"{runs} processes, each prepare over the faster of two `json.dumps` of the history in that process). "
            "Store kept: the workspace of a session that saw every request. 8 behind: of one that stopped 8 "
            "requests before the end (a proxy killed between two writes, a replica taking over). Empty: a new "
            "workspace. Each output compared with the session that saw every request (saved files' paths "
            "named alike); adopted: messages the new process took from the kept state (`toolkeep.resume`).",
            "",
            "| policy | store kept | store kept, 8 requests behind | store empty |",
            "|---|---:|---:|---:|",
            *rows,
            "",
            "What keeping the state adds to a session's requests (default policy, one `Session` on a kept "
            "workspace over every request, the state written every 8 requests and whole now and then; "
            f"fastest of two sessions each): median of the last 200 requests {on * 1000:.3f} ms with it, "
            f"{off * 1000:.3f} ms without (+{(on - off) * 1000:.3f} ms); mean over all requests "
            f"{mean_on * 1000:.3f} ms with it, {mean_off * 1000:.3f} ms without "
            f"(+{(mean_on - mean_off) * 1000:.3f} ms).",
        ]
    )


def peak_memory(history: list[Any], config: toolkeep.Config) -> float:
    """Peak extra memory of a session replaying the history, as a ratio to the history's size."""
    size = len(json.dumps(history))
    gc.collect()
    tracemalloc.start()
    with toolkeep.Session(config) as session:
        for end in request_ends(history):
            session.prepare(history[:end], "anthropic")
        _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="record the table in bench/results.md")
    parser.add_argument("--every", type=int, default=1, help="time json.dumps every N requests")
    parser.add_argument("--memory", action="store_true", help="also measure peak memory (slower)")
    parser.add_argument("--uncached-every", type=int, default=10, help="one-off run every N requests")
    parser.add_argument("--policy", action="append", help="policies to time (default: all)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="only the resumed runs: a new process given the whole history, store kept or empty",
    )
    parser.add_argument("--runs", type=int, default=5, help="new processes per resumed figure")
    parser.add_argument(
        "--detail", default=toolkeep.Config().policy, help="the policy timed in detail (default: the default)"
    )
    args = parser.parse_args()

    path = largest_trajectory()
    history = json.loads(path.read_text(encoding="utf-8"))
    policies = args.policy or sorted(POLICIES)
    if args.resume:
        table = resume_table(path, history, policies, args.runs)
        print(table)
        if args.write:
            write_section("Resumed in a new process", table)
        return
    rows = []
    for policy in policies:
        timed_rows = replay(history, toolkeep.Config(policy=policy), args.every)
        end = timed_rows[-1][0] + 1
        late = (end - 200, end)
        rows.append(
            f"| `{policy}` | {median_ratio(timed_rows, *late):.3f}x "
            f"| {median_ratio(timed_rows, 200, 400):.3f}x "
            f"| {median_time(timed_rows, *late) / median_time(timed_rows, 200, 400):.2f}x "
            f"| {mean_time(timed_rows, *late) / mean_time(timed_rows, 200, 400):.2f}x "
            f"| {kind_growth(history, timed_rows, late):.2f}x |"
        )
        print(rows[-1], flush=True)
    by_policy = [
        "Every policy through one `Session` (median prepare / json.dumps of the request it returned):",
        "",
        "Growth compares the prepare time of the last 200 requests with requests 200-400: of the",
        "median over all requests, of the mean, and the largest within one kind of request (what its",
        "last message adds; see `kind_growth` for why the median over all requests is unsteady).",
        "",
        "| policy | last 200 requests | requests 200-400 | growth, median | growth, mean | growth, within a kind |",
        "|---|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ]
    if args.detail not in policies:
        print("\n".join(by_policy))
        return
    config = toolkeep.Config(policy=args.detail)
    cached = replay(history, config, args.every)
    uncached = replay_uncached(history, config, args.uncached_every)
    last = cached[-1][0] + 1
    late, early = (last - 200, last), (200, 400)

    def growth(rows: list[tuple[int, float, float]]) -> float:
        return median_time(rows, *late) / median_time(rows, *early)

    resume = resumed(history, config)
    lines = [
        *by_policy,
        f"The `{config.policy}` policy in detail:",
        "",
        f"Trajectory: `{path.name}` ({len(history)} messages; request n = its first n messages, as an agent",
        "appending one message at a time sends them), one process. Session: one `Session` over all",
        "requests, three times, each request's fastest prepare. One-off: `run_pipeline` on every",
        f"{args.uncached_every}th request, no memory of earlier ones.",
        "Resumed: a new `Session` given the whole history (median of 9 runs, each next to its own",
        "json.dumps), on a new workspace or on the one an earlier session kept (archive and files there).",
        "",
        "| measure | Session | one-off |",
        "|---|---:|---:|",
        f"| median prepare / json.dumps, last 200 requests | {median_ratio(cached, *late):.2f}x "
        f"| {median_ratio(uncached, *late):.2f}x |",
        f"| median prepare / json.dumps, requests 200-400 | {median_ratio(cached, *early):.2f}x "
        f"| {median_ratio(uncached, *early):.2f}x |",
        f"| growth: median prepare time, requests {late[0]}-{late[1]} vs 200-400 | {growth(cached):.2f}x "
        f"| {growth(uncached):.2f}x |",
        f"| resumed, new workspace: first prepare / json.dumps of the history given | {resume['new']:.2f}x | |",
        f"| resumed, new workspace: first prepare / json.dumps of the request returned "
        f"| {resume['new_out']:.2f}x | |",
        f"| resumed, kept workspace: first prepare / json.dumps of the history given | {resume['kept']:.2f}x | |",
    ]
    if args.memory:
        lines.append(
            f"| peak extra memory of a session / history size | {peak_memory(history, config):.2f}x | |"
        )
    table = "\n".join(lines)
    print(table)
    if args.write:
        write_section("Speed", table)


def write_section(title: str, body: str) -> None:
    """Replace (or append) the ``## title`` section of bench/results.md."""
    results = HERE / "results.md"
    text = results.read_text(encoding="utf-8") if results.exists() else "# Benchmark results\n"
    head = f"## {title}\n"
    start = text.find(head)
    section = f"{head}\n{body}\n\n"
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(head))
        text = text[:start] + section + (text[end + 1 :] if end >= 0 else "")
    results.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
