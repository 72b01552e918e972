"""The markdown table of the economics bench and its section of ``bench/results.md``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from toolkeep.pricing import DEFAULT_PRICING, PRESETS, Pricing

from .data import REPO, Trajectory
from .facts import Fact
from .run import Row, Summary, summarize

RESULTS = REPO / "bench" / "results.md"
HEADING = "## Economics"
UNSEEN = "### Unseen sessions\n"
HELDOUT = "### Held-out sessions\n"
KEPT = (UNSEEN, HELDOUT)
"""Subsections other modules write (``bench.economics.unseen``, ``bench.economics.heldout``)."""

GOALS: tuple[tuple[str, Callable[[Summary], bool]], ...] = (
    ("pooled cost <= 0.50x unmanaged", lambda s: s.pooled <= 0.50),
    ("median session <= 0.70x", lambda s: s.median <= 0.70),
    ("no session costlier than unmanaged", lambda s: s.worst <= 1.0 + 1e-9),
    (">= 90 % of later-used facts visible", lambda s: s.visible >= 0.90),
    ("100 % recoverable", lambda s: s.recoverable >= 1.0 - 1e-9),
)


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _row(name: str, s: Summary, strict: Summary) -> str:
    return (
        f"| {name} | {s.pooled:.2f} | {s.median:.2f} | {s.worst:.2f} | {_pct(s.visible)} | "
        f"{_pct(s.recoverable)} | {_pct(s.anywhere)} | {strict.pooled:.2f} | {strict.median:.2f} |"
    )


def _strict(row: Row, base: Row) -> tuple[Row, Row]:
    return Row(row.name, costs=row.strict, facts=row.facts), Row(
        base.name, costs=base.strict, facts=base.facts
    )


def build(
    rows: Sequence[Row],
    lever_rows: Sequence[Row],
    descriptions: dict[str, str],
    trajectories: Sequence[Trajectory],
    facts: dict[str, list[Fact]],
    pricing: Pricing = PRESETS[DEFAULT_PRICING],
) -> tuple[str, bool]:
    """The section's markdown, and whether the economy row meets every goal."""
    base = next(r for r in rows if r.name == "unmanaged")
    names = [t.name for t in trajectories]
    requests = sum(len(t.requests) for t in trajectories)
    out = [
        HEADING,
        "",
        "Written by `python -m bench.economics` (definitions: `bench/economics/README.md`). "
        f"{len(trajectories)} real trajectories from `../shared/bench-data/anthropic/`, {requests:,} requests, "
        f"{sum(len(f) for f in facts.values()):,} later-used facts. Cost is cache-aware, in base input "
        f"tokens (price list `{pricing.name}`: reads {pricing.cache_read:g}x, writes "
        f"{pricing.cache_write:g}x; tokens = chars/4), as a ratio to the unmanaged history; "
        "request k reads the messages it shares with request k-1. The last two columns price the same "
        "requests when only an earlier request that is a whole prefix is a hit.",
        "",
        "| policy | pooled cost | median session | worst session | later-used facts visible | "
        "recoverable | visible in any copy | pooled, whole-prefix cache | median, whole-prefix cache |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    summaries: dict[str, Summary] = {}
    for row in rows:
        if not row.costs:
            out.append(f"| {descriptions.get(row.name, row.name)} | skipped: {row.note} |||||||| ")
            continue
        s = summarize(row, base, names)
        strict = summarize(*_strict(row, base), names)
        summaries[row.name] = s
        out.append(_row(descriptions.get(row.name, row.name), s, strict))
    out += ["", "Per agent system (pooled cost / facts visible):", ""]
    systems = sorted({t.system for t in trajectories})
    out.append(
        "| policy | "
        + " | ".join(f"{sys} ({sum(t.system == sys for t in trajectories)})" for sys in systems)
        + " |"
    )
    out.append("|---|" + "---:|" * len(systems))
    for row in rows:
        if not row.costs:
            continue
        cells = []
        for sys in systems:
            subset = [t.name for t in trajectories if t.system == sys]
            s = summarize(row, base, subset)
            cells.append(f"{s.pooled:.2f} / {_pct(s.visible)}")
        out.append(f"| {row.name} | " + " | ".join(cells) + " |")
    met = False
    economy = summaries.get("toolkeep-economy")
    if economy is not None:
        checks = [(goal, test(economy)) for goal, test in GOALS]
        peers = [s for name, s in summaries.items() if name not in ("unmanaged", "toolkeep-economy")]
        beats = all(economy.pooled < p.pooled and economy.visible > p.visible for p in peers)
        checks.append(("lower cost than every other row at higher visibility", beats))
        met = all(ok for _, ok in checks)
        out += ["", 'Goals for `policy="economy"`:', ""]
        out += [f"- [{'x' if ok else ' '}] {goal}" for goal, ok in checks]
    if lever_rows:
        out += [
            "",
            "Levers, one at a time (economy with one lever off, through a `Session` as every row):",
            "",
            "| variant | pooled cost | median session | worst session | facts visible | recoverable |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in lever_rows:
            s = summarize(row, base, names)
            desc = descriptions.get(row.name, "")
            out.append(
                f"| {row.name} ({desc}) | {s.pooled:.2f} | {s.median:.2f} | {s.worst:.2f} | "
                f"{_pct(s.visible)} | {_pct(s.recoverable)} |"
            )
    out += _billed(rows, names, pricing)
    seconds = ", ".join(f"{r.name} {r.seconds:.0f}s" for r in [*rows, *lever_rows] if r.costs)
    out += ["", f"CPU time per row: {seconds}.", ""]
    return "\n".join(out), met


def _tokens(n: float) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.0f}k"


def _billed_cells(b: dict[str, float]) -> str:
    return (
        f"{_tokens(b['read_tokens'])} | {_tokens(b['write_tokens'])} | {_tokens(b['uncached_tokens'])} | "
        f"${b['read_dollars']:.2f} | ${b['write_dollars']:.2f} | ${b['uncached_dollars']:.2f} | "
        f"${b['dollars']:.2f}"
    )


def _billed(rows: Sequence[Row], names: Sequence[str], pricing: Pricing) -> list[str]:
    """Input by how it is billed: cache reads, cache writes and uncached input, in tokens and in
    dollars at the price list's base input price, per row in total and per session for toolkeep's
    rows."""
    priced = [r for r in rows if r.billed]
    if not priced:
        return []
    head = (
        "| {} | read | written | uncached | $ read | $ written | $ uncached | $ total |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    keys = ("read_tokens", "write_tokens", "uncached_tokens", "read_dollars", "write_dollars",
            "uncached_dollars", "dollars")  # fmt: skip
    out = [
        "",
        f"Input by how it is billed (`{pricing.name}`: ${pricing.input_price:g}/MTok base input"
        + (f", {pricing.model}" if pricing.model else "")
        + "), tokens and dollars summed over the sessions:",
        "",
        head.format("policy"),
    ]
    for row in priced:
        total = {k: sum(row.billed[n][k] for n in names) for k in keys}
        out.append(f"| {row.name} | {_billed_cells(total)} |")
    for row in priced:
        if not row.name.startswith("toolkeep-"):
            continue
        out += ["", f"Per session, {row.name} (cost ratio to unmanaged first):", ""]
        out.append(head.format("session | cost ratio").replace("|---|", "|---|---:|", 1))
        base = next(r for r in rows if r.name == "unmanaged")
        for n in names:
            out.append(f"| {n} | {row.costs[n] / base.costs[n]:.2f} | {_billed_cells(row.billed[n])} |")
    return out


def write_section(
    rows: Sequence[Row],
    lever_rows: Sequence[Row],
    descriptions: dict[str, str],
    trajectories: Sequence[Trajectory],
    facts: dict[str, list[Fact]],
    *,
    write: bool = True,
    path: Path = RESULTS,
    pricing: Pricing = PRESETS[DEFAULT_PRICING],
) -> tuple[str, bool]:
    """Build the section and put it in ``path`` in place of the old one (other sections kept)."""
    text, met = build(rows, lever_rows, descriptions, trajectories, facts, pricing)
    if write:
        old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
        start = old.find(HEADING + "\n")
        if start < 0:
            new = old.rstrip("\n") + "\n\n" + text
        else:
            end = old.find("\n## ", start + len(HEADING))
            # the unseen and held-out tables are written by their own modules: kept
            found = [old.find(h, start, end if end >= 0 else len(old)) for h in KEPT]
            unseen = min((f for f in found if f >= 0), default=-1)
            kept = old[unseen : end + 1 if end >= 0 else len(old)].rstrip("\n") + "\n" if unseen >= 0 else ""
            new = (
                old[:start]
                + text
                + ("\n" + kept if kept else "")
                + ("\n" + old[end + 1 :] if end >= 0 else "")
            )
        path.write_text(new.rstrip("\n") + "\n", encoding="utf-8")
    return text, met


def write_subsection(head: str, text: str, path: Path = RESULTS) -> None:
    """Put ``head`` + ``text`` in the ``## Economics`` section of ``path``, in place of the old
    subsection of that heading (or at the section's end)."""
    body = path.read_text(encoding="utf-8")
    start = body.find(head)
    if start >= 0:
        end = body.find("\n#", start + len(head))
        body = body[:start] + body[end + 1 :] if end >= 0 else body[:start]
    econ = body.find(HEADING)
    nxt = body.find("\n## ", econ + 5) if econ >= 0 else -1
    section = f"{head}\n{text}\n\n"
    body = body.rstrip("\n") + "\n\n" + section if nxt < 0 else body[: nxt + 1] + section + body[nxt + 1 :]
    path.write_text(body.rstrip("\n") + "\n", encoding="utf-8")
