"""The cache-aware policy, ``policy="economy"``: shorten old results only when it pays.

With prompt caching, every request re-reads the cached prefix at a tenth of the price, and any
change to an earlier message makes the provider write everything after it again at 1.25x. A
policy that shortens one more result on every request (age tiers, "keep the last N") rewrites
the tail of the prompt on every request and can cost more than doing nothing. This one:

1. decides each result's shortened forms once, from its original (the tiers: full, trimmed,
   summary, lean summary), and only ever moves a result to a shorter tier;
2. collects the moves that ages call for and applies them together, only when the batch frees
   at least ``clear_at_least`` tokens, the saving on the requests to come (estimated as many
   requests as the session has made so far) pays for rewriting the prompt after the first
   changed message (the messages new in this request are written anyway and are not counted),
   *and* what the policy has saved so far pays for what the rewrite adds to the request that
   makes it: so however soon after a batch a session ends, it has cost no more than unmanaged.
   Where the rewrite starts is chosen to maximize the net saving. With nothing saved yet (the
   first batch of most sessions), a batch is made with lean summaries, each as long as lets the
   move of its result cost nothing. A result is due for its summary at age 1: the agent has
   seen it whole once, and only one turn lies after it, so the rewrite is as short as it gets;
3. keeps what agents use: a read of a file is due one turn later (the agent edits from it) and
   goes at once when the same file is read again, failures and errors stay longer, and the
   shortened forms keep error lines and the tail of execution output, the first lines of search
   output, and an outline of definitions with line numbers for source files, followed by a
   ``names:`` index of the identifiers, paths and numbers they left out (the budget's entry
   preview gets one too);
4. shortens the long strings of old tool-call inputs (file contents sent by write and edit
   calls), which on long coding sessions weigh as much as the results.

The decisions are a fold over the history's requests (one before each assistant message, and
the one being prepared), so the output is a function of the history alone: a new session given
the same history sends the same bytes. The fold is memoized on the step, so a growing session
only folds what is new.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..config import Config
from ..content_type import detect_content_type
from ..messages import History, Message, Part, ToolCallPart, ToolResultPart
from ..shorten import carried_keys, compact_form, marker, summary_form
from ..steps import Microcompactor, Step, StepContext
from ._fold import (
    MESSAGE_OVERHEAD,
    RESULT_OVERHEAD,
    SLACK,
    FoldState,
    Item,
    fingerprints,
    grow_chars,
    input_chars,
    text_chars,
)
from .commands import Kind, call_kind, call_target
from .previews import lines_summary, trimmed_form, with_names

__all__ = ["Economy", "EconomyCompactor", "economy_steps"]

_FAILURE = re.compile(
    r"Traceback \(most recent call last\)|\bFAILED\b|\bFAIL:|\bERROR\b|[Ee]rror:|error\[|"
    r"BUILD FAILURE|panicked at|exit (?:code|status) [1-9]|command not found|No such file",
)
_SOURCE_TYPES = ("source", "JSON", "YAML", "XML", "HTML", "Markdown")
_OMITTED = " chars omitted from old tool call input ...]"
_OMITTED_TAIL = re.compile(r"\n\[\.\.\. (\d+)" + re.escape(_OMITTED) + r" <<ccr:([0-9a-f]{16})>>\Z")
LEAN = 3
"""The tier of a result's lean summary (see ``Economy.lean``)."""


