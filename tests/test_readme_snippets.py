"""Every ```python block of README.md runs, as a real subprocess in a temp dir, offline.

A block that cannot run here is preceded by the line ``<!-- not run: WHY -->`` (for example: it
calls a provider's API). Use it sparingly, and say why: such a block is still compiled, and its
``toolkeep`` imports are run, so a renamed module or class still fails the test; the examples in
``examples/`` (tests/test_examples.py) run what those blocks show.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"(?:<!-- not run: (?P<why>[^\n]*?) -->\n)?```python\n(?P<code>.*?)```", re.DOTALL)
MOST_NOT_RUN = 3
"""Blocks that may be marked: those that call a provider's API or need a model's package."""


def blocks() -> list[tuple[int, str, str | None]]:
    """``(line, code, why)`` of each block; ``why`` is the reason it is not run, or ``None``."""
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start("code")) + 1, m["code"], m["why"]) for m in BLOCK.finditer(text)]


def run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter in ``cwd``: no toolkeep setting from the environment, the
    tests' cache dir, placeholder API keys (nothing may reach a provider)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLKEEP_", "CHATCLI_"))}
    env["TOOLKEEP_CACHE_DIR"] = os.environ["TOOLKEEP_CACHE_DIR"]
    env["OPENAI_API_KEY"] = env["ANTHROPIC_API_KEY"] = "offline"
    (cwd / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(cwd / "tmp")
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_readme_has_python_blocks_and_few_are_not_run() -> None:
    found = blocks()
    assert len(found) >= 5
    marked = [line for line, _, why in found if why is not None]
    assert len(marked) <= MOST_NOT_RUN, marked
    assert all(why and len(why) > 20 for _, _, why in found if why is not None)  # a reason, not a tag


@pytest.mark.parametrize(("line", "code", "why"), blocks(), ids=[f"line{b[0]}" for b in blocks()])
def test_block_runs(line: int, code: str, why: str | None, tmp_path: Path) -> None:
    """The block exits 0 (a marked one: it compiles and its toolkeep imports run)."""
    if why is None:
        for name in re.findall(r"^from (pydantic_ai|langchain\w*|agents)\b", code, re.MULTILINE):
            pytest.importorskip(name)
        done = run(code, tmp_path)
        assert done.returncode == 0, f"README.md line {line}:\n{done.stderr[-3000:]}"
        return
    compile(code, f"README.md:{line}", "exec")
    imports = "\n".join(
        re.findall(r"^(?:from toolkeep\S* import .*|import toolkeep\S*)$", code, re.MULTILINE)
    )
    assert imports, "a block that is not run must at least import toolkeep"
    done = run(imports, tmp_path)
    assert done.returncode == 0, f"README.md line {line}:\n{done.stderr[-3000:]}"


def test_the_python_api_block_shows_the_repair(tmp_path: Path) -> None:
    """The first block prints the repair it promises (a synthetic result for the lost one)."""
    _, code, why = blocks()[0]
    assert why is None
    assert "synthetic" in run(code, tmp_path).stdout
