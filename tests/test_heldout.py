"""The held-out session builder (bench/economics/heldout.py): real commands, valid histories,
later-used facts found; and the Headroom reference row when headroom-ai is installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.economics import heldout
from bench.economics.data import Trajectory, block_text
from bench.economics.facts import later_used_facts

import toolkeep

SMALL = (
    heldout.Spec("t-stdlib", "Where is the JSON encoder defined?", "stdlib", 9, {"grep": 2, "read": 1, "error": 1}),
    heldout.Spec("t-tests", "Run a small stdlib test module.", "stdlib", 6, {"tests": 1, "grep": 1}),
)  # fmt: skip


@pytest.fixture(scope="module")
def built() -> list[tuple[heldout.Spec, list[dict[str, object]]]]:
    runner = heldout.Runner()
    return [(spec, heldout.build_session(spec, runner)) for spec in SMALL]


def _trajectory(name: str, messages: list[dict[str, object]]) -> Trajectory:
    requests = [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]
    return Trajectory(name, messages, requests)  # type: ignore[arg-type]


def test_sessions_are_valid_anthropic_histories(
    built: list[tuple[heldout.Spec, list[dict[str, object]]]],
) -> None:
    """Roles alternate, each call is answered by the next message, and toolkeep prepares the
    history without a repair."""
    for spec, messages in built:
        assert messages[0] == {"role": "user", "content": spec.task}
        assert [m["role"] for m in messages] == ["user", "assistant"] * (spec.steps + 1)
        for a, u in zip(messages[1:-1:2], messages[2::2], strict=True):
            calls = [b["id"] for b in a["content"] if b["type"] == "tool_use"]  # type: ignore[index,union-attr]
            results = [b["tool_use_id"] for b in u["content"] if b["type"] == "tool_result"]  # type: ignore[index,union-attr]
            assert calls == results and len(calls) == 1
        with toolkeep.Session() as session:
            out, report = session.prepare(messages, format="anthropic")
        assert report.repairs == []
        assert len(out) == len(messages)


def test_results_are_real_output(built: list[tuple[heldout.Spec, list[dict[str, object]]]]) -> None:
    """A grep's hits name files that exist in the tree it ran in, with the line it quotes."""
    checked = 0
    for _, messages in built:
        for m in messages[2::2]:
            text = block_text(m["content"][0])  # type: ignore[index]
            for line in text.splitlines()[:5]:
                hit = heldout._GREP_LINE.match(line)
                if hit:
                    path = heldout.STDLIB / hit.group(1)
                    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
                    assert lines[int(hit.group(2)) - 1] == hit.group(3)
                    checked += 1
    assert checked > 0


def test_later_messages_use_earlier_facts(built: list[tuple[heldout.Spec, list[dict[str, object]]]]) -> None:
    """The agent quotes what results showed: facts.py finds later-used facts, each in its source
    result and in the message that uses it."""
    for spec, messages in built:
        facts = later_used_facts(_trajectory(spec.name, messages))
        assert facts, spec.name
        for f in facts:
            source = next(b for b in messages[f.source]["content"] if b["tool_use_id"] == f.call_id)  # type: ignore[index,union-attr]
            assert f.token in block_text(source)  # type: ignore[arg-type]
            assert f.token in json.dumps(messages[f.use], ensure_ascii=False)
            assert f.use > f.source


def test_choices_are_deterministic(built: list[tuple[heldout.Spec, list[dict[str, object]]]]) -> None:
    """The same outputs give the same session: a second agent over the same runner agrees."""
    spec, messages = built[0]
    runner = heldout.Runner()
    runner.outputs = {}
    first = heldout.Agent(spec, runner).run()
    again = heldout.Agent(spec, runner).run()  # every output from the runner's memory
    assert first == again
    assert [m["role"] for m in first] == [m["role"] for m in messages]


def test_cache_outside_the_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build is written to the cache once and read back from it."""
    monkeypatch.setattr(heldout, "CACHE", tmp_path)
    spec = SMALL[1]
    (t,) = heldout.heldout_trajectories((spec,))
    path = heldout.cache_path(spec)
    assert path.is_file() and tmp_path in path.parents
    path.write_text(json.dumps(t.messages[:3]), encoding="utf-8")
    (again,) = heldout.heldout_trajectories((spec,))
    assert again.messages == t.messages[:3]  # from the cache, not rebuilt
    assert heldout.REPO not in heldout.CACHE.parents


def test_headroom_row() -> None:
    """Headroom's compress keeps every message and every call/result pairing of a request."""
    from bench.economics import headroom_ref

    missing = headroom_ref.available()
    if missing:
        pytest.skip(missing)
    runner = heldout.Runner()
    spec = heldout.Spec("t-headroom", "Search the stdlib.", "stdlib", 4, {"grep": 1})
    t = _trajectory(spec.name, heldout.build_session(spec, runner))
    request = headroom_ref.headroom_compress(t)
    for i in t.requests:
        sent = request(i)
        assert len(sent) == i
        assert [m["role"] for m in sent] == [m["role"] for m in t.messages[:i]]