@dataclass(frozen=True, kw_only=True)
class Economy:
    """The cost model, tiers and levers of the economy policy. Sizes in chars, savings in tokens.

    The levers can be switched off one by one (``batch``, ``lean``, ``smart``, ``previews``,
    ``inputs``) to measure what each is worth; ``bench/economics`` does.
    """

    cache_read: float = 0.1
    """Price of a cached input token, in base input tokens."""
    cache_write: float = 1.25
    """Price of an input token written to the cache."""
    chars_per_token: float = 4.0
    batch: bool = True
    """Move tiers only in batches that pay for their rewrite (else at every request)."""
    clear_at_least: int = 1_000
    """Tokens a batch of tier moves must free to be applied (as Anthropic's ``clear_at_least``)."""
    min_horizon: int = 6
    """Requests a batch is assumed to serve at least..."""
    horizon_share: float = 1.0
    """...else this share of the requests made so far: a session of unknown length that has
    made ``k`` requests is expected to make about ``k`` more. It only ranks batches by what they
    are likely to save; what a batch may lose if the session ends early is bounded by ``risk``."""
    risk: float = 0.0
    """A batch may cost the request that makes it no more than what the policy has saved so far
    plus this share of what the session has cost unmanaged. At 0 no session costs more than
    unmanaged, whichever request it ends after; above 0, one that ends right after a batch may
    cost up to ``1 + risk`` times unmanaged."""
    lean: bool = True
    """When what has been saved cannot pay for a batch with the summaries, make it with lean
    ones: the summary and names index cut to what lets a result's move, alone in its message,
    cost nothing (its message written at 1.25x where it was read at 0.1x: about 8 % of it)."""
    min_chars: int = 1_200
    """Results no longer than this are never shortened."""
    trim_age: int = 1
    summary_age: int = 1
    """Ages (in requests; 0 is the request a result first appears in) at which a result is due
    for its trimmed and summary forms. At age 1 the agent has seen it whole once, and the rewrite
    it causes is shortest: only the messages after it, one turn. So by default a result goes
    straight to its summary (with the names index) at age 1, and the trimmed tier serves only
    configurations with ``trim_age < summary_age``."""
    smart: bool = True
    """Classify shell commands, keep failures longer, shorten superseded reads first."""
    failure_factor: int = 3
    """Failures and errors move to each tier this many times later."""
    read_factor: int = 2
    """Reads of files (whose contents the agent goes on to edit or rewrite) move to each tier
    this many times later; output of executions and searches is usually consulted once."""
    previews: bool = True
    """Content-aware forms with a names index (else SPEC's head+tail and one-line summary)."""
    trim_chars: int = 2_000
    summary_chars: int = 600
    index_share: float = 0.2
    """The names index of a shortened result takes at most this share of the original..."""
    index_max: int = 3_000
    """...and at most this many chars."""
    inputs: bool = True
    """Also shorten the long strings of old tool-call inputs (file contents sent by write and
    edit calls), where the format keeps the input as a mapping (Anthropic)."""
    input_age: int = 6
    input_min_chars: int = 800
    input_head: int = 300
    head_chars: int = 2_000
    tail_chars: int = 500
    entry_chars: int | None = None
    """A lower per-result limit than the config's ``max_result_chars``: longer results enter as
    the budget's persisted preview (with the names index), so they are never written whole."""


