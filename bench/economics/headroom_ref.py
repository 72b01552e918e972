"""Headroom's public ``compress(messages)`` (``pip install headroom-ai``), run on each request.

Headroom compresses a request's messages in one call, stateless per request: we call it on the
history ``[:i]`` before every model call, as its one-function API is meant to be used, with its
defaults (``protect_recent=4``, ``min_tokens_to_compress=250``, no frozen prefix). Its ML text
compressor (Kompress) loads a model from a hub at run time, which this machine cannot reach:
``HF_HUB_OFFLINE=1`` is set before the import, so that step is skipped as when the model is
absent and the deterministic transforms (search, log, JSON, stale reads) run. Its retrieval
markers point into its own in-process store, which the bench does not query: recoverable =
visible, as for the other references.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from .data import Trajectory
from .references import Policy

PIN = "headroom-ai==0.42.0"


def available() -> str | None:
    """``None`` when ``headroom.compress`` imports, else why not."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from headroom import compress  # noqa: F401
    except ImportError as exc:
        return f"headroom-ai not installed ({exc.name}; `pip install '{PIN}'`)"
    return None


def headroom_compress(trajectory: Trajectory) -> Policy:
    """Requests as ``headroom.compress(messages[:i]).messages``.

    A message Headroom leaves equal to the original is sent as the original object, and equal
    rewritten messages as one object, so the cost meter serializes each distinct message once.
    ``compress`` does not change the messages it is given (checked on the 27 with a deep copy
    compared after every call), so the history is passed as is.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from headroom import compress

    logging.getLogger("headroom").setLevel(logging.ERROR)
    messages = trajectory.messages
    memo: dict[tuple[int, str], Any] = {}

    def request(i: int) -> list[Any]:
        sent = compress(list(messages[:i])).messages
        out: list[Any] = []
        for n, m in enumerate(sent):
            if n < i and m == messages[n]:
                out.append(messages[n])
                continue
            text = json.dumps(m, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
            out.append(memo.setdefault((n, text), m))
        return out

    return request
