"""The README cannot rot: it stays a front door (short), names every CLI command, and its set-up
commands exist, point at files in the repo and do what they say; the configuration page's table
is the config's own."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import toolkeep

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
SCRIPT = Path(sys.executable).with_name("toolkeep")
TOOLKEEP = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "toolkeep"]


def shell_blocks() -> list[str]:
    """The commands in the README's ``sh`` code blocks."""
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", README, re.DOTALL)]


def cli_commands() -> list[str]:
    click = pytest.importorskip("click")
    from toolkeep.cli import cli

    assert isinstance(cli, click.Group)
    return sorted(cli.commands)


@pytest.mark.parametrize("command", cli_commands())
def test_every_command_is_in_readme(command: str) -> None:
    """Each ``toolkeep`` command is named in the README as ``toolkeep COMMAND``."""
    assert f"toolkeep {command}" in README


def test_readme_is_a_front_door() -> None:
    """At most 150 lines: the detail is on the documentation site."""
    assert README.count("\n") <= 150


def test_setup_and_test_commands() -> None:
    """Set up and the main job, each on a line of its own (run in order); then the tests."""
    blocks = shell_blocks()
    setup, tests = blocks[0].splitlines(), blocks[1]
    assert (
        len(setup) == 2 and "pip install" in setup[0] and setup[1].startswith(".venv/bin/toolkeep prepare ")
    )
    assert tests == "bash scripts/test"


def test_ci_runs_the_readme_test_command() -> None:
    """``.ci/run`` runs the same test command as the README."""
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert shell_blocks()[1] in ci.splitlines()


def test_setup_command_files_exist() -> None:
    """Every repo path the set-up commands name exists."""
    for word in shlex.split(shell_blocks()[0].replace("&&", " ")) + shlex.split(shell_blocks()[1]):
        if word.startswith(("examples/", "scripts/")):
            assert (REPO / word).is_file(), word


def test_readme_main_job_runs_on_the_example(tmp_path: Path) -> None:
    """The README's prepare command, run on the shipped example, repairs and persists under the
    default policy, and says which ran; with ``--policy spec`` it also compacts by age."""
    prepare = shell_blocks()[0].splitlines()[1]
    args = shlex.split(prepare)[1:]
    args = [
        str(REPO / a) if a.startswith("examples/") else str(tmp_path / a) if a.startswith("demo/") else a
        for a in args
    ]
    out_path = Path(args[args.index("-o") + 1])
    report_path = tmp_path / "report.json"
    for policy in ("economy", "spec"):
        named = [] if policy == "economy" else ["--policy", policy]
        result = subprocess.run(
            [*TOOLKEEP, *args, "--report", str(report_path), *named], capture_output=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        assert result.stderr.decode().startswith(f"toolkeep: policy {policy}, ")
        report = json.loads(report_path.read_text(encoding="utf-8"))
        assert toolkeep.validate(json.loads(out_path.read_text(encoding="utf-8"))) == []
        repairs, results = report["repairs"], report["results"]
        assert report["policy"] == policy
        assert repairs["synthetic"] and repairs["orphans_removed"] and repairs["relocated"]
        assert results["persisted"] and report["chars"]["after"] < report["chars"]["before"]
        assert results["summarized"] == (2 if policy == "spec" else 0) and results["truncated"] == 0
        if policy == "economy":  # the line getting-started quotes is the one printed...
            page = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
            quoted = re.search(r"```text\n(toolkeep: policy economy, [^\n]*)\n```", page)
            assert quoted is not None
            said, printed = quoted.group(1), result.stderr.decode().splitlines()[0]
            after = re.compile(r"-> ([\d,]+)$")
            assert after.sub("", printed) == after.sub("", said)
            # ...but for the chars after, which count the saved files' paths (the clone's own)
            figures = [int(after.search(line).group(1).replace(",", "")) for line in (said, printed)]  # type: ignore[union-attr]
            assert abs(figures[0] - figures[1]) < 0.01 * figures[0], (said, printed)


def test_configuration_table_matches_config() -> None:
    """Every environment variable in the configuration page's table is one the config reads."""
    from toolkeep.config import ENV_VARIABLES

    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    for primary, *fallback in ENV_VARIABLES.values():
        assert f"| `{primary}` | {' '.join(f'`{f}`' for f in fallback) or '(none)'} |" in page
