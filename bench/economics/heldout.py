"""Held-out sessions: a scripted agent that works on real output of kinds the 27 lack.

``python -m bench.economics.heldout [--write] [--sessions] [--rebuild]`` builds (once, into a cache
outside the repository) and prices sessions in Anthropic Messages shape whose tool results are the
REAL output of commands run on this machine at build time:

- greps and file reads over a large real source tree (the CPython standard library under
  ``sys.base_prefix``, and the bench venv's ``site-packages``);
- real test-suite runs (``python -m unittest -v`` on stdlib test modules, ``pytest`` on the tests
  an installed package ships);
- real JSON dumps (``pip list --format=json``, ``pip inspect``, ``python -m json.tool`` on JSON
  files found in the tree);
- ``git log`` / ``git show`` / ``git diff`` of this repository at a fixed commit;
- directory trees (``find``, ``ls -la``, ``du``), ``pydoc`` pages and real tracebacks.

None of the policies was tuned on them, and none may be: they are a check, not a target.

**The agent.** Each session has a task, a kind of working directory and a seed. At every step the
agent runs one shell command (a ``bash`` tool call) and reads its real output. From each result it
notes *leads*: paths with line numbers, definitions, test ids, package names and versions, commit
hashes, JSON keys, error lines, counts. Then it either follows a lead (reads the file at that line,
reruns that test, shows that commit, greps that name, quotes that error) or explores afresh (a new
grep, test module, dump or listing, chosen from the session's mix). Following a lead writes its
token in the call or the text, as agents do: that is what ``facts.py`` counts as a later-used fact.
Which lead: with probability ``near`` (0.55) one noted in the last 3 results, else one from 10 to
30 results back (falling back to any older than 3), never the same lead twice, preferring tokens
the agent has not written yet. The text of a follow-up also recalls a lead 10+ results old with
probability 0.2, and that of a fresh action quotes a lead (picked as above) with probability
0.35; the closing message names six leads of the session. All choices come from
``random.Random(f"{session}:{seed}")`` over leads in the order they were noted, so the same
outputs give the same sessions. Output is capped at 50,000 chars per result (as agent harnesses
cap it), with a line saying how much was cut.

**Determinism.** The choices are deterministic given the outputs; the outputs are what this
machine prints (test timings vary from run to run), so a build is cached in
``$TOOLKEEP_HELDOUT_CACHE`` (default ``~/.cache/toolkeep-bench/heldout``, never the repository) and
reused until ``--rebuild``. ``--sessions`` prints one line per session.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cost import CostModel
from .data import DATA_DIR, REPO, Trajectory, block_text, load_trajectories
from .facts import FactTally
from .report import HELDOUT, write_subsection
from .run import Row, all_policies, compute_facts, run_policy, summarize

VERSION = 1
CACHE = Path(os.environ.get("TOOLKEEP_HELDOUT_CACHE", Path.home() / ".cache" / "toolkeep-bench" / "heldout"))
OUTPUT_CAP = 50_000
STDLIB = Path(sysconfig.get_paths()["stdlib"])
SITE = Path(sysconfig.get_paths()["purelib"])
REPO_COMMIT = "12a49b1"
"""This repository's commit the git sessions read (fixed, so they do not move with main)."""

TEST_MODULES = (
    "test.test_json",
    "test.test_textwrap",
    "test.test_difflib",
    "test.test_shlex",
    "test.test_string",
    "test.test_heapq",
    "test.test_bisect",
    "test.test_fnmatch",
    "test.test_statistics",
    "test.test_fractions",
    "test.test_csv",
    "test.test_configparser",
    "test.test_argparse",
    "test.test_collections",
    "test.test_functools",
    "test.test_ipaddress",
    "test.test_calendar",
    "test.test_enum",
    "test.test_tomllib",
    "test.test_dataclasses",
)
PYTEST_SUITES = ("referencing/tests", "jsonschema/tests", "certifi/tests", "jsonschema_specifications/tests")
GREP_PATTERNS = (
    "def __repr__",
    "raise TypeError(",
    "warnings.warn(",
    "DeprecationWarning",
    "class .*Error(Exception)",
    "@functools.lru_cache",
    "_sentinel",
    "NotImplementedError",
    "sys.platform ==",
    "os.environ.get(",
    "async def ",
    "__slots__ = ",
    "re.compile(",
    "TODO",
    "def __init_subclass__",
    "_MAXCACHE",
    "except ImportError:",
    "@property",
    "isinstance(.*, str)",
    "def _check",
)
PYDOC_MODULES = (
    "json",
    "textwrap",
    "difflib",
    "shlex",
    "heapq",
    "fractions",
    "statistics",
    "argparse",
    "csv",
)
ERROR_SNIPPETS = (
    "import json; json.loads('{\"a\": 1,}')",
    "import tomllib; tomllib.loads('a = [1, 2')",
    "import ipaddress; ipaddress.ip_network('10.0.0.1/24')",
    "import fractions; fractions.Fraction('1/0')",
    "import configparser; p = configparser.ConfigParser(); p.read_string('[a]\\nb = %(c)s'); p['a']['b']",
    "import statistics; statistics.mean([])",
    "import csv, io; list(csv.reader(io.StringIO('a,\"b'), strict=True))",
    "import argparse; p = argparse.ArgumentParser(); p.add_argument('--n', type=int); p.parse_args(['--n', 'x'])",
)


