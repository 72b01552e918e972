"""The replay's token counters: :mod:`toolkeep.tokens`, where the core keeps them (the request
budget counts with the same ones)."""

from __future__ import annotations

from ..tokens import DEFAULT_ENCODING, ENCODINGS, TOKEN_MODES, TokenCounter, get_counter

__all__ = ["DEFAULT_ENCODING", "ENCODINGS", "TOKEN_MODES", "TokenCounter", "get_counter"]
