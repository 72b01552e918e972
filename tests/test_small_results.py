"""Small results stay whole: no result of at most ``Config.compact_min_chars`` (3,000) chars is
changed by any policy's compaction (issue 32; the seed's "Only results larger than 3,000 chars are
compacted. Small results are always preserved."). Only a request budget, as a last resort, may
shorten them; ``--compact-min-chars`` / ``TOOLKEEP_COMPACT_MIN_CHARS`` opt in to shortening
smaller results.

Checked on real trajectories (``../shared/bench-data``) in every format under every policy, on
generated sessions request by request, and through the CLI in a new process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep.config import Economy
from toolkeep.messages import ToolResultPart
from toolkeep.policies import POLICIES

from .conftest import BENCH_DATA, load_trajectory, shared_or_skip
from .convert_formats import CONVERTERS, to_format
from .strategies import property_settings, small_result_sessions

SMALL = toolkeep.Config().compact_min_chars
FORMATS = list(CONVERTERS)

# one or two of each agent system, the ones with the most results of 1,200-3,000 chars (the
# sizes the default shortened before: 70 of them changed in these six, in every format)
CONFORMANCE = (
    "claude-code__engram__diffusion__e7151f41.json",
    "gemini-cli__metaphi-figma-eval-49bdd49a__transcript.json",
    "mini-swe-agent__live-swe-agent__gpt-5-mini__mwaskom__seaborn-3069.json",
    "openhands__oh-eval-example__multi-swe-bench__ponyc__output__ponylang__ponyc-4588.json",
    "swe-agent__msb-java__doubao-pro-128k__fasterxml__jackson-core-566.json",
    "swe-agent__sweagent-testdata__gpt4__pydicom__pydicom-1458.json",
)


def results(messages: Any, format_name: str) -> dict[tuple[str, int], ToolResultPart]:
    """Every result of ``messages``, by its call id and which answer to that id it is."""
    fmt = toolkeep.formats.resolve_format(messages, format_name)
    seen: Counter[str] = Counter()
    out: dict[tuple[str, int], ToolResultPart] = {}
    for message in fmt.load(messages):
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                out[(part.call_id, seen[part.call_id])] = part
                seen[part.call_id] += 1
    return out


def changed_small(source: Any, prepared: Any, format_name: str, least: int = SMALL) -> list[str]:
    """The small results of ``source`` (``least`` chars or fewer) whose text ``prepared`` changed;
    raises if ``prepared`` lost one (the histories checked are valid: pairing keeps them all)."""
    before = {k: p for k, p in results(source, format_name).items() if len(p.full_text) <= least}
    after = results(prepared, format_name)
    assert before.keys() <= after.keys(), "a small result went missing"
    return [
        f"{call_id} ({len(p.text):,} chars): {after[(call_id, n)].text[:80]!r}"
        for (call_id, n), p in before.items()
        if after[(call_id, n)].text != p.text
    ]


@pytest.mark.slow
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("format_name", FORMATS)
@pytest.mark.parametrize("name", CONFORMANCE, ids=lambda n: n[:40])
def test_real_trajectories_keep_small_results(
    name: str, format_name: str, policy: str, tmp_path: Path
) -> None:
    """The conformance check: a whole real trajectory, prepared in each format under each policy
    (every earlier request decided as the fold has it), changes no result of at most 3,000 chars
    (each trajectory has some of 1,201-3,000 chars, which the default shortened before)."""
    shared_or_skip()
    path = BENCH_DATA / "anthropic" / name
    if not path.is_file():
        pytest.fail(f"{path} is missing from the shared trajectories")
    source = to_format(load_trajectory(path), format_name)
    with toolkeep.Session(toolkeep.Config(policy=policy), workspace=tmp_path / "ws") as session:
        prepared, _ = session.prepare(source, format=format_name)
    assert toolkeep.validate(prepared, format_name) == []
    assert changed_small(source, prepared, format_name) == []
    small = [p for p in results(source, format_name).values() if 1_200 < len(p.full_text) <= SMALL]
    assert small, "no result of 1,201-3,000 chars: the check would prove nothing"


def test_the_threshold_is_the_configs(tmp_path: Path) -> None:
    """Economy's compaction follows ``Config.compact_min_chars``: 30 reads of 2,792 chars stay
    whole by default and are summarized with ``compact_min_chars=1_200`` (batches off, so every
    due move is made); ``Economy(min_chars=)`` still sets economy's own."""
    history = _session(30, 2_792)
    kept = _prepare(toolkeep.Config(economy=Economy(batch=False)), history, tmp_path)
    assert changed_small(history, kept, "anthropic") == []
    for config in (
        toolkeep.Config(compact_min_chars=1_200, economy=Economy(batch=False)),
        toolkeep.Config(economy=Economy(batch=False, min_chars=1_200)),
        toolkeep.Config.from_env({"TOOLKEEP_COMPACT_MIN_CHARS": "1200"}, economy=Economy(batch=False)),
    ):
        cut = _prepare(config, history, tmp_path)
        # every read but the newest, which the agent may still edit from (due a turn later)
        assert len(changed_small(history, cut, "anthropic")) == 29
        assert changed_small(history, cut, "anthropic", least=1_200) == []