@dataclass(frozen=True)
class Lead:
    """Something a result showed that the agent may come back to."""

    kind: str
    """``path_line``, ``path``, ``dir``, ``ident``, ``test``, ``test_module``, ``package``,
    ``commit``, ``key``, ``error``, ``number``."""
    token: str
    step: int
    path: str = ""
    line: int = 0


@dataclass(frozen=True)
class Spec:
    """One held-out session: its task, working tree, length and mix of fresh actions."""

    name: str
    task: str
    tree: str
    """``stdlib``, ``site`` or ``repo``."""
    steps: int
    mix: dict[str, int]
    """Weight of each fresh action (see ``Agent.explore``)."""
    follow: float = 0.6
    """Share of steps that follow a lead."""
    near: float = 0.55
    seed: int = 0


SPECS: tuple[Spec, ...] = (
    Spec(
        "json-encoder-bug",
        "Find why json.dumps sorts keys of nested dicts differently; read the encoder and run its tests.",
        "stdlib",
        24,
        {"grep": 3, "tests": 2, "error": 1, "read": 2},
    ),
    Spec(
        "deprecation-audit",
        "List every DeprecationWarning the standard library raises, with file and line, and check each one.",
        "stdlib",
        120,
        {"grep": 5, "read": 3, "tree": 1},
        follow=0.65,
    ),
    Spec(
        "test-sweep",
        "Run the stdlib test modules for text processing and report what each checks.",
        "stdlib",
        60,
        {"tests": 5, "grep": 1, "error": 1},
    ),
    Spec(
        "pip-inventory",
        "Inventory the bench venv: packages, versions, what each installs, and their JSON metadata.",
        "site",
        35,
        {"json": 4, "tree": 2, "grep": 1},
    ),
    Spec(
        "git-archaeology",
        "Explain how bench/economics came to be, from this repository's history.",
        "repo",
        80,
        {"git": 5, "grep": 1, "read": 2},
    ),
    Spec(
        "site-tree-survey",
        "Map the layout of site-packages: which packages are largest and what they ship.",
        "site",
        28,
        {"tree": 5, "grep": 1, "json": 1},
    ),
    Spec(
        "regex-cache",
        "Explain how re caches compiled patterns and where _MAXCACHE is used.",
        "stdlib",
        45,
        {"grep": 3, "read": 3, "tests": 1, "pydoc": 1},
    ),
    Spec(
        "pytest-suites",
        "Run the test suites installed packages ship and chase any failure to its source.",
        "site",
        70,
        {"pytest": 4, "grep": 2, "read": 2, "json": 1},
    ),
    Spec(
        "argparse-errors",
        "Reproduce argparse's error messages and find where each is raised.",
        "stdlib",
        50,
        {"error": 3, "grep": 3, "tests": 1, "read": 2},
    ),
    Spec(
        "long-refactor-plan",
        "Plan a refactor touching dataclasses, enum and typing: read, grep, test, and keep notes.",
        "stdlib",
        210,
        {"grep": 4, "read": 4, "tests": 2, "error": 1, "pydoc": 1, "tree": 1},
        follow=0.65,
    ),
    Spec(
        "repo-review",
        "Review this repository's src/toolkeep at the fixed commit: read modules, grep uses, check the log.",
        "repo",
        150,
        {"read": 4, "grep": 4, "git": 2},
    ),
    Spec(
        "json-dumps",
        "Dump every JSON file the venv ships, and the full pip metadata, and summarize the schemas.",
        "site",
        40,
        {"json": 6, "grep": 1},
    ),
    Spec(
        "pydoc-tour",
        "Read the pydoc pages of the text modules and check their examples against the source.",
        "stdlib",
        32,
        {"pydoc": 4, "grep": 2, "read": 2},
    ),
    Spec(
        "mixed-debugging",
        "Debug failing snippets in tomllib, ipaddress and fractions; read their parsers and tests.",
        "stdlib",
        90,
        {"error": 3, "read": 3, "grep": 2, "tests": 2},
    ),
    Spec(
        "short-lookups",
        "Answer quick questions about where things are defined in the stdlib.",
        "stdlib",
        20,
        {"grep": 4, "read": 1},
    ),
    Spec(
        "history-and-tests",
        "Match this repository's test files to the commits that added them.",
        "repo",
        65,
        {"git": 3, "read": 2, "grep": 2, "tree": 1},
    ),
    Spec(
        "venv-long-audit",
        "Audit the venv end to end: packages, their tests, their sources, their metadata.",
        "site",
        230,
        {"json": 2, "pytest": 2, "grep": 4, "read": 3, "tree": 2},
        follow=0.6,
    ),
)

