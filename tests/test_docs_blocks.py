"""Every code block of the README and of the documentation site runs, or is checked, here.

The convention (docs/contributing.md says it for writers):

- ```python runs as a real subprocess in a temp dir, offline (placeholder API keys, the tests'
  cache dir, no toolkeep setting from the environment), and must exit 0. A block that is only
  ``--8<-- "examples/NAME.py"`` shows an example, which tests/test_examples.py runs.
- ```sh runs in bash (``-e -o pipefail``) in a temp dir holding ``examples/``, with ``toolkeep``
  on the PATH; it must exit 0. Install lines (``python3 -m venv``, ``pip install``) are not run:
  the extras they name must exist. ``.venv/bin/toolkeep`` is the ``toolkeep`` under test.
- A block preceded by ``<!-- not run: WHY -->`` needs what a test cannot have (a real agent and
  its sign-in, the network, a server on your network, your home directory's logs, a server that
  runs until stopped). Such a block is still checked: a python block compiles and its toolkeep
  imports run; in a sh block every ``toolkeep`` command parses against the real CLI (its command
  and every flag exist, its arguments fit) and every ``pip install 'toolkeep[X]'`` names an extra
  that exists. The commands that start real agents are the ones tests/test_proxy_agents.py
  runs against the real clients.
- ```toml and ```json are parsed; ```text is output or a format shown, not code.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
BLOCK = re.compile(
    r"(?:<!-- not run: (?P<why>[^\n]*?) -->\n)?^```(?P<lang>\w*)\n(?P<code>.*?)^```", re.DOTALL | re.MULTILINE
)
SNIPPET = re.compile(r'^--8<-- "([^"]+)"\s*$')
LANGUAGES = {"python", "sh", "toml", "json", "text"}
BIN = Path(sys.executable).parent
# commands other branches are adding now: a block may name them before they are in this build
EXTRAS = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def blocks() -> list[tuple[str, str, str, str | None]]:
    """``(where, lang, code, why)`` of every fenced block; ``where`` is ``page:line``."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            where = f"{page.relative_to(REPO)}:{text.count(chr(10), 0, m.start('code'))}"
            found.append((where, m["lang"], m["code"], m["why"]))
    return found


ALL = blocks()


def of(*langs: str) -> list[tuple[str, str, str | None]]:
    return [(where, code, why) for where, lang, code, why in ALL if lang in langs]


def clean_env(cwd: Path) -> dict[str, str]:
    """No toolkeep setting from the environment, the cache and tmp dirs in ``cwd``, placeholder
    API keys (nothing may reach a provider), the toolkeep under test first on the PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLKEEP_", "CHATCLI_"))}
    env["TOOLKEEP_CACHE_DIR"] = str(cwd / "cache")
    env["OPENAI_API_KEY"] = env["ANTHROPIC_API_KEY"] = "offline"
    (cwd / "tmp").mkdir(exist_ok=True)
    env["TMPDIR"] = str(cwd / "tmp")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_every_block_has_a_known_language() -> None:
    """An unmarked or unknown fence would be neither run nor checked."""
    assert ALL
    assert {lang for _, lang, _, _ in ALL} <= LANGUAGES, {
        (w, lang) for w, lang, _, _ in ALL if lang not in LANGUAGES
    }


def test_not_run_blocks_say_why() -> None:
    """A reason, not a tag; and few of them on each page."""
    for where, _, _, why in ALL:
        assert why is None or len(why) > 20, where


# ------------------------------------------------------------------------------------------- python


@pytest.mark.parametrize(("where", "code", "why"), of("python"), ids=[b[0] for b in of("python")])
def test_python_block(where: str, code: str, why: str | None, tmp_path: Path) -> None:
    """The block exits 0; a marked one compiles and its toolkeep imports run."""
    included = SNIPPET.match(code.strip())
    if included:  # an example shown whole: tests/test_examples.py runs it
        from .test_examples import SCRIPTS

        path = included[1]
        assert path.startswith("examples/") and Path(path).name in SCRIPTS, where
        return
    if why is None:
        for name in re.findall(r"^from (pydantic_ai|langchain\w*|agents)\b", code, re.MULTILINE):
            pytest.importorskip(name)
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=clean_env(tmp_path), capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, f"{where}:\n{done.stderr[-3000:]}"
        return
    compile(code, where, "exec")
    imports = "\n".join(
        re.findall(r"^(?:from toolkeep\S* import .*|import toolkeep\S*)$", code, re.MULTILINE)
    )
    assert imports, "a block that is not run must at least import toolkeep"
    done = subprocess.run(
        [sys.executable, "-c", imports], cwd=tmp_path, env=clean_env(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 0, f"{where}:\n{done.stderr[-3000:]}"


def test_the_readmes_library_block_shows_the_repair(tmp_path: Path) -> None:
    """The README's first python block prints the one repair it promises."""
    where, code, _ = next(b for b in of("python") if b[0].startswith("README.md"))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=clean_env(tmp_path), capture_output=True, text=True
    )
    assert ": 1 repairs;" in done.stdout, (where, done.stdout, done.stderr)


