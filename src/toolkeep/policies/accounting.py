"""The economy policy's accounts: what it has sent and saved so far, and the sizes it measures.

The policy prices every request as the provider bills it (the prefix the previous request sent
read from the cache, the rest written to it) and keeps the running totals of what it spent and
what sending the history unmanaged would have cost: what it has saved is what it may spend on a
rewrite (see :mod:`toolkeep.policies.cost`)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from ..formats import MESSAGE_CHARS_SLACK, Format
from ..messages import History, Role, ToolCallPart, ToolResultPart
from ..pricing import Pricing
from ..shortforms.commands import Kind

__all__ = ["SLACK", "FoldState", "Item", "account", "allowance", "grow_chars"]


@dataclass(slots=True)
class Item:
    """One thing the fold may shorten: a result, or the input of a call. Forms are computed once."""

    message: int
    part: int
    block: int
    obj: ToolResultPart | ToolCallPart
    kind: Kind | None = None
    """``None`` for a call's input."""
    failure: bool = False
    recalled: bool = False
    """A result of one of the config's ``recall_tools``: kept whole while younger than
    ``recall_protect_turns`` (what the model just asked for, cut again, it would ask for again)."""
    tier: int = 0
    superseded: bool = False
    forms: dict[int, Any] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    role: Role = "user"
    """The role of the message that holds it (its size as sent depends on it)."""
    made: Hashable = None
    """What the item was made of (it is taken again while that is unchanged)."""
    names: frozenset[str] | None = None
    """The names its original shows (a result's; ``previews.names_of``, once asked for)."""
    reason: str = ""
    """Why it last moved to a shorter tier (the report's cuts carry it; no part of any form)."""


@dataclass(slots=True)
class FoldState:
    """The fold's state after the last assistant message it has decided."""

    boundaries: int = 0
    """Assistant messages folded (the request before each has been decided)."""
    registered: int = 0
    """Messages whose items are in ``items``."""
    items: list[Item] = field(default_factory=list)
    active: list[Item] = field(default_factory=list)
    reads: dict[str, Item] = field(default_factory=dict)
    """The newest read of each file, by path."""
    calls: dict[str, ToolCallPart] = field(default_factory=dict)
    """The calls of the registered messages, by id."""
    message_chars: list[int] = field(default_factory=list)
    """Chars of each message as sent now (after the tier moves made so far)."""
    sent_total: int = 0
    """Chars of the last folded request as sent, and as recorded (unmanaged)."""
    recorded_total: int = 0
    spent: float = 0.0
    """Estimated cost of the requests folded so far as sent, and unmanaged (chars x price)."""
    unmanaged: float = 0.0
    stalled: int = 0
    """Requests in a row, up to the last folded, that found due moves and made none."""
    leaned: bool = False
    """Whether a folded request moved results to their lean summaries (see ``Economy.lean``)."""


SLACK = MESSAGE_CHARS_SLACK
"""Chars by which a format's ``message_chars`` may miss a message as serialized: what a rewrite
that must cost nothing keeps in reserve per message it rewrites."""


def grow_chars(chars: list[int], history: History, boundary: int, fmt: Format) -> None:
    """Extend ``chars`` with the size of each message up to ``boundary``, as ``fmt`` sends it."""
    while len(chars) < boundary:
        chars.append(fmt.message_chars(history[len(chars)]))


def allowance(fold: FoldState, risk: float) -> float:
    """What a batch may cost now beyond not making it: what the policy has saved so far, plus
    ``risk`` of what the session has cost unmanaged. So a session that ends right after a batch
    costs at most ``1 + risk`` times unmanaged (within the size estimate's slack)."""
    return fold.unmanaged - fold.spent + risk * fold.unmanaged


def account(
    fold: FoldState,
    moves: list[tuple[Item, int]],
    freed: list[int],
    added: int,
    cut: int,
    pricing: Pricing,
    expired: bool = False,
) -> None:
    """Make ``moves`` (each freeing the chars in ``freed``) and price the request just decided,
    as sent and as recorded (``cut`` more chars: what caps and the budget left out of the new
    results), at ``pricing``'s prices. A request that found the cache ``expired`` reads nothing
    from it, managed or not."""
    read, write = pricing.cache_read, pricing.cache_write
    cached = fold.sent_total
    if moves:
        cached = sum(fold.message_chars[: min(item.message for item, _ in moves)])
        for (item, want), chars in zip(moves, freed, strict=True):
            fold.message_chars[item.message] -= chars
            fold.sent_total -= chars
            item.tier = want
        fold.active = [i for i in fold.active if i.tier < 2]
    fold.sent_total += added
    if expired:
        cached = 0
    fold.spent += read * cached + write * (fold.sent_total - cached)
    recorded = 0 if expired else fold.recorded_total
    fold.unmanaged += read * recorded + write * (fold.recorded_total - recorded + added + cut)
    fold.recorded_total += added + cut
