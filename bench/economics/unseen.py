"""The economics table on sessions the policies were not tuned on.

``python -m bench.economics.unseen`` imports every session of the original logs under
``../shared/bench-data/raw/`` with toolkeep's own importers (``toolkeep.replay``), drops those that
are one of the 27 converted trajectories the policies were tuned on (same tool outputs), and
prices the rest exactly as ``python -m bench.economics`` does. With ``--write`` it records the
result under "### Unseen sessions" in the "## Economics" section of ``bench/results.md``.
``--sessions`` also prints one line per session: its requests, its longest tool result, its
unmanaged cost and each row's ratio to it (economy's facts visible last), dearest first.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolkeep.replay.importers import iter_log_files, load_sessions

from .cost import CostModel
from .data import DATA_DIR, SHARED, Trajectory, block_text, load_trajectories
from .report import UNSEEN, write_subsection
from .run import REFERENCES, Row, compute_facts, run_policy, summarize, toolkeep_policy

RAW_DIR = SHARED / "bench-data" / "raw"
ROWS = ("unmanaged", "swe-agent-keep5", "anthropic-clear")


def signature(messages: Sequence[Any]) -> tuple[str, ...]:
    """The session's tool outputs, as a sorted tuple of hashes: equal for the same session."""
    out = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = str(block.get("content"))
                out.append(hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest())
    return tuple(sorted(out))


def unseen_trajectories() -> list[Trajectory]:
    """Sessions of the raw logs that are none of the converted trajectories."""
    seen = {signature(t.messages) for t in load_trajectories(DATA_DIR)}
    out = []
    for path, _ in iter_log_files([RAW_DIR]):
        try:
            sessions = load_sessions(path)
        except Exception as exc:  # a file no importer reads is reported, not fatal
            print(f"skipped {path.name}: {exc}", file=sys.stderr)
            continue
        for s in sessions:
            if s.api_format != "anthropic" or signature(s.messages) in seen:
                continue
            requests = [i for i, m in enumerate(s.messages) if m.get("role") == "assistant" and i > 0]
            if len(requests) < 2:
                continue
            system = path.parent.name
            name = f"{system}__{Path(s.source).name}".replace("#", "__")
            out.append(Trajectory(name, s.messages, requests))
    return out


def longest_result(t: Trajectory) -> int:
    """Chars of the session's longest tool result."""
    return max(
        (
            len(block_text(b))
            for m in t.messages
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ),
        default=0,
    )


def session_lines(rows: dict[str, Row], trajectories: Sequence[Trajectory]) -> list[str]:
    """One line per session, the dearest for economy first."""
    base = rows["unmanaged"]
    economy = rows["economy"]
    names = [n for n in rows if n != "unmanaged"]
    out = [
        "| session | requests | longest result (chars) | unmanaged (tokens) | "
        + " | ".join(names)
        + " | economy facts visible |",
        "|---|---:|---:|---:|" + "---:|" * (len(names) + 1),
    ]
    ordered = sorted(trajectories, key=lambda t: -economy.costs[t.name] / base.costs[t.name])
    for t in ordered:
        ratios = " | ".join(f"{rows[n].costs[t.name] / base.costs[t.name]:.3f}" for n in names)
        tally = economy.facts[t.name]
        out.append(
            f"| {t.name} | {len(t.requests)} | {longest_result(t):,} | {base.costs[t.name]:,.0f} | "
            f"{ratios} | {tally.visible}/{tally.total} |"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.economics.unseen", description=__doc__)
    parser.add_argument("--write", action="store_true", help="record the table in bench/results.md")
    parser.add_argument("--sessions", action="store_true", help="also print one line per session")
    args = parser.parse_args(argv)
    trajectories = unseen_trajectories()
    if not trajectories:
        print(f"no unseen sessions under {RAW_DIR}", file=sys.stderr)
        return 2
    model = CostModel()
    facts = compute_facts(trajectories)
    rows = {name: run_policy(name, REFERENCES[name][1], trajectories, facts, model) for name in ROWS}
    for policy in ("spec", "economy"):
        rows[policy] = run_policy(policy, toolkeep_policy(policy), trajectories, facts, model)
    names = [t.name for t in trajectories]
    base = rows["unmanaged"]
    lines = [
        f"{len(trajectories)} sessions from `../shared/bench-data/raw/` that are none of the 27 the "
        f"policies were tuned on ({sum(len(t.requests) for t in trajectories):,} requests, "
        f"{sum(len(f) for f in facts.values()):,} later-used facts), imported by `toolkeep.replay`; "
        "same definitions. `python -m bench.economics.unseen --write`.",
        "",
        "| policy | pooled cost | median session | worst session | facts visible | recoverable |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        s = summarize(row, base, names)
        lines.append(
            f"| {name} | {s.pooled:.2f} | {s.median:.2f} | {s.worst:.2f} | "
            f"{s.visible:.0%} | {s.recoverable:.0%} |".replace("%", " %")
        )
    text = "\n".join(lines)
    print(text)
    if args.sessions:
        print("\n" + "\n".join(session_lines(rows, trajectories)))
    if args.write:
        write_subsection(UNSEEN, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