class EconomyCompactor:
    """The economy policy's compaction step (see the module docstring)."""

    def __init__(self, economy: Economy | None = None) -> None:
        self.economy = economy or Economy()
        self._fold = FoldState()

    # -- forms ---------------------------------------------------------------------------------

    def size(self, item: Item, tier: int, ctx: StepContext) -> int:
        """Chars of ``item`` sent at ``tier``."""
        if tier not in item.sizes:
            form = self.form(item, tier, ctx)
            item.sizes[tier] = text_chars(form) if isinstance(form, str) else input_chars(form)
        return item.sizes[tier]

    def form(self, item: Item, tier: int, ctx: StepContext) -> Any:
        """``item`` at ``tier`` (0 as sent, 1 trimmed, 2 summary), never longer than the tier
        before it: a text for a result, an input mapping for a call."""
        if tier in item.forms:
            return item.forms[tier]
        if isinstance(item.obj, ToolCallPart):
            form: Any = item.obj.arguments if tier == 0 else self._input_form(item.obj.arguments, ctx)
        elif tier == 0:
            form = self._entry_form(item.obj)
        else:
            form = self._result_form(item, tier, ctx)
            previous = self.form(item, tier - 1, ctx)
            if len(form) >= len(previous):
                form = previous
        item.forms[tier] = form
        return form

    def _entry_form(self, p: ToolResultPart) -> str:
        """The result as it entered: cut by a cap or the budget, that preview gets the names
        index of what it left out (decided once, at entry, so the cache never pays for it)."""
        e = self.economy
        if p.original is None or not e.previews:
            return p.text
        return with_names(p.text, p.original, min(e.index_max, int(len(p.original) * e.index_share)))

    def _result_form(self, item: Item, tier: int, ctx: StepContext) -> str:
        e = self.economy
        p = item.obj
        assert isinstance(p, ToolResultPart)
        original = p.full_text
        key = p.key or ctx.archive(original)
        if key and p.key is None:
            item.obj = p = replace(p, key=key)
        keys = ([key] if key else []) + carried_keys(original)
        paths = [p.saved_path] if p.saved_path else []
        content_type = detect_content_type(original)
        if not e.previews:
            if tier == 1:
                return compact_form(original, e.head_chars, e.tail_chars, keys=keys, paths=paths)
            return summary_form(original, content_type, keys=keys, paths=paths)
        source = item.kind == "read" or any(t in content_type for t in _SOURCE_TYPES)
        kind = (
            "exec"
            if item.kind == "exec" or item.failure
            else "search"
            if item.kind in ("search", "list")
            else ""
        )
        kind = kind or ("source" if source else "text")
        index = min(e.index_max, int(len(original) * e.index_share))
        if tier == 1:
            text = trimmed_form(original, kind, e.trim_chars, keys=keys, paths=paths)
        elif tier == 2:
            text = lines_summary(original, content_type, kind, e.summary_chars, keys=keys, paths=paths)
        else:
            # the lean summary: as long as it can be for a move of this result alone in its
            # message to cost nothing (the message written at 1.25x where it was read at 0.1x,
            # with the slack of the size estimate); lines and names index share that length
            wrapper = MESSAGE_OVERHEAD + RESULT_OVERHEAD + len(p.call_id)
            read = e.cache_read * (self.size(item, 0, ctx) + wrapper)
            free = max(0, int((read - e.cache_write * (wrapper + SLACK)) / e.cache_write))
            text = lines_summary(
                original, content_type, kind, min(e.summary_chars, free // 2), keys=keys, paths=paths
            )
            if text_chars(text) > free:  # the lines chosen overran their share
                text = summary_form(original, content_type, keys=keys, paths=paths)
            index = min(index, free - text_chars(text) - text_chars("\nnames: "))
        return with_names(text, original, index)

    def _input_form(self, value: Any, ctx: StepContext) -> Any:
        e = self.economy
        if isinstance(value, str):
            if len(value) <= e.input_min_chars:
                return value
            key = ctx.archive(value)
            way = f" {marker(key)}" if key else ""
            omitted = len(value) - e.input_head
            return f"{value[: e.input_head]}\n[... {omitted}{_OMITTED}{way}"
        if isinstance(value, Mapping):
            return {k: self._input_form(v, ctx) for k, v in value.items()}
        if isinstance(value, list):
            return [self._input_form(v, ctx) for v in value]
        return value

    def desired(self, item: Item, age: int) -> int:
        """The tier ``item`` should be at ``age``."""
        e = self.economy
        if item.kind is None:
            return 2 if age >= e.input_age else 0
        if item.superseded:
            return 2
        factor = e.failure_factor if item.failure else 1
        if item.kind == "read" and e.smart:
            factor = max(factor, e.read_factor)
        if age >= e.summary_age * factor:
            return 2
        if age >= e.trim_age * factor:
            return 1
        return 0

    # -- the fold ------------------------------------------------------------------------------

    def __call__(self, history: History, ctx: StepContext) -> History:
        history = self._restore_inputs(history, ctx)
        prints = fingerprints(history)
        assistants = [i for i, m in enumerate(history) if m.role == "assistant"]
        fold = self._fold
        # resume only if everything before the last folded assistant message is unchanged
        done = assistants[fold.boundaries - 1] if 0 < fold.boundaries <= len(assistants) else 0
        if fold.boundaries > len(assistants) or prints[:done] != fold.prints[:done]:
            fold = self._fold = FoldState()
        calls = {
            p.id: p for m in history if m.role == "assistant" for p in m.parts if isinstance(p, ToolCallPart)
        }
        for n in range(fold.boundaries, len(assistants)):
            new = self._items(
                history, fold.registered, assistants[n], bisect_left(assistants, fold.registered), calls
            )
            for item, target in new:
                self._supersede(fold.reads, item, target)
                fold.items.append(item)
                if self._may_shrink(item, ctx):
                    fold.active.append(item)
            fold.registered = assistants[n]
            grown = len(fold.message_chars)
            grow_chars(fold.message_chars, history, assistants[n])
            # a result cut by a cap or the budget is sent as its entry form (with the names
            # index); what the cut left out is saved already
            cut = 0
            for item, _ in new:
                if isinstance(item.obj, ToolResultPart):
                    entry = self.size(item, 0, ctx)
                    fold.message_chars[item.message] += entry - text_chars(item.obj.text)
                    cut += text_chars(item.obj.full_text) - entry
            added = sum(fold.message_chars[grown:])
            moves = self._decide(
                fold.active,
                fold.message_chars,
                n,
                assistants[n - 1] if n else 0,
                ctx,
                self._allowance(fold),
            )
            self._account(fold, moves, added, cut, ctx)
            fold.boundaries = n + 1
        fold.prints = prints[: assistants[-1]] if assistants else []
        # the request being prepared now is decided on the side: the next history may not
        # extend this one past its last assistant message
        trailing = self._items(
            history, fold.registered, len(history), bisect_left(assistants, fold.registered), calls
        )
        reads = dict(fold.reads)
        superseded = {id(old) for item, t in trailing if (old := self._supersede(reads, item, t, mark=False))}
        active = fold.active + [item for item, _ in trailing if self._may_shrink(item, ctx)]
        chars = list(fold.message_chars)
        grow_chars(chars, history, len(history))
        tiers = dict(
            (id(item), want)
            for item, want in self._decide(
                active,
                chars,
                len(assistants),
                assistants[-1] if assistants else 0,
                ctx,
                self._allowance(fold),
                superseded,
            )
        )
        return self._render(history, fold.items + [item for item, _ in trailing], tiers, ctx)

    def _restore_inputs(self, history: History, ctx: StepContext) -> History:
        """``history`` with the inputs this step shortened in an earlier run put back whole (as
        ``restore_originals`` does for results), so the fold sees what it saw then and a
        prepared history sent back is prepared the same way."""
        out: list[Message] | None = None
        for index, m in enumerate(history):
            if m.role != "assistant":
                continue
            parts = list(m.parts)
            changed = False
            for j, part in enumerate(parts):
                if isinstance(part, ToolCallPart) and isinstance(part.raw, Mapping):
                    arguments = self._restored_input(part.arguments, ctx)
                    if arguments is not part.arguments:
                        parts[j] = replace(part, arguments=arguments, raw={**part.raw, "input": arguments})
                        changed = True
            if changed:
                out = out if out is not None else list(history)
                out[index] = replace(m, parts=tuple(parts), dirty=True)
        return history if out is None else out

    def _restored_input(self, value: Any, ctx: StepContext) -> Any:
        """``value`` with each string that is an input form of an archived original replaced by
        it; the very same object when there is none."""
        if isinstance(value, str):
            found = _OMITTED_TAIL.search(value) if value.endswith(">>") else None
            if found is None:
                return value
            original = ctx.lookup(found.group(2))
            head = value[: found.start()]
            if (
                original is None
                or not original.startswith(head)
                or len(original) - len(head) != int(found.group(1))
            ):
                return value
            return original
        if isinstance(value, Mapping):
            items = {k: self._restored_input(v, ctx) for k, v in value.items()}
            return value if all(items[k] is v for k, v in value.items()) else items
        if isinstance(value, list):
            restored = [self._restored_input(v, ctx) for v in value]
            return value if all(a is b for a, b in zip(restored, value, strict=True)) else restored
        return value

    def _render(
        self, history: History, items: list[Item], moves: dict[int, int], ctx: StepContext
    ) -> History:
        changes: dict[int, dict[int, Part]] = {}
        for item in items:
            tier = moves.get(id(item), item.tier)
            if tier == 0 and (item.kind is None or item.obj.original is None):  # type: ignore[union-attr]
                continue
            form = self.form(item, tier, ctx)
            current = history[item.message].parts[item.part]
            if isinstance(current, ToolResultPart):
                if form == current.text:
                    continue
                changes.setdefault(item.message, {})[item.part] = current.with_text(form, key=item.obj.key)  # type: ignore[union-attr]
                if tier >= 2:
                    ctx.report.summarized += 1
                elif tier == 1:
                    ctx.report.truncated += 1
            elif isinstance(current, ToolCallPart) and isinstance(current.raw, Mapping):
                raw = {**current.raw, "input": form}
                changes.setdefault(item.message, {})[item.part] = replace(current, arguments=form, raw=raw)
        out = list(history)
        for index, parts in changes.items():
            m = history[index]
            out[index] = replace(m, parts=tuple(parts.get(j, p) for j, p in enumerate(m.parts)), dirty=True)
        return out

    def _may_shrink(self, item: Item, ctx: StepContext) -> bool:
        e = self.economy
        if item.kind is None:
            return e.inputs and self.size(item, 2, ctx) < self.size(item, 0, ctx)
        return len(item.obj.full_text) > e.min_chars  # type: ignore[union-attr]

    def _items(
        self, history: History, start: int, stop: int, block: int, calls: dict[str, ToolCallPart]
    ) -> list[tuple[Item, str | None]]:
        """The items of messages ``start`` to ``stop``, each with the file it reads (if any);
        ``block`` is the number of assistant messages before ``start``."""
        e = self.economy
        out: list[tuple[Item, str | None]] = []
        block -= 1
        for index in range(start, stop):
            m = history[index]
            if m.role == "assistant":
                block += 1
                for j, part in enumerate(m.parts):
                    if (
                        isinstance(part, ToolCallPart)
                        and isinstance(part.raw, Mapping)
                        and isinstance(part.arguments, Mapping)
                    ):
                        out.append((Item(index, j, block, part), None))
                continue
            for j, part in enumerate(m.parts):
                if not isinstance(part, ToolResultPart):
                    continue
                call = calls.get(part.call_id)
                arguments = call.arguments if call is not None else None
                name = part.name or (call.name if call is not None else None)
                kind: Kind = call_kind(name, arguments) if e.smart else "other"
                tail = part.full_text[-3_000:]
                failure = e.smart and (part.is_error or (kind == "exec" and bool(_FAILURE.search(tail))))
                target = call_target(name, arguments) if kind == "read" and e.smart else None
                out.append((Item(index, j, block, part, kind, failure), target))
        return out

    @staticmethod
    def _supersede(
        reads: dict[str, Item], item: Item, target: str | None, *, mark: bool = True
    ) -> Item | None:
        """Record ``item`` as the newest read of ``target``; the read it supersedes, if any."""
        if target is None:
            return None
        older = reads.get(target)
        reads[target] = item
        if older is not None and mark:
            older.superseded = True
        return older

    def _decide(
        self,
        active: list[Item],
        chars: list[int],
        requests: int,
        cached: int,
        ctx: StepContext,
        allowance: float,
        superseded: set[int] | None = None,
    ) -> list[tuple[Item, int]]:
        """The tier moves to make at the ``requests``-th request, whose first ``cached`` messages
        the request before it sent: all that ages call for, if together they pay for the rewrite
        they cause and the rewrite costs this request no more than ``allowance`` (chars x price)
        over not making it (if only lean summaries bring it there, to those); else none.
        Messages past ``cached`` are new, written at full price with or without the moves, so
        they are no part of the rewrite's cost."""
        e = self.economy
        pending: list[tuple[Item, int]] = []
        for item in active:
            if superseded and id(item) in superseded:
                want = 2
            else:
                want = self.desired(item, requests - 1 - item.block)
            if want > item.tier:
                pending.append((item, want))
        if not pending or not e.batch:
            return pending
        # choose where the rewrite starts: the moves from the newest back to the one that
        # maximizes saving minus rewrite cost; a later start rewrites less but frees less
        pending.sort(key=lambda move: move[0].message, reverse=True)
        best, blocked = self._best(pending, chars, requests, cached, ctx, allowance)
        if best or not blocked or not e.lean:
            return pending[:best]
        # a batch would pay but the savings cannot cover its rewrite: the same moves to the
        # lean summaries, which cost nothing for a result alone in its message
        lean = [(item, LEAN if want == 2 and item.kind is not None else want) for item, want in pending]
        best, _ = self._best(lean, chars, requests, cached, ctx, allowance)
        return lean[:best]

    def _best(
        self,
        pending: list[tuple[Item, int]],
        chars: list[int],
        requests: int,
        cached: int,
        ctx: StepContext,
        allowance: float,
    ) -> tuple[int, bool]:
        """How many of ``pending`` (newest first) to move; and whether a batch that would have
        paid was left out because it cost more than ``allowance``."""
        e = self.economy
        horizon = max(e.min_horizon, int(requests * e.horizon_share)) + 1
        read, write = e.cache_read, e.cache_write
        best, best_net, freed, tail, position = 0, 0.0, 0, 0, cached
        blocked = False
        for n, (item, want) in enumerate(pending, 1):
            if item.message < position:
                tail += sum(chars[item.message : position])
                position = item.message
            freed += self.size(item, item.tier, ctx) - self.size(item, want, ctx)
            if freed / e.chars_per_token < e.clear_at_least:
                continue
            # freed tokens are read at 0.1x by every request to come instead of being kept;
            # the rest of the tail is written at 1.25x once instead of read at 0.1x
            net = (read * freed * horizon - (write - read) * (tail - freed)) / e.chars_per_token
            # what it adds to this request, with the slack of the size estimate per message
            extra = write * (tail - freed + SLACK * (cached - position)) - read * tail
            if net > best_net:
                if extra <= allowance:
                    best, best_net = n, net
                else:
                    blocked = True
        return best, blocked

    def _allowance(self, fold: FoldState) -> float:
        """What a batch may cost now beyond not making it: what the policy has saved so far,
        plus ``risk`` of what the session has cost unmanaged. So a session that ends right after
        a batch costs at most ``1 + risk`` times unmanaged (within the size estimate's slack)."""
        return fold.unmanaged - fold.spent + self.economy.risk * fold.unmanaged

    def _account(
        self, fold: FoldState, moves: list[tuple[Item, int]], added: int, cut: int, ctx: StepContext
    ) -> None:
        """Make ``moves`` and price the request just decided, as sent and as recorded (``cut``
        more chars: what caps and the budget left out of the new results)."""
        read, write = self.economy.cache_read, self.economy.cache_write
        cached = fold.sent_total
        if moves:
            cached = sum(fold.message_chars[: min(item.message for item, _ in moves)])
            for item, want in moves:
                freed = self.size(item, item.tier, ctx) - self.size(item, want, ctx)
                fold.message_chars[item.message] -= freed
                fold.sent_total -= freed
                item.tier = want
            fold.active = [i for i in fold.active if i.tier < 2]
        fold.sent_total += added
        fold.spent += read * cached + write * (fold.sent_total - cached)
        fold.unmanaged += read * fold.recorded_total + write * (added + cut)
        fold.recorded_total += added + cut


def economy_steps(config: Config, economy: Economy | None = None) -> list[Step]:
    """The economy pipeline: pairing, originals, per-tool caps, budget, cache-aware compaction."""
    # imported here: the pipeline module registers this builder, so it is loaded by now
    from ..pipeline import default_steps

    economy = economy or Economy()
    if economy.entry_chars is not None and economy.entry_chars < config.max_result_chars:
        config = config.replace(max_result_chars=economy.entry_chars)
    spec = [step for step in default_steps(config) if not isinstance(step, Microcompactor)]
    return [*spec, EconomyCompactor(economy)]
