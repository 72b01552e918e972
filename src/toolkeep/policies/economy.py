"""The cache-aware policy, ``policy="economy"``: shorten old results only when it pays.

With prompt caching, every request re-reads the cached prefix at a tenth of the price, and any
change to an earlier message makes the provider write everything after it again at 1.25x. A
policy that shortens one more result on every request (age tiers, "keep the last N") rewrites
the tail of the prompt on every request and can cost more than doing nothing. This one:

1. decides each result's shortened forms once, from its original (:mod:`.forms`: full,
   trimmed, summary, lean summary), and only ever moves a result to a shorter tier;
2. collects the moves that ages call for and applies them together, only when the batch pays
   for the rewrite it causes (:mod:`.cost`), with what the policy has saved so far paying for
   what the rewrite adds to the request that makes it (:mod:`.accounting`): so however soon
   after a batch a session ends, it has cost no more than unmanaged. A result is due for its
   summary at age 1: the agent has seen it whole once, and only one turn lies after it, so
   the rewrite is as short as it gets;
3. keeps what agents use: a read of a file is due one turn later (the agent edits from it) and
   goes at once when the same file is read again, failures and errors stay longer, and the
   shortened forms keep error lines and the tail of execution output, the first lines of search
   output, and an outline of definitions with line numbers for source files, followed by a
   ``names:`` index of the identifiers, paths and numbers they left out;
4. shortens the long strings of old tool-call inputs (:mod:`.inputs`), which on long coding
   sessions weigh as much as the results.

The decisions are a fold over the history's requests (one before each assistant message, and
the one being prepared), so the output is a function of the history alone: a new session given
the same history sends the same bytes. :class:`EconomyPlan` is that fold; a session's engine
keeps it from one request to the next, so a growing session folds only what is new and renders
only the blocks whose tiers changed.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Container, Hashable, Mapping

from ..config import Config, Economy
from ..formats import text_chars
from ..messages import History, Part, ToolCallPart, ToolResultPart
from ..pricing import resolve_pricing
from ..shortforms.commands import Kind, call_kind, call_target
from ..shortforms.inputs import RestoreInputs, parsed_object
from ..shortforms.previews import names_of
from ..steps import Pipeline, Reuse, StepContext
from .accounting import FoldState, Item, account, allowance, grow_chars
from .cost import CostModel
from .forms import Forms
from .spec import spec_steps

__all__ = ["EconomyCompactor", "EconomyPlan", "economy_steps"]

_FAILURE = re.compile(
    r"Traceback \(most recent call last\)|\bFAILED\b|\bFAIL:|\bERROR\b|[Ee]rror:|error\[|"
    r"BUILD FAILURE|panicked at|exit (?:code|status) [1-9]|command not found|No such file",
)


class EconomyCompactor:
    """The economy policy's compaction step (see the module docstring). On its own it decides
    a whole history at once; in a session the engine keeps its plan (:attr:`reuse`)."""

    def __init__(self, economy: Economy | None = None) -> None:
        self.economy = economy or Economy()
        self.reuse = Reuse(plan=self.new_plan)
        """It decides over the whole session: a session keeps an :class:`EconomyPlan`."""

    def new_plan(self) -> EconomyPlan:
        return EconomyPlan(self.economy)

    def __call__(self, history: History, ctx: StepContext) -> History:
        plan = self.new_plan()
        plan.update(history, 0, ctx)
        return plan.render(history, 0, len(history), ctx)


class EconomyPlan:
    """The fold of one session's requests (a :class:`~toolkeep.steps.Plan`)."""

    def __init__(self, economy: Economy) -> None:
        self.economy = economy
        self.forms = Forms(economy, self._prior)
        self.cost = CostModel(economy, self.forms)
        self._reset()

    def _reset(self) -> None:
        self.fold = FoldState()
        self.assistants: list[int] = []
        """Indexes of the assistant messages of the flat history."""
        self.scanned = 0
        self.item_messages: list[int] = []
        """``fold.items``' message indexes (ascending), to find a range's items."""
        self.trailing: list[Item] = []
        """Items of the messages after the last assistant message: decided on the side."""
        self.side: dict[int, int] = {}
        """Tier moves decided for the request being prepared, by ``id(item)``."""
        self.side_reasons: dict[int, str] = {}
        """Why each of ``side`` was decided, by ``id(item)``."""
        self.side_messages: set[int] = set()
        self.reuse: dict[tuple[int, int], Item] = {}
        """The last trailing items by place, with what they were made of: a trailing item
        found unchanged keeps the forms it computed (the next request registers it)."""
        self.first_shown: dict[str, tuple[int, int]] = {}
        """Each name the registered results show, with the place of the first that shows it."""
        self.names_indexed = 0
        """``fold.items`` whose names are in ``first_shown``."""

    def _prior(self, item: Item) -> Container[str]:
        """The names the results before ``item`` show (its names index leaves them out): a
        function of the history before it, so it is the same however the history arrived."""
        items = self.fold.items
        first = self.first_shown
        for other in items[self.names_indexed :]:
            if isinstance(other.obj, ToolResultPart):
                place = (other.message, other.part)
                for name in _names(other):
                    first.setdefault(name, place)
        self.names_indexed = len(items)
        at = (item.message, item.part)
        extra: set[str] = set()
        registered = self.fold.registered
        for other in self.trailing:  # those of this request: ones before it are registered
            if (
                other.message >= registered
                and isinstance(other.obj, ToolResultPart)
                and (other.message, other.part) < at
            ):
                extra |= _names(other)
        return _Before(first, at, extra)

    def update(self, flat: History, changed: int, ctx: StepContext) -> set[int] | None:
        """Decide the request ``flat``; ``flat[:changed]`` is unchanged since the last update.
        Returns the indexes of messages whose rendering may differ from the last update's, or
        ``None`` when every message's may (the fold started again)."""
        fold = self.fold
        reset = changed < fold.registered
        if reset:
            self._reset()
            fold = self.fold
        start = 0 if reset else min(changed, self.scanned)
        assistants = self.assistants
        del assistants[bisect_left(assistants, start) :]
        assistants.extend(i for i in range(start, len(flat)) if flat[i].role == "assistant")
        self.scanned = len(flat)
        e = self.economy
        size = self.forms.size
        pricing = resolve_pricing(ctx.config.pricing, ctx.format)
        expiry = ctx.expiry
        moved: set[int] = set()
        for n in range(fold.boundaries, len(assistants)):
            block = bisect_left(assistants, fold.registered)
            new = self._items(flat, fold.registered, assistants[n], block, fold.calls, fold.calls, ctx)
            for item, target in new:
                self._supersede(fold.reads, item, target)
                fold.items.append(item)
                self.item_messages.append(item.message)
                if self._may_shrink(item, ctx):
                    fold.active.append(item)
            fold.registered = assistants[n]
            grown = len(fold.message_chars)
            grow_chars(fold.message_chars, flat, assistants[n], ctx.format)
            # a result cut by a cap or the budget is sent as its entry form (with the names
            # index); what the cut left out is saved already
            cut = 0
            for item, _ in new:
                if isinstance(item.obj, ToolResultPart):
                    entry = size(item, 0, ctx)
                    fold.message_chars[item.message] += entry - text_chars(item.obj.text)
                    cut += text_chars(item.obj.full_text) - entry
            added = sum(fold.message_chars[grown:])
            expired = expiry is not None and expiry.expired(n)
            decision = self.cost.decide(
                fold.active,
                fold.message_chars,
                n,
                assistants[n - 1] if n else 0,
                ctx,
                allowance(fold, e.risk),
                pricing=pricing,
                expired=expired,
                stalled=fold.stalled,
                leaned=fold.leaned,
            )
            moves = decision.moves
            for item, _ in moves:
                item.reason = _why(decision.reason, item, n)
            fold.stalled = fold.stalled + 1 if decision.blocked else 0
            fold.leaned = fold.leaned or decision.lean
            freed = [size(item, item.tier, ctx) - size(item, want, ctx) for item, want in moves]
            account(fold, moves, freed, added, cut, pricing, expired)
            moved.update(item.message for item, _ in moves)
            fold.boundaries = n + 1
        # the request being prepared now is decided on the side: the next history may not
        # extend this one past its last assistant message
        block = bisect_left(assistants, fold.registered)
        trailing = self._items(flat, fold.registered, len(flat), block, fold.calls, {}, ctx)
        self.trailing = [item for item, _ in trailing]  # before any form of theirs: see _prior
        reads: dict[str, Item] = {}
        superseded: set[int] = set()
        for item, target in trailing:
            if target is not None:
                older = reads.get(target) or fold.reads.get(target)
                reads[target] = item
                if older is not None:
                    superseded.add(id(older))
        active = fold.active + [item for item, _ in trailing if self._may_shrink(item, ctx)]
        chars = fold.message_chars
        kept = len(chars)
        grow_chars(chars, flat, len(flat), ctx.format)
        try:
            decision = self.cost.decide(
                active,
                chars,
                len(assistants),
                assistants[-1] if assistants else 0,
                ctx,
                allowance(fold, e.risk),
                superseded,
                pricing=pricing,
                expired=expiry is not None and expiry.current(len(assistants)),
                stalled=fold.stalled,
                leaned=fold.leaned,
            )
        finally:
            del chars[kept:]
        moves = decision.moves
        self.side_reasons = {
            id(item): _why(decision.reason, item, len(assistants), id(item) in superseded)
            for item, _ in moves
        }
        side_messages = {item.message for item, _ in moves}
        touched = moved | side_messages | self.side_messages
        self.side = {id(item): want for item, want in moves}
        self.side_messages = side_messages
        self.reuse = {(item.message, item.part): item for item in self.trailing}
        return None if reset else touched

    def key(self, start: int, end: int) -> Hashable:
        """The tiers of the items of ``flat[start:end]``, as last decided."""
        side = self.side
        return tuple(side.get(id(item), item.tier) for item in self._range(start, end))

    def render(self, flat: History, start: int, end: int, ctx: StepContext) -> History:
        """``flat[start:end]`` with every item at its tier (counts go to ``ctx.report``)."""
        changes: dict[int, dict[int, Part]] = {}
        for item in self._range(start, end):
            tier = self.side.get(id(item), item.tier)
            if tier == 0 and (item.kind is None or item.obj.original is None):  # type: ignore[union-attr]
                continue
            form = self.forms.form(item, tier, ctx)
            current = flat[item.message].parts[item.part]
            if isinstance(current, ToolResultPart):
                if form == current.text:
                    continue
                cut = current.with_text(form, key=item.obj.key)  # type: ignore[union-attr]
                if tier >= 1:
                    kind = "summarized" if tier >= 2 else "truncated"
                    why = (
                        self.side_reasons.get(id(item), item.reason) if id(item) in self.side else item.reason
                    )
                    ctx.add_cut(kind, cut, item.message - start, current.text, why)
                new: Part = cut
            elif isinstance(current, ToolCallPart):
                new = current.with_arguments(form)
            else:
                continue
            changes.setdefault(item.message, {})[item.part] = new
        out = flat[start:end]
        for index, parts in changes.items():
            m = flat[index]
            out[index - start] = m.with_parts([parts.get(j, p) for j, p in enumerate(m.parts)])
        return out

    def _range(self, start: int, end: int) -> list[Item]:
        messages = self.item_messages
        items = self.fold.items[bisect_left(messages, start) : bisect_left(messages, end)]
        return items + [item for item in self.trailing if start <= item.message < end]

    def _may_shrink(self, item: Item, ctx: StepContext) -> bool:
        e = self.economy
        if item.kind is None:
            return e.inputs and self.forms.size(item, 2, ctx) < self.forms.size(item, 0, ctx)
        # small results keep their text: only the request budget, as a last resort, cuts them
        least = ctx.config.compact_min_chars if e.min_chars is None else e.min_chars
        return len(item.obj.full_text) > least  # type: ignore[union-attr]

    def _items(
        self,
        history: History,
        start: int,
        stop: int,
        block: int,
        known: Mapping[str, ToolCallPart],
        into: dict[str, ToolCallPart],
        ctx: StepContext,
    ) -> list[tuple[Item, str | None]]:
        """The items of messages ``start`` to ``stop``, each with the file it reads (if any);
        ``block`` is the number of assistant messages before ``start``. The calls met are
        added to ``into``; a result's call is looked up there, then in ``known``. An item the
        last update made of the same things at the same place is taken again, forms and all."""
        e = self.economy
        inputs = e.inputs and ctx.format.rules.editable_arguments
        reuse = self.reuse
        out: list[tuple[Item, str | None]] = []
        block -= 1
        for index in range(start, stop):
            m = history[index]
            if m.role == "assistant":
                block += 1
                for j, part in enumerate(m.parts):
                    if not isinstance(part, ToolCallPart):
                        continue
                    into[part.id] = part
                    if inputs and parsed_object(part.arguments) is not None:
                        made: Hashable = (part.id, part.name, id(part.arguments), block)
                        item = reuse.get((index, j))
                        if item is None or item.made != made:
                            item = Item(index, j, block, part, made=made)
                        out.append((item, None))
                continue
            for j, part in enumerate(m.parts):
                if not isinstance(part, ToolResultPart):
                    continue
                call = into.get(part.call_id) or known.get(part.call_id)
                arguments = call.arguments if call is not None else None
                name = part.name or (call.name if call is not None else None)
                kind: Kind = call_kind(name, arguments) if e.smart else "other"
                tail = part.full_text[-3_000:]
                failure = e.smart and (part.is_error or (kind == "exec" and bool(_FAILURE.search(tail))))
                target = call_target(name, arguments) if kind == "read" and e.smart else None
                recalled = (name or "").lower() in ctx.config.recall_tools
                made = (
                    part.call_id,
                    part.full_text,
                    part.text,
                    part.saved_path,
                    kind,
                    failure,
                    block,
                    m.role,
                    recalled,
                )
                item = reuse.get((index, j))
                if item is None or item.made != made:
                    item = Item(index, j, block, part, kind, failure, recalled, role=m.role, made=made)
                out.append((item, target))
        return out

    @staticmethod
    def _supersede(reads: dict[str, Item], item: Item, target: str | None) -> None:
        """Record ``item`` as the newest read of ``target``, superseding the read before it."""
        if target is None:
            return
        older = reads.get(target)
        reads[target] = item
        if older is not None:
            older.superseded = True


