"""The ``toolkeep`` command line: a click group in ``_app`` and one module per command family.

Exit codes: 0 success; 1 a negative answer (violations found, key unknown); 2 bad usage or bad
input, always with one line on stderr and never a traceback.
"""

from __future__ import annotations

from . import core, inspect, mcp, proxy, read, recall, replay, store, wrap  # noqa: F401  (registers the commands)
from ._app import cli, main

__all__ = ["cli", "main"]