_GREP_LINE = re.compile(r"^(?:\./)?([^:\s]+\.\w+):(\d+):(.*)$")
_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")
_TEST = re.compile(r"^(test\w*) \(([\w.]+)\)")
_PYTEST = re.compile(r"^(\S+\.py::\S+) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)")
_RAN = re.compile(r"^Ran (\d+) tests?")
_ERROR = re.compile(r"^([\w.]+(?:Error|Exception|Warning)): (.+)$")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\w+)')
_COMMIT = re.compile(r"^commit ([0-9a-f]{40})")
_STAT = re.compile(r"^ (\S+/\S+|\S+\.\w+)\s+\|\s+\d+")
_NAMEY = re.compile(r"[A-Za-z_][\w.]*")


class Runner:
    """Runs commands for real, once each per build (the same command in two sessions shares its
    output), with a fixed environment."""

    def __init__(self) -> None:
        self.outputs: dict[tuple[str, str], str] = {}
        bindir = str(Path(sys.executable).parent)
        self.env = {
            "PATH": bindir + os.pathsep + "/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/root"),
            "LC_ALL": "C.UTF-8",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "COLUMNS": "100",
            "NO_COLOR": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "GIT_PAGER": "cat",
        }

    def run(self, command: str, cwd: Path) -> str:
        key = (command, str(cwd))
        if key not in self.outputs:
            try:
                done = subprocess.run(
                    ["bash", "-c", command],
                    cwd=cwd,
                    env=self.env,
                    capture_output=True,
                    timeout=300,
                    check=False,
                    stdin=subprocess.DEVNULL,
                )
                text = (done.stdout + done.stderr).decode("utf-8", "replace")
                if done.returncode:
                    text += f"\n[exit code {done.returncode}]"
            except subprocess.TimeoutExpired:
                text = "[timed out after 300 s]"
            if len(text) > OUTPUT_CAP:
                text = text[:OUTPUT_CAP] + f"\n[output truncated: {len(text) - OUTPUT_CAP:,} more chars]"
            self.outputs[key] = text
        return self.outputs[key]


