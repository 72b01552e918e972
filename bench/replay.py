"""``toolkeep replay`` over every real trajectory: what toolkeep saves, and what prepare costs in time.

Replays each trajectory in ../shared/bench-data/anthropic/ turn by turn (the request before each
assistant message) through one Session, as ``toolkeep replay`` does, and reports per trajectory and
in total: input tokens sent and the prompt-cache-aware cost (cache reads 0.1x, writes 1.25x of the
base input price; see toolkeep.costs), each as a ratio with toolkeep to without, the peak
context ratio, and the time of ``Session.prepare`` as a ratio to ``json.dumps`` of the same
requests (summed over the session, same process and run). Writes section "Replay" of
bench/results.md with ``--write``.

    python bench/replay.py [--write] [--tokens auto|tiktoken|chars] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from toolkeep import Config
from toolkeep.replay import combine, get_counter, load_sessions, replay_session
from toolkeep.replay.replay import ReplayResult

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "bench-data" / "anthropic"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "-"


def row(name: str, r: ReplayResult) -> str:
    return (
        f"| {name} | {r.turns} | {r.without.tokens:,} | {ratio(r.with_.tokens, r.without.tokens)} | "
        f"{ratio(r.with_.peak_tokens, r.without.peak_tokens)} | {ratio(r.with_.cost, r.without.cost)} | "
        f"{ratio(r.prepare_seconds, r.dumps_seconds)} |"
    )


def table(results: list[tuple[str, ReplayResult]], unit: str, seconds: float) -> str:
    total = combine(r for _, r in results)
    wo, wi = total["without"], total["with"]
    prepare = sum(r.prepare_seconds for _, r in results)
    dumps = sum(r.dumps_seconds for _, r in results)
    rec = total["recoverable"]
    lines = [
        f"{len(results)} trajectories from `../shared/bench-data/anthropic/`, {total['turns']:,} requests, "
        f"`Config()` (policy `{Config().policy}`), one Session per trajectory; {unit}. Ratios are with "
        "toolkeep / without. Cost: "
        "cache-aware, in base-input-token units (request k pays 0.1x for the longest prefix shared with "
        "request k-1 on the serialized request, 1.25x for the rest). prepare / dumps: total time of "
        "`Session.prepare` over the trajectory's requests / total time of `json.dumps` of the same requests.",
        "",
        "| trajectory | requests | tokens sent without | tokens | peak | cost | prepare / dumps |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(row(name, r) for name, r in results),
        f"| **total** | {total['turns']:,} | {wo['tokens']:,} | **{ratio(wi['tokens'], wo['tokens'])}** | "
        f"{ratio(total['max_peak_tokens']['with'], total['max_peak_tokens']['without'])} (largest) | "
        f"**{ratio(wi['cost'], wo['cost'])}** | **{ratio(prepare, dumps)}** |",
        "",
        f"Totals: tokens sent {wo['tokens']:,} without, {wi['tokens']:,} with; cost {wo['cost']:,.0f} without, "
        f"{wi['cost']:,.0f} with; repairs {sum(total['repairs'].values())}; "
        f"{rec.get('markers', 0)} archive markers in the last requests, {rec.get('recallable', 0)} of them "
        f"recallable; prepare {prepare:.1f} s, json.dumps {dumps:.1f} s (median ratio per trajectory "
        f"{statistics.median(r.prepare_seconds / r.dumps_seconds for _, r in results if r.dumps_seconds):.2f}); "
        f"the run took {seconds:.0f} s.",
    ]
    return "\n".join(lines)


def replace_section(path: Path, title: str, body: str, preamble: str) -> None:
    """Put ``body`` under ``## title`` in ``path``, replacing that section if it is there already.

    Other sections (written by other benchmarks) are left as they are.
    """
    text = path.read_text(encoding="utf-8") if path.exists() else preamble
    head = f"## {title}\n"
    section = f"{head}\n{body.strip()}\n"
    start = text.find(head)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        nxt = text.find("\n## ", start + len(head))
        text = text[:start] + section + ("\n" + text[nxt + 1 :] if nxt >= 0 else "")
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--write", action="store_true", help="record the table in bench/results.md")
    parser.add_argument("--tokens", default="auto", choices=["auto", "tiktoken", "chars"])
    parser.add_argument("--only", default="", help="replay only trajectories whose name contains this")
    args = parser.parse_args()
    files = sorted(p for p in DATA.glob("*.json") if args.only in p.name)
    if not files:
        sys.exit(f"no trajectories under {DATA}: this benchmark needs ../shared/bench-data")
    counter = get_counter(args.tokens)
    started = time.perf_counter()
    results = []
    for path in files:
        (recorded,) = load_sessions(path, "anthropic")
        result = replay_session(recorded, counter, timing=True)
        results.append((path.stem, result))
        print(row(path.stem, result), file=sys.stderr, flush=True)
    body = table(results, counter.unit, time.perf_counter() - started)
    print(body)
    if args.write:
        replace_section(HERE / "results.md", "Replay", body, "# Benchmark results\n")


if __name__ == "__main__":
    main()
