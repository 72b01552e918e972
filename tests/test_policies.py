"""The named policies: the seed's exact behaviour, and the economy policy's levers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bench.economics.cost import CostModel, SessionMeter

import toolkeep
from toolkeep.pipeline import POLICIES, run_pipeline
from toolkeep.policies import Economy, EconomyCompactor, SeedMicrocompactor
from toolkeep.stores import MemoryStore

from .conftest import TRAJECTORIES, load_trajectory, shared_or_skip


def use(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    """An assistant message with one tool call."""
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}],
    }


def result(call_id: str, text: str, *, error: bool = False) -> dict[str, Any]:
    """A user message with one tool result."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    if error:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def source(n: int) -> str:
    """A Python file of ``n`` functions, about 110 chars each."""
    return "".join(
        f"def handler_{i}(request):\n    return render(request, 'page_{i}.html')\n\n\n" for i in range(n)
    )


def session_of(turns: list[tuple[str, dict[str, Any], str]]) -> list[dict[str, Any]]:
    """A history with one ``(tool name, arguments, result text)`` per turn, then a final answer."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for n, (name, arguments, text) in enumerate(turns):
        history += [use(f"toolu_{n:03d}", name, **arguments), result(f"toolu_{n:03d}", text)]
    history.append({"role": "assistant", "content": "done"})
    return history


def requests(history: list[Any]) -> list[list[Any]]:
    """The request before each assistant message, and the whole history."""
    ends = [i for i, m in enumerate(history) if m["role"] == "assistant" and i > 0]
    return [history[:i] for i in ends]


def texts(messages: list[Any]) -> dict[str, str]:
    """Result text by call id."""
    return {
        b["tool_use_id"]: b["content"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    }


def economy_run(
    history: list[Any], economy: Economy, store: MemoryStore | None = None, pricing: str | None = None
) -> list[list[Any]]:
    """Every request of ``history`` through one long-lived economy step."""
    step = EconomyCompactor(economy)
    store = store or MemoryStore()
    config = toolkeep.Config(pricing=pricing)
    return [
        run_pipeline(r, format="anthropic", config=config, store=store, steps=[step]).messages
        for r in requests(history)
    ]


class TestRegistry:
    def test_named_policies_are_registered(self) -> None:
        """``spec``, ``seed`` and ``economy`` are picked by ``Config(policy=...)``; ``Config()``
        runs ``economy``, and the name ``default`` stands for it."""
        assert set(POLICIES) == {"spec", "seed", "economy"}
        assert toolkeep.Config().policy == toolkeep.Config(policy="default").policy == "economy"
        with toolkeep.Session() as session:
            assert any(isinstance(s, EconomyCompactor) for s in session.steps)
        with toolkeep.Session(toolkeep.Config(policy="spec")) as session:
            assert not any(isinstance(s, (EconomyCompactor, SeedMicrocompactor)) for s in session.steps)
        with toolkeep.Session(toolkeep.Config(policy="seed")) as session:
            assert any(isinstance(s, SeedMicrocompactor) for s in session.steps)
        with toolkeep.Session(toolkeep.Config(policy="economy")) as session:
            assert any(isinstance(s, EconomyCompactor) for s in session.steps)


class TestSeed:
    def history(self, name: str = "bash", error: bool = False) -> list[Any]:
        text = "x" * 5_000
        history = [
            {"role": "user", "content": "go"},
            use("a", name, command="make"),
            result("a", text, error=error),
        ]
        for n in range(6):
            history += [use(f"b{n}", "ls"), result(f"b{n}", "ok")]
        return history

    def test_truncated_result_never_reaches_the_summary(self) -> None:
        """ChatCLI tests the size of the text as it stands, so a result cut at age 2 stays cut."""
        out, report = run_pipeline(self.history(), config=toolkeep.Config(policy="seed"))
        text = texts(out)["a"]
        assert "[... 2500 chars omitted from old tool result ...]" in text
        assert report.summarized == 0 and report.truncated == 1

    def test_spec_summarizes_what_seed_keeps_truncated(self) -> None:
        """SPEC's policy uses the original's size and reaches the one-line summary."""
        out, _ = run_pipeline(self.history(name="read"), config=toolkeep.Config(policy="spec"))
        assert texts(out)["a"].startswith("[Old tool result cleared -- 1 lines, 5K chars, text]")

    def test_seed_preserves_nothing(self) -> None:
        """Execution tools and errors are cut by the seed; SPEC's policy keeps them."""
        for error in (False, True):
            seed, _ = run_pipeline(self.history(error=error), config=toolkeep.Config(policy="seed"))
            spec, _ = run_pipeline(self.history(error=error), config=toolkeep.Config(policy="spec"))
            assert len(texts(seed)["a"]) < 3_000
            assert texts(spec)["a"] == "x" * 5_000

    def test_seed_form_carries_the_way_back(self) -> None:
        """The seed's cut carries the archive marker of the original, which recall returns."""
        with toolkeep.Session(toolkeep.Config(policy="seed")) as session:
            out, _ = session.prepare(self.history())
            key = texts(out)["a"].rsplit("<<ccr:", 1)[1][:16]
            assert session.recall(key) == "x" * 5_000


