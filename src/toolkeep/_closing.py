""":mod:`toolkeep.closing` under its former, private name, for the modules that still import it
from here (``session``, ``workspace``, ``stores``): they switch with the session split, and this
module goes then."""

from __future__ import annotations

from .closing import Closing

__all__ = ["Closing"]