# ----------------------------------------------------------------------------------------------- sh


def install_lines(code: str) -> list[str]:
    return [
        line
        for line in code.splitlines()
        if re.match(r"\s*(python3 -m venv|(\.venv/bin/)?pip install)", line)
    ]


def check_installs(where: str, code: str) -> None:
    """Every ``toolkeep[X,Y]`` an install line names is an extra of pyproject.toml."""
    for line in install_lines(code):
        for extras in re.findall(r"(?:toolkeep|\.)\[([\w,-]+)\]", line):
            assert set(extras.split(",")) <= EXTRAS, (where, line)


@pytest.mark.parametrize(("where", "code", "why"), of("sh"), ids=[b[0] for b in of("sh")])
def test_sh_block(where: str, code: str, why: str | None, tmp_path: Path) -> None:
    """An unmarked block runs and exits 0; a marked one's toolkeep commands parse."""
    check_installs(where, code)
    if why is not None:
        for line in code.splitlines():
            words = shlex.split(line, comments=True)
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value before the command
            if words and words[0] in ("toolkeep", ".venv/bin/toolkeep"):
                parse(where, words[1:])
        return
    if code.strip() == "bash scripts/test":
        pytest.skip("the test suite itself (tests/test_docs.py checks it is the one CI runs)")
    script = "\n".join(
        line.replace(".venv/bin/toolkeep", "toolkeep")
        for line in code.splitlines()
        if line not in install_lines(code)
    )
    (tmp_path / "examples").symlink_to(REPO / "examples")
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script], cwd=tmp_path, env=clean_env(tmp_path),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"{where}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def parse(where: str, args: list[str]) -> None:
    """``toolkeep ARGS`` parses against the CLI: the command exists, every flag given exists and
    takes its value (click's own parser, no callback run); a path that does not exist here (your
    logs) is the one refusal allowed."""
    import click

    from toolkeep.cli import cli

    command: click.Command = cli
    ctx = click.Context(cli, info_name="toolkeep")
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        name = args[0]
        if name not in command.commands:
            pytest.fail(f"{where}: no command 'toolkeep {name}'")
        command, args = command.commands[name], args[1:]
        ctx = click.Context(command, info_name=name, parent=ctx)
    try:
        command.parse_args(ctx, list(args))
    except click.BadParameter as exc:
        if "does not exist" not in exc.format_message():
            pytest.fail(f"{where}: toolkeep {' '.join(args)}: {exc.format_message()}")
    except click.ClickException as exc:
        pytest.fail(f"{where}: toolkeep {' '.join(args)}: {exc.format_message()}")


# ------------------------------------------------------------------------------------ toml and json


@pytest.mark.parametrize(("where", "code", "why"), of("toml", "json"), ids=[b[0] for b in of("toml", "json")])
def test_data_block_parses(where: str, code: str, why: str | None) -> None:
    lang = next(lang for w, lang, _, _ in ALL if w == where)
    if lang == "toml":
        tomllib.loads(code)
    else:
        json.loads(code)


# --------------------------------------------------------------------------------- the CLI reference


def test_the_cli_reference_covers_every_command() -> None:
    """The reference page is written from the commands at build time: every command and
    subcommand gets its section, with every option of its help."""
    sys.path.insert(0, str(REPO / "docs" / "_hooks"))
    try:
        import cli_reference
    finally:
        sys.path.pop(0)
    from toolkeep.cli import cli

    page = (REPO / "docs" / "reference" / "cli.md").read_text()
    assert cli_reference.PLACEHOLDER in page
    written = cli_reference.reference()
    paths = [path for path, _ in cli_reference.commands()]
    assert {p.split()[1] for p in paths if " " in p} == set(cli.commands)
    for path, command in cli_reference.commands():
        assert f"## `{path}`" in written
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--"):
                    assert opt in written, (path, opt)
    assert "auto|anthropic|openai-chat|openai-responses|gemini|bedrock|langchain" in written