class TestEconomyStability:
    def turns(self, n: int = 24) -> list[tuple[str, dict[str, Any], str]]:
        turns: list[tuple[str, dict[str, Any], str]] = []
        for i in range(n):
            turns.append(("bash", {"command": f"cat src/module_{i}.py"}, source(40 + i)))
        return turns

    def test_a_shortened_result_only_ever_moves_to_a_shorter_tier(self) -> None:
        """Across requests, each result's text is either unchanged or replaced by a shorter form."""
        outputs = economy_run(
            session_of(self.turns()),
            Economy(
                clear_at_least=500,
                min_horizon=2,
                horizon_share=1.0,
                risk=0.3,
                trim_age=2,
                summary_age=6,
                read_factor=1,
            ),
        )
        seen: dict[str, list[str]] = {}
        for out in outputs:
            for call_id, text in texts(out).items():
                seen.setdefault(call_id, []).append(text)
        moved = 0
        for forms in seen.values():
            distinct = list(dict.fromkeys(forms))
            moved += len(distinct) > 1
            assert [len(t) for t in distinct] == sorted((len(t) for t in distinct), reverse=True)
            # once a form is left it never comes back
            assert all(
                forms.index(t) + forms.count(t) - 1 == max(i for i, f in enumerate(forms) if f == t)
                for t in distinct
            )
        assert moved > 0

    def test_few_requests_rewrite_the_prefix(self) -> None:
        """With batching most requests extend the previous one; without it most rewrite it."""
        history = session_of(self.turns())

        def rewrites(economy: Economy) -> int:
            outputs = economy_run(history, economy)
            return sum(
                json.dumps(b) != json.dumps(a[: len(b)]) for a, b in zip(outputs[1:], outputs, strict=False)
            )

        batched = rewrites(Economy(clear_at_least=2_000, min_horizon=2, horizon_share=1.0))
        eager = rewrites(Economy(batch=False))
        assert batched < eager / 3
        assert eager > 10

    def test_fresh_session_gives_the_same_bytes(self) -> None:
        """A long-lived step and a fresh one give byte-identical output for every prefix."""
        history = session_of(self.turns(16))
        economy = Economy(clear_at_least=500, min_horizon=2, horizon_share=1.0)
        store = MemoryStore()
        for request, out in zip(requests(history), economy_run(history, economy, store), strict=True):
            fresh = run_pipeline(
                request,
                format="anthropic",
                config=toolkeep.Config(),
                store=store,
                steps=[EconomyCompactor(economy)],
            ).messages
            assert json.dumps(fresh) == json.dumps(out)

    def test_edited_earlier_result_refolds(self) -> None:
        """When an earlier result changes, the step refolds instead of serving stale decisions."""
        history = session_of(self.turns(16))
        economy = Economy(clear_at_least=500, min_horizon=2, horizon_share=1.0)
        step = EconomyCompactor(economy)
        config = toolkeep.Config()
        store = MemoryStore()
        run_pipeline(history, format="anthropic", config=config, store=store, steps=[step])
        edited = json.loads(json.dumps(history))
        edited[2]["content"][0]["content"] = "short now"
        out = run_pipeline(edited, format="anthropic", config=config, store=store, steps=[step]).messages
        fresh = run_pipeline(
            edited, format="anthropic", config=config, store=store, steps=[EconomyCompactor(economy)]
        ).messages
        assert json.dumps(out) == json.dumps(fresh)
        assert texts(out)["toolu_000"] == "short now"


