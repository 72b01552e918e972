"""What the inspector keeps of a replay, request by request (:class:`SessionTrace`).

A :class:`SessionTrace` is the ``on_request`` callback of :func:`toolkeep.replay.replay_session`:
it keeps each request's size and cost on both sides, every repair the first time it is made, and
each result's life (how it entered, which shorter form it moved to at which request, and why, as
the report's cuts say), with the text the model saw at each form and the original beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..costs import RequestCost
from ..figures import RecordedSession, RequestTrace
from ..formats import get_format
from ..messages import History, ToolCallPart, ToolResultPart
from ..report import Cut

__all__ = ["Move", "ResultLife", "SessionTrace"]

ENTRY_KINDS = ("capped", "persisted")
"""Cuts made as a result enters the history (a per-tool cap, the result budget)."""


@dataclass(slots=True)
class Move:
    """One form a result took: at which request, how (a report cut kind), its size and why."""

    request: int
    kind: str
    chars: int
    reason: str
    form: int
    """Index of its text in :attr:`ResultLife.forms`."""


@dataclass(slots=True)
class ResultLife:
    """One tool result that was ever sent shorter than its original."""

    id: str
    tool: str
    message: int
    """Index of the message that holds it in the recorded history (the report's cut index)."""
    first_request: int
    """The first request that holds it."""
    original_chars: int
    key: str | None = None
    moves: list[Move] = field(default_factory=list)
    forms: list[str] = field(default_factory=list)
    """Each distinct text the model saw in its place, in order."""

    @property
    def entered(self) -> str:
        """``whole``, or the entry cut's kind when it entered cut."""
        first = self.moves[0] if self.moves else None
        if first is not None and first.request == self.first_request and first.kind in ENTRY_KINDS:
            return first.kind
        return "whole"


class SessionTrace:
    """The inspector's record of one session's replay (pass it as ``on_request``)."""

    def __init__(self, recorded: RecordedSession) -> None:
        self.recorded = recorded
        self.format = get_format(recorded.api_format)
        self.rows: list[tuple[Any, ...]] = []
        """Per request: number, end, then without's tokens, cached, written, uncached, cost and
        dollars, then the same for with."""
        self.repairs: list[dict[str, Any]] = []
        self.results: dict[str, ResultLife] = {}
        self._repairs_seen: set[tuple[str, str]] = set()
        self._cuts_seen: dict[str, tuple[str, int]] = {}
        self._history: History | None = None
        self._names: dict[str, str] = {}
        self._request_of_message: list[int] = []

    def __call__(self, trace: RequestTrace) -> None:
        self.rows.append((trace.number, trace.end, *_side(trace.without), *_side(trace.with_)))
        while len(self._request_of_message) < trace.end:
            self._request_of_message.append(trace.number)
        for r in trace.report.repairs:
            if (r.kind, r.id) in self._repairs_seen:
                continue
            self._repairs_seen.add((r.kind, r.id))
            self.repairs.append(
                {"request": trace.number, "kind": r.kind, "id": r.id, "message": r.index, "detail": r.detail}
            )
        new = [c for c in trace.report.cuts if self._cuts_seen.get(c.id) != (c.kind, c.chars_after)]
        if not new:
            return
        sent: dict[str, str] | None = None
        for cut in new:
            text = self._text_at(trace.prepared, cut)
            if text is None:  # not at its input index (a repair moved messages): look everywhere
                sent = sent if sent is not None else self._texts(trace.prepared)
                text = sent.get(cut.id)
            if text is not None and len(text) == cut.chars_before:
                continue  # sent whole all the same (the proxy keeps the last turn whole): not yet
            self._cuts_seen[cut.id] = (cut.kind, cut.chars_after)
            self._move(cut, trace.number, text)

    def _move(self, cut: Cut, request: int, text: str | None) -> None:
        life = self.results.get(cut.id)
        if life is None:
            original, tool = self._original(cut)
            first = (
                self._request_of_message[cut.index] if cut.index < len(self._request_of_message) else request
            )
            life = ResultLife(
                cut.id, tool, cut.index, first, len(original) if original is not None else cut.chars_before
            )
            life.forms.append(original if original is not None else "")
            self.results[cut.id] = life
        life.key = life.key or cut.key
        form = text if text is not None else ""
        if form in life.forms[1:]:
            index = life.forms.index(form, 1)
        else:
            life.forms.append(form)
            index = len(life.forms) - 1
        # the size of what was sent (a later step may send another form than the cut's own)
        chars = len(text) if text is not None else cut.chars_after
        life.moves.append(Move(request, cut.kind, chars, cut.reason, index))

    def forget_history(self) -> None:
        """Read originals from ``recorded`` again (a live conversation's history has grown)."""
        self._history = None

    def _text_at(self, prepared: list[Any], cut: Cut) -> str | None:
        """The text sent for ``cut``'s result, when the message at its input index holds it."""
        if not 0 <= cut.index < len(prepared):
            return None
        return self._texts(prepared[cut.index : cut.index + 1]).get(cut.id)

    def _texts(self, prepared: list[Any]) -> dict[str, str]:
        """The text of each tool result the prepared request sends, by call id."""
        out: dict[str, str] = {}
        for m in self.format.load(prepared):
            for p in m.parts:
                if isinstance(p, ToolResultPart):
                    out.setdefault(p.call_id, p.text)
        return out

    def _original(self, cut: Cut) -> tuple[str | None, str]:
        """The recorded text of the result ``cut`` shortened, and its tool's name: read from the
        message at its index (and its call from the one before), else from the whole history."""
        messages = self.recorded.messages
        if 0 < cut.index < len(messages):
            pair = self.format.load(messages[cut.index - 1 : cut.index + 1])
            results = (
                [p for p in pair[-1].parts if isinstance(p, ToolResultPart) and p.call_id == cut.id]
                if pair
                else []
            )
            if results:
                calls = [p for m in pair for p in m.parts if isinstance(p, ToolCallPart) and p.id == cut.id]
                return results[0].full_text, results[0].name or (calls[0].name if calls else "")
        history = self._history
        if history is None:
            history = self._history = self.format.load(self.recorded.messages)
            self._names = {p.id: p.name for m in history for p in m.parts if isinstance(p, ToolCallPart)}
        names = self._names
        found: ToolResultPart | None = None
        if 0 <= cut.index < len(history):
            at = [p for p in history[cut.index].parts if isinstance(p, ToolResultPart)]
            found = next((p for p in at if p.call_id == cut.id), at[0] if len(at) == 1 else None)
        if found is None:
            found = next(
                (
                    p
                    for m in history
                    for p in m.parts
                    if isinstance(p, ToolResultPart) and p.call_id == cut.id
                ),
                None,
            )
        if found is None:
            return None, ""
        return found.full_text, found.name or names.get(found.call_id, "")


def _side(cost: RequestCost) -> tuple[int | float, ...]:
    """A request's figures on one side, as :attr:`SessionTrace.rows` holds them."""
    return (
        cost.tokens,
        cost.cached_tokens,
        cost.written_tokens,
        cost.uncached_tokens,
        round(cost.cost, 2),
        round(sum(cost.dollars), 6),
    )