@dataclass
class Agent:
    """The scripted agent of one session."""

    spec: Spec
    runner: Runner
    messages: list[dict[str, Any]] = field(default_factory=list)
    leads: list[Lead] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    followed: set[Lead] = field(default_factory=set)
    steps: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(f"{self.spec.name}:{self.spec.seed}")
        self.cwd = {"stdlib": STDLIB, "site": SITE, "repo": REPO}[self.spec.tree]
        self.messages.append({"role": "user", "content": self.spec.task})
        self.written |= _tokens(self.spec.task)

    # -- one step ---------------------------------------------------------------------------

    def call(self, text: str, command: str, harvest: Callable[[str], None]) -> str:
        """One assistant message (its text and one ``bash`` call) and the real result."""
        call_id = f"toolu_{hashlib.sha256(f'{self.spec.name}:{self.steps}'.encode()).hexdigest()[:20]}"
        self.messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": text},
                    {"type": "tool_use", "id": call_id, "name": "bash", "input": {"command": command}},
                ],
            }
        )
        self.written |= _tokens(text) | _tokens(command)
        output = self.runner.run(command, self.cwd)
        self.messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": output}]}
        )
        self.steps += 1
        harvest(output)
        return output

    def note(self, kind: str, token: str, path: str = "", line: int = 0) -> None:
        if token:
            self.leads.append(Lead(kind, token, self.steps, path, line))

    def pick(self) -> Lead | None:
        """A lead to follow: recent (last 3 results) with probability ``near``, else 10-30 results
        back, else any; tokens not written yet first."""
        if not self.leads:
            return None
        now = self.steps
        if self.rng.random() < self.spec.near:
            pool = [x for x in self.leads if now - x.step <= 3]
        else:
            pool = [x for x in self.leads if 10 <= now - x.step <= 30] or [
                x for x in self.leads if now - x.step > 3
            ]
        pool = [x for x in pool or self.leads if x not in self.followed]
        if not pool:
            return None
        fresh = [x for x in pool if x.token not in self.written]
        lead = self.rng.choice(fresh or pool)
        self.followed.add(lead)
        return lead

    def run(self) -> list[dict[str, Any]]:
        """The whole session: ``spec.steps`` calls, then a closing message."""
        kinds = sorted(self.spec.mix)
        weights = [self.spec.mix[k] for k in kinds]
        self.explore(kinds[0] if "grep" not in kinds else "grep")
        while self.steps < self.spec.steps:
            lead = self.pick() if self.rng.random() < self.spec.follow else None
            if lead is None or not self.follow(lead):
                self.explore(self.rng.choices(kinds, weights)[0])
        tokens = list(dict.fromkeys(x.token for x in self.leads))
        recalled = self.rng.sample(tokens, min(6, len(tokens)))
        self.messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "Summary of what I found: " + ", ".join(f"`{t}`" for t in recalled) + ".",
                    }
                ],
            }
        )
        return self.messages

    def recall(self) -> str:
        """Now and then, a sentence quoting an older lead (a use 10-30 results later)."""
        if self.rng.random() >= 0.2:
            return ""
        old = [x for x in self.leads if self.steps - x.step >= 10 and x.token not in self.written]
        if not old:
            return ""
        lead = self.rng.choice(old)
        return f" Keeping in mind `{lead.token}` from earlier."

    # -- following a lead ---------------------------------------------------------------------

    def follow(self, lead: Lead) -> bool:
        """Act on ``lead``; False when it gives nothing to do (the agent explores instead)."""
        t = lead.token
        r = self.rng.random()
        q = shlex.quote
        if lead.kind == "path_line" and lead.path:
            lo = max(1, lead.line - 15)
            if self.spec.tree == "repo":
                cmd = f"git show {REPO_COMMIT}:{q(lead.path)} | sed -n '{lo},{lead.line + 45}p'"
            else:
                cmd = f"sed -n '{lo},{lead.line + 45}p' {q(lead.path)}"
            self.call(
                f"`{t}` is at {lead.path}:{lead.line}; reading around it.{self.recall()}",
                cmd,
                self.read_harvester(lead.path, lo),
            )
        elif lead.kind == "path":
            if self.spec.tree == "repo":
                cmd = f"git show {REPO_COMMIT}:{q(t)} | cat -n"
            else:
                cmd = f"cat -n {q(t)}" if r < 0.6 else f"grep -n 'def \\|class ' {q(t)}"
            self.call(f"Opening {t}.{self.recall()}", cmd, self.read_harvester(t, 1))
        elif lead.kind == "dir":
            cmd = f"ls -la {q(t)}" if r < 0.5 else f"find {q(t)} -maxdepth 2 | sort"
            self.call(f"Looking inside {t}.{self.recall()}", cmd, self.tree_harvester)
        elif lead.kind == "ident":
            cmd = self.grep_command(t, head=r < 0.5)
            self.call(f"Where else is `{t}` used?{self.recall()}", cmd, self.grep_harvester)
        elif lead.kind == "test":
            runner = "python -m pytest -v -p no:cacheprovider" if "::" in t else "python -m unittest -v"
            self.call(f"Rerunning `{t}` alone.{self.recall()}", f"{runner} {q(t)}", self.test_harvester)
        elif lead.kind == "test_module":
            self.call(
                f"Running the whole of {t}.{self.recall()}",
                f"python -m unittest -v {q(t)}",
                self.test_harvester,
            )
        elif lead.kind == "package":
            self.call(f"Details of {t}.{self.recall()}", f"pip show -f {q(t)}", self.pip_show_harvester)
        elif lead.kind == "commit":
            cmd = f"git show --stat {t}" if r < 0.5 else f"git show {t} | head -n 400"
            self.call(f"Commit {t}: what it changed.{self.recall()}", cmd, self.git_harvester)
        elif lead.kind in ("key", "number", "error"):
            if lead.kind == "error" and r < 0.6:
                fragment = re.sub(r"[^\w ]", ".", lead.token)[:40]
                self.call(
                    f"The error was `{t}`; finding where that message is raised.{self.recall()}",
                    self.grep_command(fragment, head=True),
                    self.grep_harvester,
                )
            else:
                return False
        else:
            return False
        return True

    def grep_command(self, pattern: str, *, head: bool) -> str:
        q = shlex.quote
        if self.spec.tree == "repo":
            cmd = f"git grep -n {q(pattern)} {REPO_COMMIT} -- src tests bench"
        else:
            cmd = f"grep -rn --include='*.py' --exclude-dir=site-packages {q(pattern)} ."
        return cmd + (" | head -n 120" if head else "")

    # -- exploring afresh ---------------------------------------------------------------------

    def explore(self, kind: str) -> None:
        rng = self.rng
        q = shlex.quote
        quoted = self.text_quote()
        if kind == "grep":
            pattern = rng.choice(GREP_PATTERNS)
            self.call(
                f"Searching for {pattern!r}.{quoted}",
                self.grep_command(pattern, head=rng.random() < 0.4),
                self.grep_harvester,
            )
        elif kind == "read":
            files = self.files()
            path = rng.choice(files)
            if self.spec.tree == "repo":
                cmd = f"git show {REPO_COMMIT}:{q(path)} | cat -n"
            else:
                cmd = f"cat -n {q(path)}"
            self.call(f"Reading {path}.{quoted}", cmd, self.read_harvester(path, 1))
        elif kind == "tests":
            module = rng.choice(TEST_MODULES)
            self.call(f"Running {module}.{quoted}", f"python -m unittest -v {module}", self.test_harvester)
        elif kind == "pytest":
            suite = rng.choice(PYTEST_SUITES)
            verbose = "-v" if rng.random() < 0.6 else "-q"
            self.call(
                f"Running the suite in {suite}.{quoted}",
                f"python -m pytest {verbose} -p no:cacheprovider {suite}",
                self.test_harvester,
            )
        elif kind == "json":
            choice = rng.random()
            if choice < 0.3:
                self.call(
                    f"Installed packages as JSON.{quoted}", "pip list --format=json", self.pip_list_harvester
                )
            elif choice < 0.45:
                self.call(f"Full metadata of the environment.{quoted}", "pip inspect", self.json_harvester)
            else:
                files = self.json_files()
                path = rng.choice(files) if files else ""
                if path:
                    self.call(
                        f"Pretty-printing {path}.{quoted}",
                        f"python -m json.tool {q(path)}",
                        self.json_harvester,
                    )
                else:
                    self.call(
                        f"Installed packages as JSON.{quoted}",
                        "pip list --format=json",
                        self.pip_list_harvester,
                    )
        elif kind == "tree":
            dirs = self.dirs()
            d = rng.choice(dirs)
            choice = rng.random()
            if choice < 0.4:
                cmd = f"find {q(d)} -maxdepth 3 | sort | head -n 400"
            elif choice < 0.7:
                cmd = f"ls -la {q(d)}"
            else:
                cmd = f"du -a {q(d)} | sort -n | tail -n 60"
            self.call(f"Layout of {d}.{quoted}", cmd, self.tree_harvester)
        elif kind == "git":
            choice = rng.random()
            if choice < 0.5:
                n = rng.choice((10, 20, 40))
                cmd = f"git log --stat -n {n} --skip={rng.randrange(0, 200)} {REPO_COMMIT}"
            elif choice < 0.8:
                cmd = f"git log --oneline -n 150 {REPO_COMMIT} -- {rng.choice(('bench', 'src/toolkeep', 'tests', 'README.md'))}"
            else:
                n = rng.randrange(5, 60)
                cmd = f"git diff --stat {REPO_COMMIT}~{n + 10} {REPO_COMMIT}~{n}"
            self.call(f"Looking at the history.{quoted}", cmd, self.git_harvester)
        elif kind == "error":
            snippet = rng.choice(ERROR_SNIPPETS)
            self.call(
                f"Reproducing the failure.{quoted}", f"python -c {q(snippet)}", self.traceback_harvester
            )
        elif kind == "pydoc":
            module = rng.choice(PYDOC_MODULES)
            self.call(
                f"The documentation of {module}.{quoted}",
                f"python -m pydoc {module}",
                self.read_harvester("", 1),
            )
        else:
            raise ValueError(f"unknown action {kind!r}")

    def text_quote(self) -> str:
        """A fresh action's text may quote a lead (near or far) without acting on it."""
        if self.rng.random() >= 0.35 or not self.leads:
            return ""
        lead = self.pick()
        if lead is None:
            return ""
        if lead.kind == "number":
            return f" (so far: {lead.token})"
        return (
            f" Noted `{lead.token}`"
            + (f" ({lead.path}:{lead.line})" if lead.path and lead.line else "")
            + "."
        )

    def files(self) -> list[str]:
        """Source files of the tree, from a real listing (cached by the runner)."""
        if self.spec.tree == "repo":
            out = self.runner.run(f"git ls-tree -r --name-only {REPO_COMMIT} -- src tests bench", self.cwd)
            return [x for x in out.splitlines() if x.endswith(".py")]
        out = self.runner.run(
            "find . -name '*.py' -size +4k -not -path '*/test*' -not -path './site-packages/*' | sort",
            self.cwd,
        )
        return [x[2:] for x in out.splitlines() if x.startswith("./")][:4000]

    def json_files(self) -> list[str]:
        out = self.runner.run(
            "find . -name '*.json' -size +1k -size -400k -not -path './site-packages/*' | sort", self.cwd
        )
        return [x[2:] for x in out.splitlines() if x.startswith("./")]

    def dirs(self) -> list[str]:
        if self.spec.tree == "repo":
            return ["src/toolkeep", "tests", "bench", "src/toolkeep/formats", "src/toolkeep/policies"]
        out = self.runner.run(
            "find . -mindepth 1 -maxdepth 1 -type d -not -name '__pycache__' -not -name site-packages | sort",
            self.cwd,
        )
        return [x[2:] for x in out.splitlines() if x.startswith("./")]

    # -- what each kind of result leaves to follow ----------------------------------------------

    def grep_harvester(self, output: str) -> None:
        for line in output.splitlines()[:400]:
            m = _GREP_LINE.match(line.removeprefix(f"{REPO_COMMIT}:"))
            if not m:
                continue
            path, number, body = m.group(1), int(m.group(2)), m.group(3)
            d = _DEF.match(body)
            token = d.group(1) if d else _first_name(body)
            self.note("path_line", token or path, path, number)
            if d and self.rng.random() < 0.3:
                self.note("ident", d.group(1))

    def read_harvester(self, path: str, first: int) -> Callable[[str], None]:
        def harvest(output: str) -> None:
            for n, line in enumerate(output.splitlines()):
                body = re.sub(r"^\s*\d+\t", "", line)
                d = _DEF.match(body)
                if d:
                    number = first + n
                    numbered = re.match(r"^\s*(\d+)\t", line)
                    if numbered:
                        number = int(numbered.group(1))
                    self.note("path_line" if path else "ident", d.group(1), path, number if path else 0)
                elif "import " in body and self.rng.random() < 0.05:
                    self.note("ident", _first_name(body.split("import", 1)[1]))
            self.error_lines(output)

        return harvest

    def test_harvester(self, output: str) -> None:
        for line in output.splitlines():
            m = _TEST.match(line)
            if m and self.rng.random() < 0.25:
                self.note("test", m.group(2))
                continue
            p = _PYTEST.match(line)
            if p and self.rng.random() < 0.25:
                self.note("test", p.group(1))
                continue
            r = _RAN.match(line)
            if r:
                self.note("number", f"{r.group(1)} tests")
            s = re.search(r"(\d{3,}) passed", line)
            if s:
                self.note("number", f"{s.group(1)} passed")
        self.error_lines(output)

    def error_lines(self, output: str) -> None:
        for line in output.splitlines():
            f = _FRAME.match(line)
            if f and not f.group(1).startswith("<"):
                path = f.group(1)
                rel = os.path.relpath(path, self.cwd) if path.startswith(str(self.cwd)) else ""
                if rel and not rel.startswith(".."):
                    self.note("path_line", f.group(3), rel, int(f.group(2)))
            e = _ERROR.match(line.strip())
            if e:
                self.note("error", f"{e.group(1)}: {e.group(2)}"[:120])

    def traceback_harvester(self, output: str) -> None:
        self.error_lines(output)

    def tree_harvester(self, output: str) -> None:
        for line in output.splitlines()[:600]:
            parts = line.split()
            if not parts:
                continue
            name = parts[-1].removeprefix("./")
            if name in (".", ".."):
                continue
            if name.endswith(".py") and self.rng.random() < 0.3:
                self.note("path", name if "/" in name else "")
            elif "/" in name and "." not in name.rsplit("/", 1)[-1] and self.rng.random() < 0.15:
                self.note("dir", name)
            elif line.split()[0].isdigit() and len(parts) == 2 and self.rng.random() < 0.1:
                self.note("number", parts[0])

    def pip_list_harvester(self, output: str) -> None:
        try:
            packages = json.loads(output.split("\n[exit", 1)[0])
        except ValueError:
            return
        for p in packages:
            if self.rng.random() < 0.15:
                self.note("package", p["name"])
                self.note("number", p["version"])

    def pip_show_harvester(self, output: str) -> None:
        for line in output.splitlines():
            if line.startswith(("Requires:", "Required-by:")):
                for name in line.split(":", 1)[1].split(","):
                    if name.strip() and self.rng.random() < 0.5:
                        self.note("package", name.strip())
            elif line.startswith("  ") and line.strip().endswith(".py") and self.rng.random() < 0.1:
                self.note("path", line.strip())

    def json_harvester(self, output: str) -> None:
        for m in re.finditer(r'"([A-Za-z_][\w.-]{3,})":', output[:200_000]):
            if self.rng.random() < 0.02:
                self.note("key", m.group(1))
        for m in re.finditer(r'"(\d+\.\d+(?:\.\d+)?)"', output[:200_000]):
            if self.rng.random() < 0.03:
                self.note("number", m.group(1))

    def git_harvester(self, output: str) -> None:
        for line in output.splitlines():
            c = _COMMIT.match(line)
            if c:
                self.note("commit", c.group(1))
                continue
            s = _STAT.match(line)
            if s and self.rng.random() < 0.3:
                self.note("path", s.group(1))
                continue
            o = re.match(r"^([0-9a-f]{7,12}) (.+)$", line)
            if o and self.rng.random() < 0.2:
                self.note("commit", o.group(1))
        self.grep_harvester(output)