class TestEconomyBatching:
    def history(self) -> list[Any]:
        # six 7,992-char results, then enough turns for all of them to reach the trim age
        turns = [("bash", {"command": "pytest"}, "PASSED line\n" * 666) for _ in range(6)]
        turns += [("bash", {"command": "ls"}, "ok") for _ in range(10)]
        return session_of(turns)

    def freed(self) -> float:
        """Tokens freed by moving every big result at once (measured with batching off), in
        chars of the texts as JSON strings, as the policy counts them."""
        out = economy_run(self.history(), Economy(batch=False, trim_age=3, summary_age=99))[-1]
        before = sum(len(json.dumps(t)) for t in texts(self.history()).values())
        return (before - sum(len(json.dumps(t)) for t in texts(out).values())) / 4

    def test_batch_below_clear_at_least_is_not_applied(self) -> None:
        """A batch that frees less than ``clear_at_least`` tokens leaves every result as it is."""
        freed = self.freed()
        economy = Economy(clear_at_least=int(freed) + 1, min_horizon=1_000, trim_age=3, summary_age=99)
        for out in economy_run(self.history(), economy):
            assert texts(out) == {k: v for k, v in texts(self.history()).items() if k in texts(out)}

    def test_batch_over_clear_at_least_is_applied_together(self) -> None:
        """Once pending moves free enough, they are made in the same request."""
        economy = Economy(
            clear_at_least=int(self.freed() * 0.9), min_horizon=1_000, trim_age=3, summary_age=99, risk=0.3
        )
        outputs = economy_run(self.history(), economy)
        changed_at = []
        for out in outputs:
            big = [t for k, t in texts(out).items() if int(k[-3:]) < 6]
            changed_at.append(sum(t != "PASSED line\n" * 666 for t in big))
        first = next(n for n, c in enumerate(changed_at) if c)
        assert changed_at[first] == 6  # the batch moved all of them at once
        assert all(c >= changed_at[first] for c in changed_at[first:])

    def test_unprofitable_rewrite_is_skipped(self) -> None:
        """With a horizon too short to pay back the rewrite, nothing moves."""
        history = self.history()
        economy = Economy(clear_at_least=1, min_horizon=0, horizon_share=0.0, trim_age=3, summary_age=99)
        pricing = "read=0.1,write=100,ttl=300"
        assert texts(economy_run(history, economy, pricing=pricing)[-1]) == texts(history[:-1])

    def test_risk_bounds_the_first_batch(self) -> None:
        """With no risk allowed and nothing saved yet, a batch that would pay later is never made."""
        history = self.history()
        free = Economy(clear_at_least=1, min_horizon=1_000, trim_age=3, summary_age=99, risk=0.3)
        assert texts(economy_run(history, free)[-1]) != texts(history[:-1])
        none = Economy(clear_at_least=1, min_horizon=1_000, trim_age=3, summary_age=99, risk=0.0)
        assert texts(economy_run(history, none)[-1]) == texts(history[:-1])

    def test_new_messages_are_no_part_of_the_rewrite_cost(self) -> None:
        """A result due at age 1 moves even when the newest result is huge: that one is written
        at full price with or without the move, so it does not count against the rewrite."""
        big = "PASSED line\n" * 666
        turns = [("bash", {"command": "pytest"}, big), ("bash", {"command": "ls"}, "f\n" * 100_000)]
        economy = Economy(risk=1.0, min_horizon=6)
        last = economy_run(session_of(turns), economy)[-1]
        assert len(texts(last)["toolu_000"]) < len(big) // 2
        # the same move with the newest result priced as rewritten would cost more than it saves
        assert 0.1 * len(big) * (economy.min_horizon + 1) < 1.15 * 200_000


