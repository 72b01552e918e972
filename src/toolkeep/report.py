"""What a pipeline run did, for logs, tests and the CLI's ``--report``."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["CUT_KINDS", "REPAIR_KINDS", "Cut", "Prepared", "Repair", "Report"]

_log = logging.getLogger("toolkeep")

REPAIR_KINDS = (
    "synthetic",
    "orphans_removed",
    "duplicates_pruned",
    "relocated",
    "renamed",
    "invalid_calls_pruned",
    "empty_assistant_dropped",
    "blank_text_dropped",
)
"""Kinds of pairing repair, in the order the report lists them."""


@dataclass(frozen=True, slots=True)
class Repair:
    """One pairing repair: its kind, the call id concerned and the input message index."""

    kind: str
    id: str
    index: int
    detail: str = ""


CUT_KINDS = ("capped", "persisted", "truncated", "summarized")
"""Kinds of cut: a per-tool cap, a budget preview (persisted), head+tail, summary."""


@dataclass(frozen=True, slots=True)
class Cut:
    """One result shortened: how, its call id, the input message index, its size before and
    after (chars), the archive key of its original (``None`` when nothing was archived) and why
    the policy cut it then (a sentence for people; empty where the step does not say)."""

    kind: str
    id: str
    index: int
    chars_before: int
    chars_after: int
    key: str | None
    reason: str = ""


@dataclass(slots=True)
class Report:
    """Counts and details of one ``prepare`` run. ``chars`` count tool-result text only."""

    format: str = ""
    policy: str = ""
    """The policy that ran (``Config.policy``)."""
    pricing: str = ""
    """The name of the price list the cost model decided with (:mod:`toolkeep.pricing`)."""
    repairs: list[Repair] = field(default_factory=list)
    total: int = 0
    capped: int = 0
    persisted: int = 0
    truncated: int = 0
    summarized: int = 0
    preserved: int = 0
    chars_before: int = 0
    chars_after: int = 0
    save_errors: list[str] = field(default_factory=list)
    cuts: list[Cut] = field(default_factory=list)
    """Every cut counted in ``capped``, ``persisted``, ``truncated`` and ``summarized``."""
    tokens_before: int | None = None
    """With ``Config.max_request_tokens``: the request's tokens as the policy prepared it
    (messages as sent, tool definitions, system prompt); ``None`` without a budget."""
    tokens_after: int | None = None
    """With ``Config.max_request_tokens``: its tokens as sent, within the budget."""

    def add_cut(self, kind: str, part: Any, index: int, before: str, reason: str = "") -> None:
        """Count one cut of ``kind`` (one of :data:`CUT_KINDS`): ``part`` is the shortened
        result (a ``ToolResultPart``), ``before`` its text before the cut, ``reason`` why."""
        setattr(self, kind, getattr(self, kind) + 1)
        self.cuts.append(Cut(kind, part.call_id, index, len(before), len(part.text), part.key, reason))

    def add_repair(self, kind: str, call_id: str, index: int, detail: str = "") -> None:
        self.repairs.append(Repair(kind, call_id, index, detail))

    def repair_counts(self) -> dict[str, int]:
        counts = Counter(r.kind for r in self.repairs)
        return {kind: counts.get(kind, 0) for kind in REPAIR_KINDS}

    @property
    def changed(self) -> bool:
        """True when the pipeline changed anything."""
        return bool(self.repairs) or self.chars_before != self.chars_after

    def summary(self) -> str:
        """One line for people, naming the policy that ran and what it did (``toolkeep prepare``
        prints it on stderr)::

            policy spec, pricing anthropic-5m: 4 repairs; 3 results, 1 persisted, 1 truncated,
            0 summarized, 0 capped; tool-result chars 30,006 -> 7,877
        """
        cuts = ", ".join(
            f"{getattr(self, kind)} {kind}" for kind in ("persisted", "truncated", "summarized", "capped")
        )
        line = (
            f"policy {self.policy}, pricing {self.pricing}: {len(self.repairs)} repairs; "
            f"{self.total} results, {cuts}; tool-result chars {self.chars_before:,} -> {self.chars_after:,}"
        )
        if self.tokens_before is not None:
            line += f"; request tokens {self.tokens_before:,} -> {self.tokens_after:,}"
        return line

    def log(self, messages: int) -> None:
        """What one ``prepare`` of ``messages`` messages did, on the ``toolkeep`` logger: a DEBUG
        record per repair and per cut (``extra``: ``kind``, ``id``, ``index``, and for a cut
        ``chars_before``, ``chars_after``, ``key``), and an INFO summary when anything changed. A
        save that failed was logged as a WARNING where it failed."""
        if _log.isEnabledFor(logging.DEBUG):
            for r in self.repairs:
                _log.debug(
                    "toolkeep: repair %s of %r at message %d",
                    r.kind, r.id, r.index,
                    extra={"kind": r.kind, "id": r.id, "index": r.index},
                )  # fmt: skip
            for c in self.cuts:
                _log.debug(
                    "toolkeep: %s %r at message %d: %d -> %d chars",
                    c.kind, c.id, c.index, c.chars_before, c.chars_after,
                    extra={"kind": c.kind, "id": c.id, "index": c.index, "chars_before": c.chars_before,
                           "chars_after": c.chars_after, "key": c.key},
                )  # fmt: skip
        if self.changed and _log.isEnabledFor(logging.INFO):
            _log.info(
                "toolkeep: prepared %d %s messages: %d repairs; %d capped, %d persisted, %d truncated, "
                "%d summarized; tool results %d -> %d chars",
                messages, self.format, len(self.repairs), self.capped, self.persisted,
                self.truncated, self.summarized, self.chars_before, self.chars_after,
                extra={"repairs": len(self.repairs), "chars_before": self.chars_before,
                       "chars_after": self.chars_after},
            )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the CLI writes with ``--report``."""
        return {
            "format": self.format,
            "policy": self.policy,
            "pricing": self.pricing,
            "repairs": {
                **self.repair_counts(),
                "details": [
                    {
                        "kind": r.kind,
                        "id": r.id,
                        "index": r.index,
                        **({"detail": r.detail} if r.detail else {}),
                    }
                    for r in self.repairs
                ],
            },
            "results": {
                "total": self.total,
                "capped": self.capped,
                "persisted": self.persisted,
                "truncated": self.truncated,
                "summarized": self.summarized,
                "preserved": self.preserved,
            },
            "chars": {"before": self.chars_before, "after": self.chars_after},
            "save_errors": list(self.save_errors),
            **(
                {"tokens": {"before": self.tokens_before, "after": self.tokens_after}}
                if self.tokens_before is not None
                else {}
            ),
        }


class Prepared(NamedTuple):
    """What ``prepare`` returns: the messages to send and the report of what was done."""

    messages: list[Any]
    report: Report
