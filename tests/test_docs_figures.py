"""The documentation's figures have one source each, and its words are the users'.

Benchmark figures on the site are ``{{ fig.NAME }}``, read from bench/results.md when the site is
built (docs/_hooks/figures.py): a page that writes a ratio by hand, a name the results do not
hold, or a README figure that is not the results' fails here. Preview sizes are measured when the
site is built; the one size a page states in prose is checked against a measurement here. No page,
no CLI help and no docstring the API reference shows says the project's internal words.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
PAGES = sorted((REPO / "docs").rglob("*.md"))
sys.path.insert(0, str(REPO / "docs" / "_hooks"))
import figures as figures_hook  # noqa: E402

sys.path.pop(0)

FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
RATIO = re.compile(r"\b\d\.\d\dx\b")  # a cost ratio as the benches write them (0.38x)
PRICES = {"1.25x", "0.25x"}  # price-list multipliers (toolkeep.pricing), not measured figures
FACTS = re.compile(r"\b\d+(?:\.\d)? % (?:of (?:the )?(?:later-used )?facts|visible)")


def prose(text: str) -> str:
    """``text`` without its fenced blocks."""
    return FENCE.sub("", text)


def test_every_figure_is_found_in_the_results() -> None:
    from toolkeep.pricing import PRESETS

    assert {f"{p.cache_write:.2f}x" for p in PRESETS.values()} >= {"1.25x"}
    assert {f"{p.cache_read:.2f}x" for p in PRESETS.values()} >= {"0.25x"}
    found = figures_hook.figures()
    assert found["economics.economy.pooled"].endswith("x")
    assert all(v for v in found.values())


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_page_figures_render_and_none_is_written_by_hand(page: Path) -> None:
    """Every ``{{ fig.NAME }}`` names a figure the results hold, and no ratio or share of facts is
    written by hand (where two copies of one figure could disagree)."""
    text = page.read_text(encoding="utf-8")
    for name in re.findall(r"\{\{ *fig\.([\w.]+) *\}\}", figures_hook.CODE.sub("", text)):
        assert name in figures_hook.figures(), f"{page.name}: unknown figure {name}"
    bare = figures_hook.FIGURE.sub("", prose(text))
    assert [r for r in RATIO.findall(bare) if r not in PRICES] == [], page.name
    assert FACTS.findall(bare) == [], page.name


# where the README states a figure, and which one it is (GitHub shows no build step)
README_FIGURES = {
    r"on (\d+) real sessions": "economics.sessions",
    r"`clear_tool_uses`: (\d\.\d\dx) cost": "economics.anthropic_clear.pooled",
    r"`clear_tool_uses`: [\d.]+x cost, (\d+ %) of later-used facts": "economics.anthropic_clear.visible",
    r"\| (\d\.\d\dx) cost, \d+ % visible": "economics.economy.pooled",
    r"\| [\d.]+x cost, (\d+ %) visible": "economics.economy.visible",
}


def test_readme_figures_are_the_results() -> None:
    """Each figure the README states is the one bench/results.md holds, and it states no other."""
    found = figures_hook.figures()
    for pattern, name in README_FIGURES.items():
        m = re.search(pattern, README)
        assert m is not None, pattern
        assert m[1] == found[name], (name, m[1], found[name])
    stated = [r for r in RATIO.findall(prose(README)) if r not in PRICES]
    assert len(stated) == sum(1 for n in README_FIGURES.values() if found[n].endswith("x")), stated


def test_the_preview_size_stated_is_the_measured_one() -> None:
    """The prose says "about 5,100 chars" for a plain preview: what the build measures for prose,
    and for anything under ``spec``, rounds to it."""
    table = figures_hook.preview_table()
    rows = {cells[0]: cells[1:] for cells in (r.strip("|").split("|") for r in table.splitlines()[2:])}
    sizes = {kind.strip(): [int(c.replace(",", "")) for c in cells] for kind, cells in rows.items()}
    assert all(4_900 <= spec <= 5_300 for _, spec in sizes.values()), sizes
    assert 4_900 <= sizes["prose"][0] <= 5_300, sizes
    assert max(economy for economy, _ in sizes.values()) > 8_000  # longer for logs, hashes, source
    assert "about 5,100 chars" in (REPO / "docs" / "configuration.md").read_text()


# ------------------------------------------------------------------------------------------- words

INTERNAL = re.compile(r"\bSPEC\b|ChatCLI|CHATCLI_|\.\./shared|\b[Ss]eed\b")
# the policy's name, as code, is what users type; ChatCLI's names only in the migration note
ALLOWED = re.compile(
    r'`seed`|``seed``|"seed"|policy="seed"|`policy="seed"`|\|seed\b|\bseed\||; seed, |Seed\w+|--randomly-seed|\{\{ fig\.[\w.]+ \}\}'
)


def internal_words(text: str) -> list[str]:
    return [m[0] for m in INTERNAL.finditer(ALLOWED.sub("", text))]


def test_readme_says_no_internal_word() -> None:
    assert internal_words(README) == []


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_pages_say_no_internal_word(page: Path) -> None:
    """ChatCLI is named only in the configuration page's migration note and its variables'
    fallback column."""
    text = page.read_text(encoding="utf-8")
    if page.name == "configuration.md":
        text = text[: text.index("## Moving from ChatCLI")]
        text = re.sub(r"`CHATCLI_\w+`", "", text)
    assert internal_words(text) == [], page.name


def cli_help() -> dict[str, str]:
    sys.path.insert(0, str(REPO / "docs" / "_hooks"))
    try:
        import cli_reference
    finally:
        sys.path.pop(0)
    return {path: cli_reference.help_text(path) for path, _ in cli_reference.commands()}


def test_cli_help_says_no_internal_word_and_no_markup() -> None:
    for path, text in cli_help().items():
        assert internal_words(text) == [], path
        assert "``" not in text and not re.search(r":(class|func|meth|data|mod):`", text), path


def api_objects() -> list[Any]:
    """The objects the API reference page shows (``::: dotted.name``)."""
    found = []
    page = (REPO / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    for name in re.findall(r"^::: ([\w.]+)$", page, re.MULTILINE):
        module, _, attr = name.rpartition(".")
        try:
            found.append(getattr(importlib.import_module(module), attr))
        except (ImportError, AttributeError):
            found.append(importlib.import_module(name))
    return found


def test_api_reference_docstrings_say_no_internal_word() -> None:
    for obj in api_objects():
        docs = [obj.__doc__ or ""]
        for name, member in vars(obj).items() if isinstance(obj, type) else ():
            if not name.startswith("_"):
                docs.append(getattr(member, "__doc__", "") or "")
        words = [w for d in docs for w in internal_words(d)]
        assert words == [], getattr(obj, "__qualname__", obj)