def page(n: int, first: int = 0) -> str:
    """A browser page state of ``n`` interactive elements, about 45 chars each (reports from
    ``first`` on)."""
    return "".join(f"[{1000 + i}]<button>Open report_{first + i}.csv</button>\n" for i in range(n))


def listing(n: int) -> str:
    """A page of ``n`` rows, a file name on every third: its summary with the names index is
    about a tenth of it."""
    return "".join(
        f"<li>row {i % 50} of the listing: {f'report_{i}.csv' if i % 3 == 0 else 'nothing to see'}</li>\n"
        for i in range(n)
    )


def costs(outputs: list[list[Any]]) -> list[float]:
    """The cumulative cost after each request, as the economics bench prices it."""
    meter = SessionMeter(CostModel())
    out = []
    for request in outputs:
        meter.add(request)
        out.append(meter.cost)
    return out


LEAN_AT_ONCE = Economy(lean_after=0, index_share=0.3, index_max=10_000)
"""The earlier defaults, under which a short session's first batch is lean: with the default
names index a page's summary frees too little for its batch (``clear_at_least``), and lean
summaries wait for ``lean_after`` stalled requests."""


class TestEconomyInsurance:
    """A rewrite is paid for by what the session has already saved, so no session, whenever it
    ends, costs more than unmanaged."""

    def short_session(self) -> list[Any]:
        # a few small turns, one large page, and the session ends one request later
        turns = [("browser_click", {"index": i}, "clicked") for i in range(5)]
        turns += [("browser_get_state", {}, listing(200)), ("browser_click", {"index": 9}, "clicked")]
        return session_of(turns)

    @pytest.mark.parametrize("lean", [True, False])
    def test_a_session_ending_right_after_the_first_batch_costs_no_more_than_unmanaged(
        self, lean: bool
    ) -> None:
        """With lean summaries at once the page is shortened at age 1, its move free; without
        them it waits for savings that pay for its summary. Either way no request leaves the
        session costlier than unmanaged."""
        history = self.short_session()
        unmanaged = costs(requests(history))
        outputs = economy_run(history, Economy(lean=lean, lean_after=0))
        assert (texts(outputs[-1])["toolu_005"] != listing(200)) is lean
        assert all(c <= u for c, u in zip(costs(outputs), unmanaged, strict=True))
        # the old guard let a batch cost up to a tenth of what the session had cost unmanaged,
        # and with nothing saved made it with the whole summary: 3 % over unmanaged here
        old = costs(economy_run(history, Economy(risk=0.1, lean=False)))
        assert old[-1] > 1.02 * unmanaged[-1]

    def test_the_first_batch_is_lean_and_later_ones_are_not(self) -> None:
        """With lean summaries at once and nothing saved, a result goes to its lean summary
        (its move free); once the session has saved, the next one gets the whole summary with
        its names index."""
        turns = [("browser_click", {"index": i}, "clicked") for i in range(3)]
        turns += [("browser_get_state", {}, page(200)), ("browser_click", {"index": 9}, "clicked")]
        turns += [("browser_click", {"index": i}, "clicked") for i in range(6)]
        # another page: the same one again would show no name the first does not (see below)
        turns += [("browser_get_state", {}, page(200, 500)), ("browser_click", {"index": 9}, "clicked")]
        last = texts(economy_run(session_of(turns), LEAN_AT_ONCE)[-1])
        first, later = last["toolu_003"], last["toolu_011"]
        assert first.startswith("[Old tool result cleared -- ") and later.startswith(
            "[Old tool result cleared -- "
        )
        assert len(json.dumps(first)) < 0.08 * len(json.dumps(page(200)))
        assert len(later) > 1.5 * len(first)
        assert later.count("report_") > 2 * first.count("report_")

    def test_lean_summaries_wait_for_stalled_batches_then_stay(self) -> None:
        """Every result under the per-result limit, so nothing is saved: no batch of whole
        summaries is affordable. The first batch is of lean summaries once batches have stalled
        for ``lean_after`` requests; from then on lean batches need no second wait."""

        def output(n: int) -> str:
            return "".join(
                f"step {n}.{i}: computed value {i * 7919 % 1000} for item_{i}\n" for i in range(120)
            )

        history = session_of([("bash", {"command": f"python run.py {n}"}, output(n)) for n in range(14)])
        original = texts(history)

        def shortened(outputs: list[list[Any]]) -> list[int]:
            return [sum(t != original[c] for c, t in texts(o).items()) for o in outputs]

        def first(counts: list[int]) -> int:
            return next(request for request, n in enumerate(counts) if n)

        waiting = shortened(economy_run(history, Economy()))
        at_once = shortened(economy_run(history, Economy(lean_after=0)))
        assert first(waiting) >= first(at_once) + Economy().lean_after
        assert waiting[-1] >= 6  # most of the 13 old results, not one batch's worth
        assert not any(shortened(economy_run(history, Economy(lean=False))))

    def test_names_shown_before_are_not_indexed_again(self) -> None:
        """A second copy of a page lists none of the names the first showed: the agent has them."""
        turns = [("browser_click", {"index": i}, "clicked") for i in range(3)]
        turns += [("browser_get_state", {}, page(200)), ("browser_click", {"index": 9}, "clicked")]
        turns += [("browser_click", {"index": i}, "clicked") for i in range(6)]
        turns += [("browser_get_state", {}, page(200)), ("browser_click", {"index": 9}, "clicked")]
        last = texts(economy_run(session_of(turns), LEAN_AT_ONCE)[-1])
        first, again = last["toolu_003"], last["toolu_011"]
        assert "\nnames: " in first and again.startswith("[Old tool result cleared -- ")
        assert "\nnames: " not in again

    @pytest.mark.parametrize("pricing", ["anthropic-5m", "openai"])
    def test_a_run_of_reads_is_shortened_once_its_batches_stall(self, pricing: str) -> None:
        """Sixteen reads in a row, none over the budget: each due read would rewrite the held
        read after it, so no first batch is free; after min_horizon stalled requests the due
        and held reads go to stubs together (the Codex shape is tested in
        test_proxy_conversations), and without the lever nothing is ever shortened."""
        turns = [
            ("Read", {"file_path": f"/src/m{n}.py"}, source(90).replace("handler", f"m{n}_h"))
            for n in range(16)
        ]
        on = texts(economy_run(session_of(turns), Economy(), pricing=pricing)[-1])
        off = texts(economy_run(session_of(turns), Economy(lean_tail=False), pricing=pricing)[-1])
        original = texts(session_of(turns))
        assert off == original
        shortened = [k for k in sorted(on) if on[k] != original[k]]
        assert len(shortened) >= 6 and shortened == sorted(on)[: len(shortened)]
        assert on["toolu_015"] == original["toolu_015"]
        assert all("<<ccr:" in on[k] for k in shortened)

    def test_a_prepared_history_sent_back_is_prepared_the_same(self, tmp_path: Path) -> None:
        """Old inputs the policy shortened are put back before it folds, so the savings they
        brought still pay for the same rewrites when the prepared history is sent again."""
        turns = [("Write", {"file_path": "/a.py", "content": source(400)}, "File written")]
        turns += [("browser_click", {"index": i}, "clicked") for i in range(7)]
        turns += [("browser_get_state", {}, page(200)), ("browser_click", {"index": 9}, "clicked")]
        history = session_of(turns)
        config = toolkeep.Config(policy="economy")
        with toolkeep.Session(config, workspace=tmp_path) as session:
            out, _ = session.prepare(history[:-1], format="anthropic")
            assert "chars omitted from old tool call input" in out[1]["content"][0]["input"]["content"]
            assert texts(out)["toolu_008"].count("report_") > 30  # insured: the whole summary
            again, _ = session.prepare(out, format="anthropic")
            assert json.dumps(again) == json.dumps(out)


