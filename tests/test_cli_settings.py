"""The config's settings as flags of ``prepare`` and ``replay``, each also read from its variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from toolkeep.cli import cli
from toolkeep.cli._settings import _Setting, config_options, flag_of
from toolkeep.config import ENV_VARIABLES, Config, _parse_env
from toolkeep.exceptions import ConfigError

from .strategies import assistant, property_settings, tool_result, tool_use, user

SCRIPT = Path(sys.executable).with_name("toolkeep")
TOOLKEEP = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "toolkeep"]
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "broken-session.json"


def run(*args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLKEEP_", "CHATCLI_"))}
    clean["TOOLKEEP_CACHE_DIR"] = os.environ["TOOLKEEP_CACHE_DIR"]
    return subprocess.run([*TOOLKEEP, *args], capture_output=True, timeout=300, env={**clean, **env})


def one_error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err.strip()


def options(command: str) -> dict[str, click.Option]:
    params = cli.commands[command].params
    return {o: p for p in params if isinstance(p, click.Option) for o in p.opts}


@pytest.fixture
def history_file(tmp_path: Path) -> Path:
    """A session of its own whose results the settings change: sizes past every limit, ages past
    both microcompaction ages."""
    history: list[Any] = [user(f"settings flags {tmp_path.name}")]
    for i in range(6):
        history += [assistant(tool_use(f"t{i}", "grep")), user(tool_result(f"t{i}", f"{i} line\n" * 2_500))]
    history.append(assistant("done"))
    path = tmp_path / "in.json"
    path.write_text(json.dumps(history), encoding="utf-8")
    return path


class TestEveryFlag:
    @pytest.mark.parametrize("command", ["prepare", "replay"])
    def test_every_setting_with_its_variables(self, command: str) -> None:
        """Each setting of the config's variable map is a flag named after its field, reading
        those variables in the same order."""
        found = options(command)
        for name, variables in ENV_VARIABLES.items():
            option = found[flag_of(name)]
            assert option.name == name
            assert option.envvar == list(variables)

    @pytest.mark.parametrize("command", sorted(cli.commands))
    def test_no_flag_twice(self, command: str) -> None:
        """No two options of a command share a flag (a setting a command names itself is its own)."""
        flags = [o for p in cli.commands[command].params for o in (*p.opts, *p.secondary_opts)]
        assert len(flags) == len(set(flags))

    def test_a_command_s_own_option_wins(self) -> None:
        """An option the command already has (``replay --pricing`` once pricing is a setting) is
        left alone: no second flag, and the config still reads the variable."""

        @click.command()
        @config_options
        @click.option("--policy", "policy_name", default="mine")
        def command(policy_name: str, config: Config) -> None:
            click.echo(f"{policy_name} {config.policy} {config.max_result_chars}")

        flags = [o for p in command.params for o in p.opts]
        assert flags.count("--policy") == 1 and "--max-result-chars" in flags
        runner = CliRunner()
        done = runner.invoke(command, ["--max-result-chars", "7"], env={"TOOLKEEP_POLICY": "seed"})
        assert done.output == "mine seed 7\n", done.output
        done = runner.invoke(command, ["--policy", "theirs"], env={"TOOLKEEP_POLICY": None})
        assert done.output == "theirs economy 20000\n", done.output

    def test_help_names_each_variable(self) -> None:
        out = run("prepare", "-h").stdout.decode()
        for name, variables in ENV_VARIABLES.items():
            assert flag_of(name) in out and variables[0] in out


class TestValues:
    def test_flag_and_variable_give_the_same_bytes(self, history_file: Path) -> None:
        """``--max-result-chars 5000`` and ``TOOLKEEP_TOOL_RESULT_MAX_CHARS=5000`` (and ChatCLI's
        name) give the same output, another than the default's; the flag wins over the variable."""
        default = run("prepare", str(history_file)).stdout
        flag = run("prepare", str(history_file), "--max-result-chars", "5000")
        assert flag.returncode == 0, flag.stderr
        assert flag.stdout != default
        assert run("prepare", str(history_file), TOOLKEEP_TOOL_RESULT_MAX_CHARS="5000").stdout == flag.stdout
        assert run("prepare", str(history_file), CHATCLI_TOOL_RESULT_MAX_CHARS="5_000").stdout == flag.stdout
        both = run(
            "prepare", str(history_file), "--max-result-chars", "5000", TOOLKEEP_TOOL_RESULT_MAX_CHARS="9"
        )
        assert both.stdout == flag.stdout

    def test_policy_from_flag_or_variable(self, history_file: Path) -> None:
        """``--policy spec`` is ``TOOLKEEP_POLICY=spec``, and is not the default policy, which
        ``--policy default`` (or the variable) names: ``economy``, as the report says."""
        flag = run("prepare", str(history_file), "--policy", "spec", "--report", "-")
        assert flag.returncode == 0, flag.stderr
        env = run("prepare", str(history_file), "--report", "-", TOOLKEEP_POLICY="spec")
        assert env.stdout == flag.stdout
        assert b'"policy": "spec"' in flag.stdout
        default = run("prepare", str(history_file), "--report", "-")
        assert default.stdout != flag.stdout and b'"policy": "economy"' in default.stdout
        for named in (
            run("prepare", str(history_file), "--policy", "default", "--report", "-"),
            run("prepare", str(history_file), "--report", "-", TOOLKEEP_POLICY="default"),
            run("prepare", str(history_file), "--policy", "economy", "--report", "-"),
        ):
            assert named.returncode == 0, named.stderr
            assert named.stdout == default.stdout

    def test_booleans(self, history_file: Path) -> None:
        """``--keep-orphans true`` keeps an orphan result the default removes."""
        history = json.loads(history_file.read_text())
        history.insert(2, user(tool_result("orphan", "who called me")))
        history_file.write_text(json.dumps(history))
        kept = run("prepare", str(history_file), "--keep-orphans", "true").stdout
        assert b"who called me" in kept
        assert b"who called me" not in run("prepare", str(history_file), "--keep-orphans", "false").stdout
        assert run("prepare", str(history_file), TOOLKEEP_KEEP_ORPHANS="yes").stdout == kept

    def test_replay_takes_them_too(self) -> None:
        """``replay --policy seed --json`` measures the seed policy (another result than default)."""
        seed = run(
            "replay", str(EXAMPLE), "--tokens", "chars", "--json", "--policy", "seed", "--truncate-turns", "1"
        )
        assert seed.returncode == 0, seed.stderr
        default = run("replay", str(EXAMPLE), "--tokens", "chars", "--json")
        assert json.loads(seed.stdout)["total"] != json.loads(default.stdout)["total"]

    @pytest.mark.parametrize(
        ("args", "env", "said"),
        [
            (["--max-result-chars", "many"], {}, "'many' is not a whole number"),
            (["--turn-budget-chars", "-1"], {}, "'-1' must not be negative"),
            (["--keep-tmpdir", "perhaps"], {}, "'perhaps' is not a boolean"),
            (["--policy", "frugal"], {}, "'frugal' is not"),  # a policy / one of the choices
            ([], {"TOOLKEEP_POLICY": "frugal"}, "TOOLKEEP_POLICY"),
            ([], {"TOOLKEEP_MICROCOMPACT_TRUNCATE_TURNS": "x"}, "'x' is not a whole number"),
            (["--truncate-turns", "5", "--summarize-turns", "3"], {}, "must not be smaller than"),
        ],
    )
    @pytest.mark.parametrize("command", ["prepare", "replay"])
    def test_a_bad_value_is_exit_2_with_one_line(
        self, command: str, args: list[str], env: dict[str, str], said: str
    ) -> None:
        line = one_error_line(run(command, str(EXAMPLE), *args, **env))
        assert said in line


@property_settings(200)
@given(name=st.sampled_from(sorted(ENV_VARIABLES)), text=st.text(max_size=10))
def test_a_flag_reads_what_its_variable_reads(name: str, text: str) -> None:
    """Any text: the flag's value is the variable's, or both are refused."""
    try:
        expected: Any = _parse_env(name, "VAR", text)
    except ConfigError:
        expected = ConfigError
    try:
        got: Any = _Setting(name).convert(text, None, None)
    except click.BadParameter:
        got = ConfigError
    if name == "policy" and expected is not ConfigError and got is ConfigError:
        return  # the flag also refuses a policy name that does not exist (the variable, later)
    assert got == expected