def _why(reason: str, item: Item, requests: int, superseded: bool = False) -> str:
    """``reason`` for one item's move at the ``requests``-th request, with what made it due."""
    age = requests - 1 - item.block
    due = "the same file was read again" if superseded or item.superseded else f"age {age}"
    what = "input" if item.kind is None else f"{item.kind}{' (failure)' if item.failure else ''}"
    return f"{what}, {due}: {reason}" if reason else f"{what}, {due}"


def _names(item: Item) -> frozenset[str]:
    """The names ``item``'s original shows, computed once: a trailing item is asked again at
    each form of the results after it, and again when the next request registers it."""
    if item.names is None:
        assert isinstance(item.obj, ToolResultPart)
        item.names = names_of(item.obj.full_text)
    return item.names


class _Before:
    """The names shown before a place: first shown there earlier, or in ``extra``."""

    __slots__ = ("at", "extra", "first")

    def __init__(self, first: dict[str, tuple[int, int]], at: tuple[int, int], extra: set[str]) -> None:
        self.first, self.at, self.extra = first, at, extra

    def __contains__(self, name: object) -> bool:
        place = self.first.get(name)  # type: ignore[call-overload]
        return (place is not None and place < self.at) or name in self.extra


def economy_steps(config: Config, economy: Economy | None = None) -> Pipeline:
    """The economy pipeline: pairing, originals and inputs restored, per-tool caps, budget,
    cache-aware compaction (``economy``, default ``config.economy``)."""
    economy = economy or config.economy
    if economy.entry_chars is not None and economy.entry_chars < config.max_result_chars:
        config = config.replace(max_result_chars=economy.entry_chars)
    spec = spec_steps(config)
    return spec.with_slot("restore", *spec.restore, RestoreInputs()).with_slot(
        "compact", EconomyCompactor(economy)
    )