def _first_name(text: str) -> str:
    for m in _NAMEY.finditer(text):
        word = m.group()
        if len(word) >= 4 and ("_" in word or "." in word or any(c.isupper() for c in word[1:])):
            return word
    return ""


def _tokens(text: str) -> set[str]:
    from .facts import distinctive_tokens

    return distinctive_tokens(text)


def build_session(spec: Spec, runner: Runner) -> list[dict[str, Any]]:
    """The messages of one held-out session, commands run for real."""
    return Agent(spec, runner).run()


def cache_path(spec: Spec) -> Path:
    return CACHE / f"v{VERSION}" / f"{spec.name}.json"


def heldout_trajectories(specs: Sequence[Spec] = SPECS, *, rebuild: bool = False) -> list[Trajectory]:
    """The held-out sessions, built once into the cache (``rebuild`` runs every command again)."""
    runner = Runner()
    out = []
    for spec in specs:
        path = cache_path(spec)
        if rebuild or not path.is_file():
            messages = build_session(spec, runner)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(messages, ensure_ascii=False), encoding="utf-8")
            print(f"built {spec.name}: {len(messages)} messages", file=sys.stderr)
        messages = json.loads(path.read_text(encoding="utf-8"))
        requests = [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]
        out.append(Trajectory(f"heldout__{spec.name}", messages, requests))
    return out