def test_results_subsections_kept(tmp_path: Path) -> None:
    """The Economics section's writer keeps the unseen and held-out subsections; each of those
    replaces only its own."""
    from bench.economics.facts import FactTally
    from bench.economics.report import HELDOUT, UNSEEN, write_section, write_subsection
    from bench.economics.run import Row

    path = tmp_path / "results.md"
    path.write_text("# Benchmark results\n\n## Economics\n\nold\n\n## Speed\n\nfast\n", encoding="utf-8")
    write_subsection(UNSEEN, "unseen table 1", path)
    write_subsection(HELDOUT, "held-out table 1", path)
    write_subsection(HELDOUT, "held-out table 2", path)
    t = Trajectory("a", [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], [1])
    row = Row("unmanaged", costs={"a": 1.0}, strict={"a": 1.0}, facts={"a": FactTally()})
    write_section([row], [], {}, [t], {"a": []}, path=path)
    body = path.read_text(encoding="utf-8")
    assert "old" not in body and "held-out table 1" not in body
    assert body.count("### Held-out sessions") == 1 and "held-out table 2" in body
    assert "unseen table 1" in body and body.index("## Economics") < body.index("unseen table 1")
    assert body.index("held-out table 2") < body.index("## Speed") and body.endswith("fast\n")


def test_goals_table_checks_each_goal_on_each_set(
    built: list[tuple[heldout.Spec, list[dict[str, object]]]],
) -> None:
    """``bench.economics.goals`` measures the default on real sessions and marks each goal met
    or not from the figures (a reference row it does not beat is named)."""
    from bench.economics import goals
    from bench.economics.run import Summary

    trajectories = [_trajectory(spec.name, messages) for spec, messages in built]
    measured = goals.measure(trajectories, references=False)
    assert set(measured.default) == set(goals.PRICINGS)
    assert all(0 < s.pooled <= 1.0 + 1e-9 and s.recoverable == 1.0 for s in measured.default.values())
    beaten = Summary(pooled=0.9, median=0.9, worst=1.0, visible=0.5, recoverable=0.5, anywhere=0.5)
    unbeaten = Summary(pooled=0.1, median=0.1, worst=1.0, visible=0.5, recoverable=0.5, anywhere=0.5)
    measured.references = {"cheap": beaten}
    assert "| all | 1 of 1 (met) | 1 of 1 (met) |" in goals.table(measured, measured)
    measured.references = {"cheap": unbeaten}
    assert "not: cheap (0.10" in goals.table(measured, measured)
    # --write: the setting that opts back in to shortening small results, beside the default,
    # and the trade-off between them on each set
    both = goals.table(measured, measured, opted=(measured, measured))
    assert "| held-out | the 27, `compact_min_chars=1200` | held-out, `compact_min_chars=1200` |" in both
    pooled = f"{measured.default['anthropic-5m'].pooled:.3f}"
    for which in ("the 27", "held-out"):
        for setting in ("`compact_min_chars=1200`", "default"):
            assert f"| {which} | {setting} | {pooled} |" in both


def test_goals_measures_a_changed_economy_setting(
    built: list[tuple[heldout.Spec, list[dict[str, object]]]],
) -> None:
    """``--set NAME=VALUE`` measures the default policy with one setting changed (typed as the
    setting is), and the table names the change and the command; a setting that is none is an
    error, not a silent default."""
    from bench.economics import goals

    economy = goals.economy_with(["read_factor=1000", "lean=false", "index_share=0.5"])
    assert economy is not None and (economy.read_factor, economy.lean, economy.index_share) == (
        1000,
        False,
        0.5,
    )
    assert goals.economy_with([]) is None
    for bad in (["nope=1"], ["lean=perhaps"], ["lean"]):
        with pytest.raises(ValueError, match=bad[0]):
            goals.economy_with(bad)
    trajectories = [_trajectory(spec.name, messages) for spec, messages in built]
    default = goals.measure(trajectories, references=False)
    unshortened = goals.measure(
        trajectories, references=False, economy=goals.economy_with(["previews=false"])
    )
    assert default.default["anthropic-5m"].visible > unshortened.default["anthropic-5m"].visible
    text = goals.table(default, default, ["previews=false"])
    assert "with `Economy(previews=false)`" in text and "goals --set previews=false`" in text
    text = goals.table(default, default, config={"compact_min_chars": 1_200})
    assert "with `compact_min_chars=1200`" in text and "goals --compact-min-chars 1200`" in text