def test_the_request_budget_may_still_shorten_them(tmp_path: Path) -> None:
    """The rule binds compaction, not the request budget: a budget no whole history fits makes
    the small results give way, as the last resort, and the request fits."""
    history = _session(12, 2_792)
    config = toolkeep.Config(max_request_tokens=4_000)
    with toolkeep.Session(config, workspace=tmp_path / "ws") as session:
        prepared, _ = session.prepare(history, format="anthropic")
    assert changed_small(history, prepared, "anthropic") != []
    assert changed_small(history, _prepare(toolkeep.Config(), history, tmp_path), "anthropic") == []


@property_settings(40)
@given(
    case=small_result_sessions(),
    policy=st.sampled_from(sorted(POLICIES)),
    format_name=st.sampled_from(FORMATS),
)
def test_generated_sessions_keep_small_results(case: list[Any], policy: str, format_name: str) -> None:
    """Any session, in any format, under any policy, request by request through one session
    (as an agent sends them) and whole in a new one: no result of at most 3,000 chars changes."""
    history = to_format(case, format_name)
    config = toolkeep.Config(policy=policy)
    assistants = [i for i, m in enumerate(case) if m["role"] == "assistant"]
    with toolkeep.Session(config, clock=lambda: 0.0) as session:
        for i in [*assistants, len(case)]:
            request = to_format(case[:i], format_name)
            prepared, _ = session.prepare(request, format=format_name)
            assert changed_small(request, prepared, format_name) == []
    with toolkeep.Session(config) as fresh:
        whole, _ = fresh.prepare(history, format=format_name)
    assert changed_small(history, whole, format_name) == []


SCRIPT = Path(sys.executable).with_name("toolkeep")
TOOLKEEP = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "toolkeep"]


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLKEEP_", "CHATCLI_"))}
    clean["TOOLKEEP_CACHE_DIR"] = os.environ["TOOLKEEP_CACHE_DIR"]
    return subprocess.run([*TOOLKEEP, *args], capture_output=True, timeout=300, env={**clean, **env})


@pytest.mark.parametrize("policy", ["spec", "seed"])
def test_cli_flag_and_variable_opt_in(policy: str, tmp_path: Path) -> None:
    """``toolkeep prepare`` in a new process keeps 2,792-char results whole by default, at ages
    that cut larger ones; ``--compact-min-chars 1200`` and ``TOOLKEEP_COMPACT_MIN_CHARS=1200``
    shorten the old ones, with the same bytes, and the flag wins over the variable. (The economy
    policy reads the same setting, :func:`test_the_threshold_is_the_configs`; its batches make
    no move on so short a session either way, so the command line is checked on the ages.)"""
    history = _session(8, 2_792, note=f"small results {policy} {tmp_path.name}")
    source = tmp_path / "in.json"
    source.write_text(json.dumps(history), encoding="utf-8")
    args = ["prepare", str(source), "--policy", policy, "--truncate-turns", "0", "--summarize-turns", "1"]
    default = _run(*args)
    assert default.returncode == 0, default.stderr
    assert changed_small(history, json.loads(default.stdout), "anthropic") == []
    flag = _run(*args, "--compact-min-chars", "1200")
    assert flag.returncode == 0, flag.stderr
    assert len(changed_small(history, json.loads(flag.stdout), "anthropic")) >= 6
    assert _run(*args, TOOLKEEP_COMPACT_MIN_CHARS="1_200").stdout == flag.stdout
    assert (
        _run(*args, "--compact-min-chars", "1200", TOOLKEEP_COMPACT_MIN_CHARS="99999").stdout == flag.stdout
    )
    assert _run(*args, TOOLKEEP_COMPACT_MIN_CHARS="3000").stdout == default.stdout


def test_cli_refuses_a_bad_threshold(tmp_path: Path) -> None:
    """A threshold that is no whole number is exit 2 with one line naming the flag or variable."""
    source = tmp_path / "in.json"
    source.write_text(json.dumps(_session(1, 10)), encoding="utf-8")
    bad = _run("prepare", str(source), "--compact-min-chars", "small")
    assert bad.returncode == 2 and b"'small' is not a whole number" in bad.stderr
    bad = _run("prepare", str(source), TOOLKEEP_COMPACT_MIN_CHARS="-5")
    assert bad.returncode == 2 and b"TOOLKEEP_COMPACT_MIN_CHARS" in bad.stderr


def _session(turns: int, size: int, note: str = "small results") -> list[Any]:
    """``turns`` reads of files (no tool ``spec`` preserves), each answered with ``size`` chars of
    Python source, then an answer."""
    history: list[Any] = [{"role": "user", "content": note}]
    for i in range(turns):
        line = f"def handler_{i}_{{}}(request):\n    return render(request, 'page_{i}_{{}}.html')\n\n\n"
        text = "".join(line.format(j, j) for j in range(size // len(line) + 2))[:size]
        call = {
            "type": "tool_use",
            "id": f"t{i}",
            "name": "Read",
            "input": {"file_path": f"/repo/run_{i}.py"},
        }
        history += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": text}]},
        ]
    return [*history, {"role": "assistant", "content": "done"}]


def _prepare(config: toolkeep.Config, history: list[Any], tmp_path: Path) -> Any:
    with toolkeep.Session(config) as session:
        prepared, _ = session.prepare(history, format="anthropic")
    return prepared
