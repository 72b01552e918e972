"""Replay every trajectory through every policy; price each request and check each fact.

``python -m bench.economics`` (from the repository root) prints the table and writes the
``## Economics`` section of ``bench/results.md``. ``--only NAME`` runs some rows; ``--lookup
prefix`` prices with the stricter cache (an earlier request must be a whole prefix).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cost import CostModel, SessionMeter
from .data import Trajectory
from .facts import Fact, FactTally, later_used_facts
from .references import Policy, anthropic_clear_tool_uses, keep_newest, observation_window

MakePolicy = Callable[[Trajectory], tuple[Policy, "Callable[[str], str | None] | None", Callable[[], None]]]
"""Builds a policy for one trajectory: the request function, a recover function, a closer."""


def reference(make: Callable[[Trajectory], Policy]) -> MakePolicy:
    """A reference policy: no way back, nothing to close."""
    return lambda t: (make(t), None, lambda: None)


def unmanaged(t: Trajectory) -> Policy:
    """The history as recorded."""
    return lambda i: t.messages[:i]


def toolkeep_policy(policy: str, **config: Any) -> MakePolicy:
    """A toolkeep ``Session`` with ``Config(policy=policy, **config)``, one per trajectory, fed
    the growing history request by request (as an agent would), every request at one clock
    reading (the cache never expires: the cost model's assumption)."""

    def make(t: Trajectory) -> tuple[Policy, Callable[[str], str | None], Callable[[], None]]:
        import toolkeep
        from toolkeep.stores import MemoryStore

        tmp = tempfile.TemporaryDirectory(prefix="toolkeep-econ-")
        store = MemoryStore()
        session = toolkeep.Session(
            toolkeep.Config(policy=policy, **config), workspace=tmp.name, store=store, clock=lambda: 0.0
        )

        def request(i: int) -> list[Any]:
            return session.prepare(t.messages[:i], format="anthropic").messages

        def recover(ref: str) -> str | None:
            if "/" not in ref:
                return session.recall(ref)
            path = Path(ref)
            return path.read_text(encoding="utf-8") if path.is_file() else None

        def close() -> None:
            session.close()
            tmp.cleanup()

        return request, recover, close

    return make


def economy_variant(pricing: Any = None, **levers: Any) -> MakePolicy:
    """The economy policy with some levers or numbers changed (``Config(economy=Economy(**levers))``),
    through a ``Session`` as :func:`toolkeep_policy` runs every policy."""
    from toolkeep.config import Economy

    return toolkeep_policy("economy", economy=Economy(**levers), pricing=pricing)


@dataclass
class Row:
    """One policy's results over all trajectories."""

    name: str
    costs: dict[str, float] = field(default_factory=dict)
    strict: dict[str, float] = field(default_factory=dict)
    """The same requests priced with the other cache lookup (see ``CostModel.lookup``)."""
    facts: dict[str, FactTally] = field(default_factory=dict)
    billed: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per trajectory: tokens read, written and uncached and their dollars (``SessionMeter.breakdown``)."""
    seconds: float = 0.0
    note: str = ""


def run_policy(
    name: str,
    make: MakePolicy,
    trajectories: Sequence[Trajectory],
    facts: dict[str, list[Fact]],
    model: CostModel,
) -> Row:
    """Replay ``trajectories`` through one policy."""
    row = Row(name)
    start = time.process_time()
    for t in trajectories:
        policy, recover, close = make(t)
        meter = SessionMeter(model)
        tally = FactTally()
        by_use: dict[int, list[Fact]] = {}
        for fact in facts[t.name]:
            by_use.setdefault(fact.use, []).append(fact)
        try:
            for i in t.requests:
                request = policy(i)
                meter.add(request)
                for fact in by_use.get(i, ()):
                    tally.count(request, fact, recover)
        finally:
            close()
        row.costs[t.name] = meter.cost
        row.strict[t.name] = meter.other_cost
        row.billed[t.name] = meter.breakdown()
        row.facts[t.name] = tally
    row.seconds = time.process_time() - start
    return row


@dataclass
class Summary:
    """A row's figures relative to unmanaged, over a set of trajectories."""

    pooled: float
    median: float
    worst: float
    visible: float
    recoverable: float
    anywhere: float
    facts: int = 0
    hidden_line_numbers: int = 0
    """Facts not visible that are numbers their source shows only as a listing's line number."""


def summarize(row: Row, base: Row, names: Sequence[str]) -> Summary:
    """Pooled cost ratio, median and worst per-session ratio, and fact shares over ``names``."""
    ratios = [row.costs[n] / base.costs[n] for n in names]
    tally = FactTally()
    for n in names:
        tally.add(row.facts[n])
    share = (lambda k: k / tally.total) if tally.total else (lambda k: 1.0)
    return Summary(
        pooled=sum(row.costs[n] for n in names) / sum(base.costs[n] for n in names),
        median=statistics.median(ratios),
        worst=max(ratios),
        visible=share(tally.visible),
        recoverable=share(tally.recoverable),
        anywhere=share(tally.anywhere),
        facts=tally.total,
        hidden_line_numbers=tally.hidden_line_numbers,
    )


REFERENCES: dict[str, tuple[str, MakePolicy]] = {
    "unmanaged": ("the history as recorded", reference(unmanaged)),
    "swe-agent-keep5": ("SWE-agent style: keep 5 newest results, mask older", reference(keep_newest)),
    "window-10": ('10-turn observation window ("Complexity Trap")', reference(observation_window)),
    "anthropic-clear": (
        "Anthropic `clear_tool_uses` defaults (trigger 100k tokens, keep 3)",
        reference(anthropic_clear_tool_uses),
    ),
}


def all_policies(
    pricing: Any = None, policy: str | None = None
) -> dict[str, tuple[str, MakePolicy | None, str]]:
    """Every row: name -> (description, maker or ``None`` when unavailable, note). The toolkeep
    rows decide with ``pricing`` (a ``toolkeep.pricing`` list; ``None``: the format's); ``policy``
    adds the row ``toolkeep-POLICY`` when it is not one of them."""
    from . import headroom_ref
    from .langchain_ref import available, langchain_clear_tool_uses

    rows: dict[str, tuple[str, MakePolicy | None, str]] = {
        name: (desc, make, "") for name, (desc, make) in REFERENCES.items()
    }
    missing = available()
    rows["langchain-clear"] = (
        "LangChain `ClearToolUsesEdit` defaults (the real class)",
        None if missing else reference(langchain_clear_tool_uses),
        missing or "",
    )
    missing = headroom_ref.available()
    rows["headroom-compress"] = (
        "Headroom `compress(messages)` on each request (the real package, defaults)",
        None if missing else reference(headroom_ref.headroom_compress),
        missing or "",
    )
    rows["toolkeep-seed"] = (
        'toolkeep `policy="seed"` (ChatCLI\'s exact behaviour)',
        toolkeep_policy("seed", pricing=pricing),
        "",
    )
    rows["toolkeep-spec"] = (
        'toolkeep `policy="spec"` (the SPEC)',
        toolkeep_policy("spec", pricing=pricing),
        "",
    )
    rows["toolkeep-economy"] = (
        'toolkeep `policy="economy"` (cache-aware)',
        toolkeep_policy("economy", pricing=pricing),
        "",
    )
    if policy is not None and f"toolkeep-{policy}" not in rows:
        rows[f"toolkeep-{policy}"] = (
            f'toolkeep `policy="{policy}"`',
            toolkeep_policy(policy, pricing=pricing),
            "",
        )
    return rows


def compute_facts(trajectories: Sequence[Trajectory]) -> dict[str, list[Fact]]:
    """The later-used facts of every trajectory."""
    return {t.name: later_used_facts(t) for t in trajectories}
