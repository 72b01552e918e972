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

from ..config import Economy
from ..pricing import Pricing
from ..steps import StepContext
from .accounting import SLACK, Item
from .forms import LEAN, STUB, Forms

__all__ = ["CostModel"]


class CostModel:
    """Decides the tier moves of one request (see the module docstring)."""

    def __init__(self, economy: Economy, forms: Forms) -> None:
        self.economy = economy
        self.forms = forms
        self.blocked = False
        """Whether the last :meth:`decide` found due moves it could not make."""

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
    ) -> list[tuple[Item, int]]:
        """The tier moves to make at the ``requests``-th request, whose first ``cached`` messages
        the request before it sent: all that ages call for, if together they pay for the rewrite
        they cause at ``pricing``'s prices and the rewrite costs this request no more than
        ``allowance`` (chars x price) over not making it (if only lean summaries bring it there,
        to those); else none. Messages past ``cached`` are new, written at full price with or
        without the moves, so they are no part of the rewrite's cost. When the cache has
        ``expired``, nothing is cached and the rewrite is free: all that ages call for.
        ``stalled``: how many requests in a row before this one found due moves and made none
        (``blocked`` says whether this one did too)."""
        e = self.economy
        self.blocked = False
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
            return pending
        # choose where the rewrite starts: the moves from the newest back to the one that
        # maximizes saving minus rewrite cost; a later start rewrites less but frees less
        pending.sort(key=lambda move: move[0].message, reverse=True)
        best, blocked = self._best(pending, chars, requests, cached, ctx, allowance, pricing)
        if best or not blocked or not e.lean:
            return pending[:best]
        # a batch would pay but the savings cannot cover its rewrite: the same moves to the
        # lean summaries, which cost nothing for a result alone in its message
        lean = [(item, LEAN if want == 2 and item.kind is not None else want) for item, want in pending]
        best, _ = self._best(lean, chars, requests, cached, ctx, allowance, pricing)
        self.blocked = not best
        if best or not e.lean_tail or stalled < e.min_horizon:
            return lean[:best]
        # still blocked: the messages the rewrite passes are what make it cost. When among them
        # are reads the agent has seen, held whole a turn longer than other results, the hold
        # would block every first batch of a session of reads (a Codex run of cats): once it has
        # for min_horizon requests in a row, the moves and those reads go to the one-line stub
        # together, if that costs nothing
        oldest = min(item.message for item, _ in pending)
        moving = {id(item) for item, _ in pending}
        stubs = [(item, STUB if item.kind is not None else want) for item, want in pending]
        held = [
            (item, STUB)
            for item in active
            if item.kind == "read"
            and id(item) not in moving
            and oldest < item.message < cached
            and item.tier < 2
        ]
        if not held:
            return []
        stubs += held
        stubs.sort(key=lambda move: move[0].message, reverse=True)
        best, _ = self._best(stubs, chars, requests, cached, ctx, allowance, pricing)
        if best < len(stubs):
            return []
        self.blocked = False
        return stubs

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