def tool_chars(t: Trajectory) -> int:
    """Chars of all the session's tool results."""
    return sum(
        len(block_text(b))
        for m in t.messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    )


BIG = 50_000
"""Sessions with at least this many chars of tool output make the second median."""


def summary_lines(rows: dict[str, Row], trajectories: Sequence[Trajectory], label: str) -> list[str]:
    """The table of ``rows`` over ``trajectories``: the same figures as the 27's table, plus the
    median over the sessions with at least :data:`BIG` chars of tool output."""
    base = rows["unmanaged"]
    names = [t.name for t in trajectories]
    big = [t.name for t in trajectories if tool_chars(t) >= BIG]
    out = [
        f"| policy ({label}) | pooled cost | median session | median, >= 50k chars of tool output "
        f"({len(big)}) | worst session | facts visible | recoverable |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        if not row.costs:
            out.append(f"| {name} | skipped: {row.note} ||||||")
            continue
        s = summarize(row, base, names)
        m = summarize(row, base, big).median if big else float("nan")
        out.append(
            f"| {name} | {s.pooled:.2f} | {s.median:.2f} | {m:.2f} | {s.worst:.2f} | "
            f"{100 * s.visible:.1f} % | {100 * s.recoverable:.1f} % |"
        )
    return out


def run_rows(trajectories: Sequence[Trajectory], only: set[str] | None = None) -> dict[str, Row]:
    """Every row of ``python -m bench.economics`` (reference, Headroom, toolkeep) on ``trajectories``."""
    model = CostModel()
    facts = compute_facts(trajectories)
    rows: dict[str, Row] = {}
    for name, (_, make, note) in all_policies().items():
        if only and name not in only and name != "unmanaged":
            continue
        if make is None:
            rows[name] = Row(name, note=note)
            print(f"{name}: skipped ({note})", file=sys.stderr)
            continue
        rows[name] = run_policy(name, make, trajectories, facts, model)
        print(f"{name}: {rows[name].seconds:.0f}s CPU", file=sys.stderr)
    return rows


def session_lines(rows: dict[str, Row], trajectories: Sequence[Trajectory]) -> list[str]:
    """One line per session: requests, tool output, each row's ratio, economy's facts visible."""
    base = rows["unmanaged"]
    names = [n for n, r in rows.items() if n != "unmanaged" and r.costs]
    out = [
        "| session | requests | tool output (chars) | facts | " + " | ".join(names) + " | economy visible |",
        "|---|---:|---:|---:|" + "---:|" * (len(names) + 1),
    ]
    for t in trajectories:
        ratios = " | ".join(f"{rows[n].costs[t.name] / base.costs[t.name]:.2f}" for n in names)
        tally = rows["toolkeep-economy"].facts[t.name] if "toolkeep-economy" in rows else FactTally()
        out.append(
            f"| {t.name.removeprefix('heldout__')} | {len(t.requests)} | {tool_chars(t):,} | "
            f"{base.facts[t.name].total} | {ratios} | {tally.visible}/{tally.total} |"
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.economics.heldout", description=__doc__)
    parser.add_argument("--write", action="store_true", help="record the table in bench/results.md")
    parser.add_argument("--sessions", action="store_true", help="also print one line per session")
    parser.add_argument("--rebuild", action="store_true", help="run every command again")
    parser.add_argument("--only", help="comma-separated row names (unmanaged always runs)")
    parser.add_argument("--with-27", action="store_true", help="also price the 27, side by side")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    trajectories = heldout_trajectories(rebuild=args.rebuild)
    rows = run_rows(trajectories, only)
    facts = sum(r.total for r in rows["unmanaged"].facts.values())
    lines = [
        f"{len(trajectories)} sessions built by `bench/economics/heldout.py` from real output of "
        "commands run on this machine (greps and reads over the CPython stdlib and the venv's "
        "site-packages, unittest and pytest runs, pip JSON dumps, git history of this repository, "
        f"directory trees, tracebacks): {sum(len(t.requests) for t in trajectories):,} requests, "
        f"{sum(tool_chars(t) for t in trajectories):,} chars of tool output, {facts:,} later-used "
        "facts. No policy was tuned on them. Same definitions as the 27. "
        "`python -m bench.economics.heldout --write --with-27`.",
        "",
        *summary_lines(rows, trajectories, "held-out"),
    ]
    if args.with_27:
        tuned = load_trajectories(DATA_DIR)
        lines += ["", "The same rows on the 27, in the same run:", ""]
        lines += summary_lines(run_rows(tuned, only), tuned, "the 27")
    text = "\n".join(lines)
    print(text)
    if args.sessions:
        print("\n" + "\n".join(session_lines(rows, trajectories)))
    if args.write:
        write_subsection(HELDOUT, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
