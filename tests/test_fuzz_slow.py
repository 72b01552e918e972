"""Fuzzing every step and every entry point with malformed input.

Histories of every format with random faults (values replaced by junk of any type, keys and
items deleted, duplicated, moved), arbitrary JSON, arbitrary tool-call arguments, paths, config
values. The promise under test: toolkeep answers with a result or a :class:`ToolkeepError`, never
another exception; it never mutates its input; whatever it returns passes the provider's rules, is
idempotent, and every marker in it leads back to the original.

Example counts: small by default; ``HYPOTHESIS_PROFILE=slow`` (see ``tests/conftest.py``) runs
1,000 per test, the CI's long run::

    HYPOTHESIS_PROFILE=slow .venv/bin/python -m pytest tests/test_fuzz_slow.py -m slow
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import toolkeep
from toolkeep import Config, MemoryStore, Session, ToolkeepError, Workspace
from toolkeep.formats import FORMATS, detect_format
from toolkeep.pipeline import POLICIES, build_steps, run_pipeline
from toolkeep.recall import handle_tool_call
from toolkeep.shorten import CCR_MARKER_RE, archive_key
from toolkeep.workspace import WorkspaceReader

from .strategies import configs, json_values, mutated_histories

pytestmark = pytest.mark.slow

SLOW = os.environ.get("HYPOTHESIS_PROFILE") == "slow"


def fuzz(default: int) -> settings:
    """``default`` examples in everyday runs; the profile's count (1,000) in the slow run."""
    return settings(
        max_examples=settings.get_profile("slow").max_examples if SLOW else default,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
        ],
    )


@pytest.fixture(scope="module")
def workspace() -> Iterator[Workspace]:
    """One workspace for every example; given as a path, so a session keeps it when it closes."""
    with Workspace() as ws:
        yield ws


# the pairing rules pairing repair must always leave satisfied; other rules (an empty user
# message, roles that do not alternate) are the caller's, which toolkeep must only never break
PAIRING_RULES = {
    "missing_result",
    "orphan_result",
    "duplicate_id",
    "duplicate_result",
    "empty_id",
    "result_not_first",
}


def markers_recallable(out: Any, history: Any, store: Any) -> None:
    """Every marker toolkeep put in (not one the input already held) leads to an original."""
    for key in set(CCR_MARKER_RE.findall(repr(out))) - set(CCR_MARKER_RE.findall(repr(history))):
        assert store.get(key) is not None, key


def no_new_violations(out: list[Any], history: list[Any], fmt: str) -> None:
    """The output breaks no pairing rule, and no other rule the input did not break already."""
    rules = {v.rule for v in toolkeep.validate(out, format=fmt)}
    assert not rules & PAIRING_RULES, rules
    assert rules <= {v.rule for v in toolkeep.validate(history, format=fmt)}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@fuzz(60)
@given(case=mutated_histories(), auto=st.booleans())
def test_prepare_on_mutated_histories(
    policy: str, case: tuple[str, list[Any]], auto: bool, workspace: Workspace
) -> None:
    """A faulty history of any format, under every policy: a valid, idempotent result or a
    ToolkeepError; input untouched."""
    name, history = case
    before = copy.deepcopy(history)
    store = MemoryStore()
    with Session(Config(policy=policy), workspace=workspace.path, store=store) as session:
        try:
            out, report = session.prepare(history, format="auto" if auto else name)
        except ToolkeepError as exc:
            event(f"refused: {type(exc).__name__}")
            assert history == before
            return
        event("prepared")
        assert history == before
        no_new_violations(out, history, report.format)
        assert session.prepare(out, format=report.format)[0] == out
        markers_recallable(out, history, store)


def steps_by_name(config: Config) -> dict[str, Any]:
    """The steps of the config's policy by name (function name, or class name for a configured
    step)."""
    return {getattr(s, "__name__", type(s).__name__): s for s in build_steps(config)}


STEPS = {name: policy for policy in sorted(POLICIES) for name in steps_by_name(Config(policy=policy))}
"""Every policy's steps by name, each with a policy that has it."""


