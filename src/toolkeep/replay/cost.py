"""The replay's cost model: :mod:`toolkeep.costs`, where the proxy prices its requests with the
same one (the names stay importable from here)."""

from __future__ import annotations

from ..costs import (
    CACHE_READ,
    CACHE_WRITE,
    CLOSING,
    RequestCost,
    common_prefix_length,
    opening_segment,
    request_cost,
    request_segments,
    serialize_message,
)

__all__ = [
    "CACHE_READ",
    "CACHE_WRITE",
    "CLOSING",
    "RequestCost",
    "common_prefix_length",
    "opening_segment",
    "request_cost",
    "request_segments",
    "serialize_message",
]
