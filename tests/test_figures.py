"""The proxy's figures come from :mod:`toolkeep.figures`, which ``replay`` uses too: the proxy
never imports :mod:`toolkeep.replay`."""

from __future__ import annotations

import subprocess
import sys

from toolkeep import figures
from toolkeep.costs import request_cost
from toolkeep.replay import replay
from toolkeep.tokens import get_counter


def test_the_proxy_imports_no_replay_module() -> None:
    """Importing the proxy's application loads no module of ``toolkeep.replay``."""
    code = (
        "import sys, toolkeep.proxy, toolkeep.proxy.app; "
        "print(sorted(m for m in sys.modules if m.startswith('toolkeep.replay')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_replay_hands_on_the_same_figures() -> None:
    """``toolkeep.replay.replay`` measures with the very classes the proxy sums with."""
    assert (replay.Side, replay.ReplayResult, replay.combine) == (
        figures.Side,
        figures.ReplayResult,
        figures.combine,
    )


def test_side_sums_request_costs() -> None:
    """A side adds up its requests' costs and keeps the peak."""
    counter = get_counter("chars")
    side = figures.Side()
    first = request_cost(None, ["abcdefgh"], counter)
    second = request_cost(["abcdefgh"], ["abcdefgh", "ijkl"], counter)
    side.add(first)
    side.add(second)
    assert (side.tokens, side.peak_tokens, side.per_turn) == (5, 3, [2, 3])
    assert round(side.cost, 2) == round(first.cost + second.cost, 2)
