"""Figures on the site come from one source each, never copied by hand.

A page writes ``{{ fig.NAME }}`` where a benchmark figure goes; the build puts in the value read
from ``bench/results.md`` (which the benches write), and a name that is unknown, or whose row
the results no longer hold, fails the build. ``{{ measure.previews }}`` is a table measured at
build time: how long the preview of a big result is, by kind of content and policy.

A placeholder inside code (backticks, a fenced block) is shown as written.
``tests/test_docs_figures.py`` checks that every figure is found, that no page writes a ratio
by hand, and that the README's few figures are the ones here.
"""

from __future__ import annotations

import re
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results.md"

# rows of the main economics table (27 real sessions): key -> how the row's first cell starts
ECONOMICS_ROWS = {
    "unmanaged": "the history as recorded",
    "keep5": "SWE-agent style",
    "window10": "10-turn observation window",
    "anthropic_clear": "Anthropic `clear_tool_uses`",
    "langchain_clear": "LangChain `ClearToolUsesEdit`",
    "headroom": "Headroom `compress(messages)`",
    "seed": 'toolkeep `policy="seed"`',
    "spec": 'toolkeep `policy="spec"`',
    "economy": 'toolkeep `policy="economy"`',
}
ECONOMICS_COLUMNS = ("pooled", "median", "worst", "visible", "recoverable")
HELDOUT_ROWS = {
    "economy": "toolkeep-economy",
    "headroom": "headroom-compress",
    "anthropic_clear": "anthropic-clear",
}
UNSEEN_ROWS = {"economy": "economy", "spec": "spec", "anthropic_clear": "anthropic-clear"}
# the trade-off of keeping results of at most 3,000 chars whole (bench.economics.goals --write):
# (set, setting) -> the first two cells of its row under "### Goals of the default"
SMALL_ROWS = {
    ("tuned", "kept"): ("the 27", "default"),
    ("tuned", "cut"): ("the 27", "`compact_min_chars=1200`"),
    ("heldout", "kept"): ("held-out", "default"),
    ("heldout", "cut"): ("held-out", "`compact_min_chars=1200`"),
}
SMALL_COLUMNS = ("pooled", "median", "visible")

# other figures: name -> (regex on bench/results.md, what the one group is)
PATTERNS = {
    "economics.sessions": r"(\d+) real trajectories from",
    "economics.requests": r"real trajectories from [^,]*, ([\d,]+) requests",
    "unseen.sessions": r"\n(\d+) sessions from `[^`]*` that are none of",
    "heldout.sessions": r"\n(\d+) sessions built by",
    "speed.economy.last200": r"\| `economy` \| ([\d.]+x) \|",
    "speed.spec.last200": r"\| `spec` \| ([\d.]+x) \|",
    "speed.resumed.new": r"resumed, new workspace: first prepare / json\.dumps of the history given \| ([\d.]+x)",
    "speed.largest.messages": r"Trajectory: `[^`]*` \((\d+) messages",
    "proxy.alone.first_byte": r"Added by the proxy \(`economy`\), 1 alone: first byte \+([\d.]+ ms) at p50",
    "proxy.relay.first_byte": r"Added by the proxy \(forwarded as is\), 1 alone: first byte \+([\d.]+ ms) at p50",
    "proxy.paced.first_byte": r"Added by the proxy \(`economy`\), 50 paced, 1 s apart: first byte \+([\d.]+ ms) at p50",
    "proxy.economy.cpu": r"1 alone \| through the proxy, `economy` \|(?: [^|]* \|){6} ([\d.]+) \|",
    "budget.requests_sent": r"\| 150,000 \| ([\d,]+ of [\d,]+)",
    "budget.cost_150k": r"\| 150,000 \|(?: [^|]* \|){6} ([\d.]+) \(",
}


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _row(text: str, starts: str, heading: str) -> list[str]:
    """The cells of the first table row under ``heading`` whose first cell starts with ``starts``."""
    at = text.index(heading)
    for line in text[at:].splitlines():
        if line.startswith("|") and _cells(line)[0].startswith(starts):
            return _cells(line)
    raise KeyError(f"no row starting {starts!r} under {heading!r} in {RESULTS.name}")


def _number(cell: str) -> str:
    """``0.38``, ``97 %`` or ``81.6 %`` as written in the results, a ratio with its ``x``."""
    cell = cell.strip()
    return cell if cell.endswith("%") else f"{cell}x"


