"""The inspector: what toolkeep did to each request of a replayed session, as one HTML page.

>>> from toolkeep.inspector import SessionTrace, render   # doctest: +SKIP
>>> trace = SessionTrace(recorded)
>>> result = replay_session(recorded, counter, on_request=trace)
>>> html = render(document, [trace])   # document: what ``toolkeep replay --json`` prints

``toolkeep inspect`` runs it on the inputs ``toolkeep replay`` takes.
"""

from __future__ import annotations

from .collect import Move, ResultLife, SessionTrace
from .page import render

__all__ = ["Move", "ResultLife", "SessionTrace", "render"]
