"""The shortened forms of old tool results and call inputs that both the policies and the
request budget (:mod:`toolkeep.window`) write, in one place below both.

- :mod:`.commands`: what kind of call a tool call is (read, search, list, write, run) and what
  it targets;
- :mod:`.inputs`: old call inputs shortened (and cleared, the request budget's last resort),
  and :class:`~.inputs.RestoreInputs`, which puts them back when a prepared history comes in;
- :mod:`.previews`: line-level previews of old results (outlines, excerpts, names kept).

No module here imports a policy: :mod:`toolkeep.policies` builds on these, as the request
budget does.
"""

from __future__ import annotations

from .commands import Kind, call_kind, call_target
from .inputs import CLEARED_ENTRY, RestoreInputs, cleared_input, input_form, parsed_object
from .previews import lines_summary

__all__ = [
    "CLEARED_ENTRY",
    "Kind",
    "RestoreInputs",
    "call_kind",
    "call_target",
    "cleared_input",
    "input_form",
    "lines_summary",
    "parsed_object",
]