@pytest.mark.parametrize("step", sorted(STEPS))
@fuzz(40)
@given(case=mutated_histories(), config=configs())
def test_each_step_alone(
    step: str, case: tuple[str, list[Any]], config: Config, workspace: Workspace
) -> None:
    """Each step of every policy alone, with any config, on a faulty history: a result or a
    ToolkeepError."""
    name, history = case
    before = copy.deepcopy(history)
    config = config.replace(policy=STEPS[step])
    steps = steps_by_name(config)
    store = MemoryStore()
    try:
        out, _ = run_pipeline(
            history, format=name, config=config, workspace=workspace, store=store, steps=[steps[step]]
        )
    except ToolkeepError as exc:
        event(f"refused: {type(exc).__name__}")
        assert history == before
        return
    event("ran")
    assert history == before
    markers_recallable(out, history, store)
    if step == "repair_pairing":
        no_new_violations(out, history, name)


@fuzz(150)
@given(value=json_values(40))
def test_every_loader_on_any_json(value: Any) -> None:
    """Any JSON at all, as a history of each format: load, validate and dump, or a ToolkeepError;
    a valid history dumps back to itself."""
    messages = value if isinstance(value, list) else [value]
    before = copy.deepcopy(messages)
    for fmt in FORMATS.values():
        try:
            history = fmt.load(messages)
            if not fmt.validate(history):  # an invalid one may be normalized (Bedrock alternates roles)
                assert fmt.dump(history) == messages
        except ToolkeepError:
            pass
        assert messages == before
    with contextlib.suppress(ToolkeepError):
        detect_format(messages)


@fuzz(100)
@given(value=json_values(40), config=configs())
def test_pipeline_on_any_json(value: Any, config: Config, workspace: Workspace) -> None:
    """Any JSON as a history, any config, format auto: a valid result or a ToolkeepError."""
    messages = value if isinstance(value, list) else [value]
    try:
        out, report = run_pipeline(messages, config=config, workspace=workspace, store=MemoryStore())
    except ToolkeepError:
        return
    no_new_violations(out, messages, report.format)


@fuzz(200)
@given(
    name=st.sampled_from(["recall", "read_result", "other"]),
    arguments=st.one_of(json_values(10), st.text(max_size=40)),
)
def test_recall_tools_answer_anything(name: str, arguments: Any, workspace: Workspace) -> None:
    """The recall and read_result handlers answer any arguments with text, never an exception."""
    store = MemoryStore()
    store.put(archive_key("kept"), "kept")
    answer = handle_tool_call(name, arguments, store=store, workspace=workspace)
    assert answer is None if name == "other" else isinstance(answer, str)


@fuzz(200)
@given(
    path=st.one_of(
        st.text(max_size=60), st.sampled_from(["..", "/etc/passwd", "tool-results/../../x", "\x00"])
    )
)
def test_reader_stays_inside(path: str, workspace: Workspace) -> None:
    """Any path: the reader returns a file inside the workspace or refuses with ReaderError."""
    (workspace.scratch_dir / "note.txt").write_text("inside")
    reader = WorkspaceReader(workspace.path)
    try:
        real = reader.resolve_inside(path)
    except ToolkeepError:
        return
    assert real.is_relative_to(workspace.path)


@fuzz(200)
@given(
    env=st.dictionaries(
        st.sampled_from(sorted(v for pair in toolkeep.config.ENV_VARIABLES.values() for v in pair)),
        st.text(max_size=12),
    )
)
def test_config_from_any_environment(env: dict[str, str]) -> None:
    """Any values in the environment variables: a Config or a ConfigError naming the variable."""
    try:
        Config.from_env(env)
    except toolkeep.ConfigError as exc:
        assert exc.variable in env or exc.variable is None


@fuzz(200)
@given(text=st.text(st.sampled_from(["a", "é", "中", "🙂", "\ud800", "\udfff", "\x00", "\n"]), max_size=80))
def test_chunked_hash_and_write_match_whole(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With tiny chunks, the chunked hash, file write and size equal the whole-text ones."""
    import toolkeep.shorten as shorten
    from toolkeep.stores._base import utf8_size
    from toolkeep.workspace import atomic_write

    monkeypatch.setattr(shorten, "CHUNK_CHARS", 3)
    whole = text.encode("utf-8", "surrogatepass")
    assert b"".join(shorten.utf8_chunks(text)) == whole
    assert archive_key(text) == hashlib.sha256(whole).hexdigest()[:16]
    assert utf8_size(text) == len(whole)
    with tempfile.TemporaryDirectory() as tmp:
        atomic_write(Path(tmp) / "f", text)
        assert (Path(tmp) / "f").read_bytes() == whole
