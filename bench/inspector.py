"""``toolkeep inspect`` on the largest real trajectory: the page's size and how soon a browser shows it.

(Named inspector.py: a script named inspect.py would shadow the standard library's ``inspect``.)

Writes the inspector's page of the largest trajectory in ../shared/bench-data/anthropic/ (as
``toolkeep inspect FILE -o PAGE`` does, in this process) and ``replay --json``'s document of the
same replay, then opens the page in headless Chromium (Debian's ``chromium``, over the DevTools
pipe) ``--runs`` times and reports, medians over the runs:

- the page's size on disk, and the replay's JSON document's size beside it;
- the time the replay took with the inspector's trace and without it (the trace's cost);
- first contentful paint and the load event of the page, and of a baseline in the same browser:
  the replay's JSON document alone in a ``<pre>`` (the same figures, nothing to draw or decode),
  as a ratio;
- the time from a click on the first shortened result's *open* to its original in the page
  (decompressed from the page's own data on demand).

Appends a section to bench/results.md with ``--write`` (append only).

    python bench/inspector.py [--runs 5] [--tokens auto|tiktoken|chars] [--write] [--keep DIR]
"""

from __future__ import annotations

import argparse
import html
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from toolkeep import Config
from toolkeep.cli.replay import _document
from toolkeep.inspector import SessionTrace, render
from toolkeep.inspector.chromium import Chromium
from toolkeep.replay import get_counter, load_sessions, replay_session

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("TOOLKEEP_SHARED", HERE.parent.parent / "shared")) / "bench-data" / "anthropic"

PAINT = (
    "new Promise(done => { const seen = () => { const p = performance.getEntriesByName('first-contentful-paint')[0];"
    " if (p) done([p.startTime, performance.getEntriesByType('navigation')[0].loadEventStart]);"
    " else setTimeout(seen, 20); }; seen(); })"
)


def measure(browser: Chromium, url: str) -> tuple[float, float]:
    """First contentful paint and load event of ``url`` in a fresh tab, in ms."""
    page = browser.open(url)
    paint, load = page.evaluate(PAINT)
    if page.errors:
        raise SystemExit(f"{url}: {page.errors}")
    page.send("Page.close")
    return float(paint), float(load)


def open_time(browser: Chromium, url: str) -> float:
    """ms from a click on the first result's open to its original in the page."""
    page = browser.open(url)
    page.evaluate("window.__t0 = 0")
    page.evaluate(
        "document.querySelector('button[data-open]').addEventListener('click', () => { window.__t0 = performance.now(); },"
        " {capture: true})"
    )
    page.click("button[data-open]")
    took = page.wait_for(
        "document.querySelector('tr.panel pre.original') && window.__t0 && (performance.now() - window.__t0)",
        60,
    )
    page.send("Page.close")
    return float(took)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tokens", default="auto", choices=["auto", "tiktoken", "chars"])
    ap.add_argument("--write", action="store_true", help="append the section to bench/results.md")
    ap.add_argument("--keep", metavar="DIR", help="write the pages there (default: a temporary directory)")
    args = ap.parse_args()
    files = sorted(DATA.glob("*.json"), key=lambda p: p.stat().st_size)
    if not files:
        raise SystemExit(f"no trajectories in {DATA}")
    largest = files[-1]
    (recorded,) = load_sessions(largest)
    counter = get_counter(args.tokens)
    config = Config()

    t0 = time.perf_counter()
    plain = replay_session(recorded, counter, config=config)
    plain_s = time.perf_counter() - t0
    trace = SessionTrace(recorded)
    t0 = time.perf_counter()
    result = replay_session(recorded, counter, config=config, on_request=trace)
    traced_s = time.perf_counter() - t0
    assert result.to_dict()["with"] == plain.to_dict()["with"]
    document = _document([result], [], counter, config)
    t0 = time.perf_counter()
    page = render(document, [trace])
    render_s = time.perf_counter() - t0

    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="toolkeep-inspect-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    page_file = out / "report.html"
    page_file.write_text(page, encoding="utf-8")
    as_json = json.dumps(document, indent=2, ensure_ascii=False)
    base_file = out / "baseline.html"
    base_file.write_text(
        "<!doctype html><html><head><meta charset=utf-8><title>replay --json</title></head><body><pre>"
        + html.escape(as_json)
        + "</pre></body></html>",
        encoding="utf-8",
    )
    paints: list[float] = []
    loads: list[float] = []
    base_paints: list[float] = []
    base_loads: list[float] = []
    opens: list[float] = []
    with Chromium(1280, 900) as browser:
        measure(browser, base_file.as_uri())  # warm the browser: its first tab pays its start-up
        for _ in range(args.runs):
            p, lo = measure(browser, base_file.as_uri())
            base_paints.append(p)
            base_loads.append(lo)
            p, lo = measure(browser, page_file.as_uri())
            paints.append(p)
            loads.append(lo)
            opens.append(open_time(browser, page_file.as_uri()))
    med = statistics.median
    size = page_file.stat().st_size
    lines = [
        "",
        "## Inspector",
        "",
        f"`python bench/inspector.py --runs {args.runs} --tokens {args.tokens}`: the page `toolkeep inspect` "
        f"writes for the largest real trajectory (`{largest.name}`, {len(recorded.messages):,} messages, "
        f"{result.turns:,} requests, {len(trace.results):,} results shortened, {len(trace.repairs):,} repairs; "
        f"`Config()`, policy `{config.policy}`, {counter.unit}), opened {args.runs} times in headless Chromium "
        "(Debian `chromium`, DevTools pipe, 1280x900) on this 2-CPU machine shared with other work; medians. "
        "Baseline: `replay --json`'s document of the same replay alone in a `<pre>`, in the same browser run.",
        "",
        "| what | page | baseline | page / baseline |",
        "|---|---:|---:|---:|",
        f"| size on disk | {size / 1e6:.2f} MB | {base_file.stat().st_size / 1e3:.1f} kB | "
        f"{size / base_file.stat().st_size:.0f}x |",
        f"| first contentful paint | {med(paints):.0f} ms | {med(base_paints):.0f} ms | "
        f"{med(paints) / med(base_paints):.2f}x |",
        f"| load event | {med(loads):.0f} ms | {med(base_loads):.0f} ms | {med(loads) / med(base_loads):.2f}x |",
        f"| click *open* to the original in the page | {med(opens):.0f} ms | | |",
        "",
        f"Writing it: the replay took {traced_s:.1f} s with the inspector's trace and {plain_s:.1f} s without "
        f"({traced_s / plain_s:.2f}x), the page {render_s:.2f} s to render. The originals and the forms the "
        "model saw are gzip + base64 in the page, decoded only when a result is opened.",
    ]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.write:
        with (HERE / "results.md").open("a", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
