"""``toolkeep inspect``: the page of real sessions, opened in a real headless Chromium.

The page must load from disk with no console error and no request but its own file, show the
figures ``toolkeep replay --json`` prints for the same inputs, open a shortened result's original
on a click, and draw something.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolkeep.formats import get_format
from toolkeep.inspector import SessionTrace
from toolkeep.inspector.chromium import Chromium, Page, find_chromium
from toolkeep.messages import ToolResultPart
from toolkeep.replay import get_counter, load_sessions, replay_session

from .conftest import BENCH_DATA, shared_or_skip

RAW = BENCH_DATA / "raw"
THREE = (
    RAW / "swe-agent" / "msb-java__doubao-pro-128k__fasterxml__jackson-dataformat-xml-531.traj",
    RAW / "claude-code" / "claude-reliability__python-to-rust-port__transcript.jsonl",
    RAW / "gemini-cli" / "metaphi-figma-eval-49bdd49a__transcript.jsonl",
)
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "broken-session.json"


def toolkeep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLKEEP_POLICY")}
    env["XDG_CACHE_HOME"] = str(cwd / "cache")
    done = subprocess.run(
        [sys.executable, "-m", "toolkeep", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    return done


def chromium_or_skip() -> None:
    if find_chromium() is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The page of three real sessions and ``replay --json`` of the same, same settings."""
    shared_or_skip()
    missing = [str(p) for p in THREE if not p.exists()]
    if missing:
        pytest.skip(f"real sessions absent: {missing}")
    work = tmp_path_factory.mktemp("inspect")
    page = work / "report.html"
    args = [*(str(p) for p in THREE), "--tokens", "chars"]
    toolkeep("inspect", *args, "-o", str(page), cwd=work)
    document = json.loads(toolkeep("replay", *args, "--json", cwd=work).stdout)
    return page, document


@pytest.fixture(scope="module")
def opened(real: tuple[Path, dict[str, Any]]) -> Iterator[tuple[Page, dict[str, Any]]]:
    chromium_or_skip()
    page_file, document = real
    with Chromium(1280, 900) as browser:
        yield browser.open(page_file.as_uri()), document


def test_loads_with_no_error_and_no_request(
    opened: tuple[Page, dict[str, Any]], real: tuple[Path, Any]
) -> None:
    page, document = opened
    assert page.evaluate("document.readyState") == "complete"
    assert page.evaluate("document.querySelectorAll('section').length") == len(document["sessions"]) >= 3
    assert page.errors == []
    assert page.requests == [real[0].as_uri()]  # its own file, nothing else
    # every shape of the charts is drawn: none swallowed by a tag the HTML parser left open
    shapes = page.evaluate(
        "[...document.querySelectorAll('svg *')].map(e => e.parentElement.tagName.toLowerCase())"
    )
    assert shapes and set(shapes) == {"svg"}
    assert page.evaluate("document.querySelectorAll('#s-0 svg polyline').length") == 4
    html = real[0].read_text(encoding="utf-8")
    assert "http://" not in html.split("<main>", 1)[0] and "<link" not in html and " src=" not in html


def lookup(document: dict[str, Any], path: str) -> Any:
    value: Any = document
    for step in path.split("."):
        value = value[int(step)] if isinstance(value, list) else value[step]
    return value


def test_figures_are_replays(opened: tuple[Page, dict[str, Any]]) -> None:
    """Every figure the page marks with its place in ``replay --json`` has that value, and shows it."""
    page, document = opened
    figures = page.evaluate(
        "[...document.querySelectorAll('[data-k]')].filter(e => e.dataset.k)"
        ".map(e => [e.dataset.k, JSON.parse(e.dataset.v), e.textContent])"
    )
    assert len(figures) > 100
    checked = set()
    for path, value, text in figures:
        expected = lookup(document, path)
        assert value == pytest.approx(expected), path
        digits = text.replace(",", "").replace("$", "").rstrip("x")
        if isinstance(expected, int):
            assert digits == str(expected), (path, text)
        elif isinstance(expected, float):
            assert float(digits) == pytest.approx(expected, abs=0.006), (path, text)
        checked.add(path)
    for n in range(len(document["sessions"])):
        for key in ("with.tokens", "without.tokens", "with.cost", "without.cost", "ratios.cost", "turns"):
            assert f"sessions.{n}.{key}" in checked
    assert {"total.with.tokens", "total.without.cost", "total.ratios.cost"} <= checked