class TestEconomyPreservation:
    def test_failures_stay_longer_than_passing_runs(self) -> None:
        """An execution that failed keeps its full text after a passing one of the same age is cut."""
        failing = "collected 3 items\n" + "x\n" * 3_000 + "FAILED tests/test_a.py::test_x - AssertionError\n"
        passing = "collected 3 items\n" + "x\n" * 3_000 + "3 passed in 0.1s\n"
        turns = [("bash", {"command": "pytest"}, failing), ("bash", {"command": "pytest"}, passing)]
        turns += [("bash", {"command": "ls"}, "ok") for _ in range(6)]
        out = economy_run(
            session_of(turns), Economy(batch=False, trim_age=3, summary_age=6, failure_factor=3)
        )[-1]
        assert texts(out)["toolu_000"] == failing
        assert len(texts(out)["toolu_001"]) < len(passing)

    def test_reads_stay_longer_than_executions(self) -> None:
        """A file read stays whole at an age where an execution's output is summarized."""
        text = source(60)
        turns = [("bash", {"command": "python app.py"}, text), ("bash", {"command": "cat app.py"}, text)]
        turns += [("bash", {"command": "ls"}, "ok")]
        out = economy_run(session_of(turns), Economy(batch=False, min_chars=1_200))[-1]
        assert texts(out)["toolu_000"].startswith("[Old tool result cleared -- ")  # age 2, due at 1
        assert texts(out)["toolu_001"] == text  # age 1, due at 2
        out = economy_run(session_of(turns), Economy(batch=False, read_factor=1))[-1]
        assert texts(out)["toolu_001"] != text

    def test_superseded_read_goes_first(self) -> None:
        """Reading the same file again shortens the older read at once, the newer stays whole."""
        text = source(60)  # over the 3,000 chars up to which results stay whole
        turns = [("bash", {"command": "cat app.py"}, text), ("bash", {"command": "cat app.py"}, text)]
        out = economy_run(session_of(turns), Economy(batch=False))[-1]
        assert texts(out)["toolu_000"].startswith("[Old tool result cleared -- ")
        assert texts(out)["toolu_001"] == text

    def test_old_write_input_is_shortened_and_recoverable(self) -> None:
        """The file content of an old write call is cut to its head with a marker to the original."""
        content = source(30)
        turns = [("Write", {"file_path": "/a.py", "content": content}, "File written")]
        turns += [("bash", {"command": "ls"}, "ok") for _ in range(8)]
        store = MemoryStore()
        out = economy_run(session_of(turns), Economy(batch=False, input_age=6), store)[-1]
        sent = out[1]["content"][0]["input"]["content"]
        assert sent.startswith(content[:300]) and "chars omitted from old tool call input" in sent
        assert store.get(sent.rsplit("<<ccr:", 1)[1][:16]) == content


@pytest.mark.parametrize("path", [p for p in TRAJECTORIES if p.stat().st_size < 100_000][:3] or [None])
def test_real_trajectory_fresh_equals_long_lived(path: Path | None, tmp_path: Path) -> None:
    """On real trajectories, the economy policy's session output equals a fresh run's at every request."""
    shared_or_skip()
    assert path is not None
    history = load_trajectory(path)
    config = toolkeep.Config(policy="economy")
    with toolkeep.Session(config, workspace=tmp_path) as session:
        for request in [*requests(history), history]:
            out, _ = session.prepare(request, format="anthropic")
            fresh, _ = run_pipeline(
                request, format="anthropic", config=config, workspace=session.workspace, store=session.store
            )
            assert json.dumps(out) == json.dumps(fresh)
            again, _ = session.prepare(out, format="anthropic")
            assert json.dumps(again) == json.dumps(out)
