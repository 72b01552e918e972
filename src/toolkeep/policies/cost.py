"""The economy policy's cost model: which tier moves to make, and when they pay.

With prompt caching, every request re-reads the cached prefix at a fraction of the price, and
any change to an earlier message makes the provider write everything after it again at a
premium. So tier moves are collected and made together, only when the batch frees at least
``clear_at_least`` tokens, the saving on the requests to come (estimated as many requests as
the session has made so far) pays for rewriting the prompt after the first changed message, and
what the policy has saved so far pays for what the rewrite adds to the request that makes it.

The prices are the config's price list (:mod:`toolkeep.pricing`, by default the one the format
suggests). A request sent after the cache expired (longer after the one before it than the price
list's TTL) finds nothing cached: every request writes all of it then, so a rewrite costs nothing
extra, and every tier move that is due is made there.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Economy
from ..pricing import Pricing
from ..steps import StepContext
from .accounting import SLACK, Item
from .forms import LEAN, STUB, Forms

__all__ = ["CostModel", "Decision"]


@dataclass(frozen=True, slots=True)
class Decision:
    """The tier moves of one request, and what the policy keeps of how they came about."""

    moves: list[tuple[Item, int]]
    blocked: bool = False
    """Due moves were found and none was made: the savings could not pay for their rewrite."""
    lean: bool = False
    """The moves are to lean summaries."""
    reason: str = ""
    """Why the moves were made, for people (the report's cuts carry it)."""


class CostModel:
    """Decides the tier moves of one request (see the module docstring)."""

    def __init__(self, economy: Economy, forms: Forms) -> None:
        self.economy = economy
        self.forms = forms

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

    def decide(
        self,
        active: list[Item],
        chars: list[int],
        requests: int,
        cached: int,
        ctx: StepContext,
        allowance: float,
        superseded: set[int] | None = None,
        *,
        pricing: Pricing,
        expired: bool = False,
        stalled: int = 0,
        leaned: bool = False,
    ) -> Decision:
        """The tier moves to make at the ``requests``-th request, whose first ``cached`` messages
        the request before it sent: all that ages call for, if together they pay for the rewrite
        they cause at ``pricing``'s prices and the rewrite costs this request no more than
        ``allowance`` (chars x price) over not making it; else none. Messages past ``cached``
        are new, written at full price with or without the moves, so they are no part of the
        rewrite's cost. When the cache has ``expired``, nothing is cached and the rewrite is
        free: all that ages call for.

        When the savings cannot pay for the rewrite, the moves go to lean summaries (a result's
        move then costs nothing) once ``stalled`` requests in a row before this one were blocked
        so (``Economy.lean_after``), or at once when the session has ``leaned`` before; and to
        the ``lean_tail`` fallback after ``min_horizon`` of them."""
        e = self.economy
        protect = ctx.config.recall_protect_turns
        pending: list[tuple[Item, int]] = []
        for item in active:
            age = requests - 1 - item.block
            if item.recalled and age < protect:
                continue  # a recall answer, kept whole while the model is likely to use it
            want = 2 if superseded and id(item) in superseded else self.desired(item, age)
            if want > item.tier:
                pending.append((item, want))
        if not pending or not e.batch or expired:
            why = (
                f"the cache had expired (older than the {pricing.ttl_seconds:g} s TTL): rewriting cost nothing"
                if expired
                else "due by age (batching is off)"
            )
            return Decision(pending, reason=why)
        # choose where the rewrite starts: the moves from the newest back to the one that
        # maximizes saving minus rewrite cost; a later start rewrites less but frees less
        pending.sort(key=lambda move: move[0].message, reverse=True)
        best, blocked = self._best(pending, chars, requests, cached, ctx, allowance, pricing)
        if best or not blocked:
            return Decision(pending[:best], reason=self._paid(pending[:best], ctx, requests, pricing))
        if e.lean and (leaned or stalled >= e.lean_after):
            # the same moves to the lean summaries, which cost nothing for a result alone in
            # its message
            lean = [(item, LEAN if want == 2 and item.kind is not None else want) for item, want in pending]
            best, _ = self._best(lean, chars, requests, cached, ctx, allowance, pricing)
            if best:
                why = (
                    f"lean summaries: after {stalled} request(s) where the savings could not pay for "
                    "the rewrite, the moves went to forms that cost nothing to rewrite"
                )
                return Decision(lean[:best], lean=True, reason=why)
        if not e.lean_tail or stalled < e.min_horizon:
            return Decision([], blocked=True)
        # still blocked: the messages the rewrite passes are what make it cost. When among them
        # are reads the agent has seen, held whole a turn longer than other results, the hold
        # would block every first batch of a session of reads (a Codex run of cats): once it has
        # for min_horizon requests in a row, the moves and those reads go together to the
        # richest form that makes the batch cost nothing: their summaries, else one-line stubs
        oldest = min(item.message for item, _ in pending)
        moving = {id(item) for item, _ in pending}
        held = [
            item
            for item in active
            if item.kind == "read"
            and id(item) not in moving
            and oldest < item.message < cached
            and item.tier < 2
        ]
        for tier in (2, STUB) if held else ():
            batch = [(item, tier if item.kind is not None else want) for item, want in pending]
            batch += [(item, tier) for item in held]
            batch.sort(key=lambda move: move[0].message, reverse=True)
            best, _ = self._best(batch, chars, requests, cached, ctx, allowance, pricing)
            if best == len(batch):
                why = (
                    f"blocked for {stalled} requests: the due moves went with {len(held)} held read(s) "
                    f"to {'summaries' if tier == 2 else 'one-line stubs'}, which cost nothing to rewrite"
                )
                return Decision(batch, reason=why)
        return Decision([], blocked=True)

    def _paid(self, moves: list[tuple[Item, int]], ctx: StepContext, requests: int, pricing: Pricing) -> str:
        """Why a batch that paid was made: what it freed, over how many requests to come."""
        if not moves:
            return ""
        e = self.economy
        size = self.forms.size
        freed = sum(size(item, item.tier, ctx) - size(item, want, ctx) for item, want in moves)
        horizon = max(e.min_horizon, int(requests * e.horizon_share)) + 1
        return (
            f"batch of {len(moves)} due by age at request {requests + 1}: it frees ~{freed / e.chars_per_token:,.0f} "
            f"tokens, read at {pricing.cache_read:g}x by ~{horizon} requests to come, which pays for "
            f"rewriting the prompt after message {min(item.message for item, _ in moves)} at "
            f"{pricing.cache_write:g}x ({pricing.name})"
        )

    def _best(
        self,
        pending: list[tuple[Item, int]],
        chars: list[int],
        requests: int,
        cached: int,
        ctx: StepContext,
        allowance: float,
        pricing: Pricing,
    ) -> tuple[int, bool]:
        """How many of ``pending`` (newest first) to move; and whether a batch that would have
        paid was left out because it cost more than ``allowance``."""
        e = self.economy
        size = self.forms.size
        horizon = max(e.min_horizon, int(requests * e.horizon_share)) + 1
        read, write = pricing.cache_read, pricing.cache_write
        best, best_net, freed, tail, rewritten, position = 0, 0.0, 0, 0, 0, cached
        blocked = False
        for n, (item, want) in enumerate(pending, 1):
            if item.message < position:
                span = chars[item.message : position]
                tail += sum(span)
                # messages sent as part of another (a format's placeholders) measure 0
                rewritten += len(span) - span.count(0)
                position = item.message
            freed += size(item, item.tier, ctx) - size(item, want, ctx)
            if freed / e.chars_per_token < e.clear_at_least:
                continue
            # freed tokens are read (0.1x) by every request to come instead of being kept;
            # the rest of the tail is written (1.25x) once instead of read
            net = (read * freed * horizon - (write - read) * (tail - freed)) / e.chars_per_token
            # what it adds to this request, with the slack of the size estimate per message
            extra = write * (tail - freed + SLACK * rewritten) - read * tail
            if net > best_net:
                if extra <= allowance:
                    best, best_net = n, net
                else:
                    blocked = True
        return best, blocked