@cache
def figures() -> dict[str, str]:
    """Every figure by name, read from bench/results.md now (a missing one raises KeyError)."""
    text = RESULTS.read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for key, starts in ECONOMICS_ROWS.items():
        cells = _row(text, starts, "## Economics")
        for i, column in enumerate(ECONOMICS_COLUMNS, start=1):
            found[f"economics.{key}.{column}"] = _number(cells[i])
    for key, starts in HELDOUT_ROWS.items():
        cells = _row(text, starts, "### Held-out sessions")
        found[f"heldout.{key}.pooled"] = _number(cells[1])
        found[f"heldout.{key}.visible"] = _number(cells[5])
    for key, starts in UNSEEN_ROWS.items():
        cells = _row(text, starts, "### Unseen sessions")
        found[f"unseen.{key}.pooled"] = _number(cells[1])
        found[f"unseen.{key}.worst"] = _number(cells[3])
        found[f"unseen.{key}.visible"] = _number(cells[4])
    goals = text[text.index("### Goals of the default") :]
    rows = {tuple(_cells(line)[:2]): _cells(line) for line in goals.splitlines() if line.startswith("|")}
    for (which, setting), first in SMALL_ROWS.items():
        if first not in rows:
            raise KeyError(f"no row {' | '.join(first)} under '### Goals of the default' in {RESULTS.name}")
        for i, column in enumerate(SMALL_COLUMNS, start=2):
            found[f"small.{which}.{setting}.{column}"] = _number(rows[first][i])
    for name, pattern in PATTERNS.items():
        m = re.search(pattern, text)
        if m is None:
            raise KeyError(f"figure {name}: {pattern!r} not found in {RESULTS.name}")
        found[name] = m[1]
    return found


def preview_table() -> str:
    """A Markdown table: chars sent for one fresh 25,000-char result, by content and policy,
    measured now (the session directory's path is about as long as a user's)."""
    import hashlib

    import toolkeep

    size = 25_000
    words = " ".join(["the model reads a file and then writes the answer"] * 600)
    kinds = {
        "prose": words,
        "log lines": "".join(
            f"2026-03-09 08:34:{i % 60:02d}.{i % 1000:03d} | INFO | worker.{i % 7}:run:{i} - item {i} in {i % 97} ms\n"
            for i in range(2_000)
        ),
        "hashes and paths": "".join(
            f"{hashlib.sha256(str(i).encode()).hexdigest()}  src/pkg/mod_{i}.py\n" for i in range(2_000)
        ),
        "Python source": "".join(
            f"def step_{i}(state, value_{i}):\n    return state + value_{i} * {i}\n\n" for i in range(2_000)
        ),
        "JSON": "[" + ",".join(f'{{"id": {i}, "name": "item{i}", "ok": true}}' for i in range(2_000)) + "]",
    }
    rows = ["| content | `economy` (default) | `spec` |", "|---|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="toolkeep-docs-") as tmp:
        workspace = Path(tmp) / ".cache" / "toolkeep" / "sessions" / "0123456789abcdef"
        for kind, text in kinds.items():
            sent = []
            for policy in ("economy", "spec"):
                history = [
                    {"role": "user", "content": "go"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": text[:size]}],
                    },
                ]
                with toolkeep.Session(toolkeep.Config(policy=policy), workspace=workspace) as session:
                    out, _ = session.prepare(history)
                sent.append(len(out[2]["content"][0]["content"]))
            rows.append(f"| {kind} | {sent[0]:,} | {sent[1]:,} |")
    return "\n".join(rows)


FIGURE = re.compile(r"\{\{ *(fig|measure)\.([\w.]+) *\}\}")
CODE = re.compile(r"^```.*?^```|`[^`\n]+`", re.DOTALL | re.MULTILINE)  # shown as written
MEASURES = {"previews": preview_table}


def render(markdown: str) -> str:
    """``markdown`` with every ``{{ fig.NAME }}`` and ``{{ measure.NAME }}`` put in."""

    def put(m: re.Match[str]) -> str:
        kind, name = m[1], m[2]
        if kind == "fig":
            if name not in figures():
                raise KeyError(f"unknown figure {name!r} (docs/_hooks/figures.py)")
            return figures()[name]
        if name not in MEASURES:
            raise KeyError(f"unknown measure {name!r} (docs/_hooks/figures.py)")
        return MEASURES[name]()

    out, at = [], 0
    for code in CODE.finditer(markdown):
        out += [FIGURE.sub(put, markdown[at : code.start()]), code[0]]
        at = code.end()
    return "".join([*out, FIGURE.sub(put, markdown[at:])])


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    from mkdocs.exceptions import PluginError

    try:
        return render(markdown)
    except KeyError as exc:
        raise PluginError(f"{page.file.src_path}: {exc.args[0]}") from None