def test_a_shortened_results_original_opens_on_a_click(opened: tuple[Page, dict[str, Any]]) -> None:
    """Click open on a shortened result: what the model saw and the original are in the page, the
    original byte for byte as the log recorded it."""
    page, document = opened
    assert page.evaluate("document.querySelectorAll('tr.panel').length") == 0
    session, call_id = page.evaluate(
        "(() => { const b = document.querySelector('button[data-open]'); return [+b.dataset.s, b.dataset.open]; })()"
    )
    page.click("button[data-open]")
    original = page.wait_for("document.querySelector('tr.panel pre.original')?.textContent")
    seen = page.evaluate("document.querySelector('tr.panel pre.seen').textContent")
    source = document["sessions"][session]["source"]
    (recorded,) = [r for r in load_sessions(source.split("#")[0]) if r.source == source]
    results = [
        p
        for m in get_format(recorded.api_format).load(recorded.messages)
        for p in m.parts
        if isinstance(p, ToolResultPart) and p.call_id == call_id
    ]
    assert original == results[0].full_text
    assert seen and seen != original and len(seen) < len(original)
    assert page.errors == []


def test_screenshot_is_not_blank(opened: tuple[Page, dict[str, Any]]) -> None:
    pil = pytest.importorskip("PIL.Image")
    page, _ = opened
    page.evaluate("window.scrollTo(0, document.querySelector('#s-0 svg').getBoundingClientRect().top - 200)")
    png = page.screenshot()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    image = pil.open(io.BytesIO(png)).convert("RGB")
    assert image.size == (1280, 900)
    colors = image.getcolors(maxcolors=1 << 20) or []
    assert len(colors) > 50  # text, lines and areas, not one flat colour
    white = sum(count for count, rgb in colors if min(rgb) > 245)
    assert white < 0.97 * image.size[0] * image.size[1]


def test_trace_records_each_results_life_and_repairs() -> None:
    """On the example session (broken and oversized): the repairs made, each persisted result with
    the reason the budget gives and its form, and the request rows add up to the replay's."""
    (recorded,) = load_sessions(EXAMPLE)
    trace = SessionTrace(recorded)
    result = replay_session(recorded, get_counter("chars"), on_request=trace)
    assert len(trace.rows) == result.turns
    assert sum(row[8] for row in trace.rows) == result.with_.tokens
    assert sum(row[2] for row in trace.rows) == result.without.tokens
    assert {r["kind"] for r in trace.repairs} == set(result.repairs)
    assert len(trace.repairs) == sum(result.repairs.values())
    assert trace.results
    for life in trace.results.values():
        assert life.moves and all(m.reason for m in life.moves)
        assert life.forms[0] and len(life.forms[0]) == life.original_chars
        for m in life.moves:
            assert len(life.forms[m.form]) == m.chars < life.original_chars
    persisted = [life for life in trace.results.values() if life.entered == "persisted"]
    assert persisted and "budget" in persisted[0].moves[0].reason


def test_the_page_is_one_file_that_asks_for_nothing(tmp_path: Path) -> None:
    """On the shipped example: one HTML file, a policy that forbids any request, every script inline."""
    out = tmp_path / "r.html"
    done = toolkeep("inspect", str(EXAMPLE), "-o", str(out), "--tokens", "chars", "--quiet", cwd=tmp_path)
    assert "wrote" in done.stderr
    html = out.read_text(encoding="utf-8")
    assert "default-src 'none'" in html
    assert "<script src" not in html and "<link" not in html and "@import" not in html
    assert "type=application/octet-stream id=b-0-0>" in html
