"""A PNG of context size per turn, with and without toolkeep (needs matplotlib, imported lazily)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from .replay import ReplayResult

__all__ = ["MAX_PANELS", "plot_context", "require_matplotlib"]

MAX_PANELS = 36
"""Sessions drawn at most; with more, the largest (by tokens sent without toolkeep) are drawn."""


def require_matplotlib() -> None:
    """Raise :class:`ImportError` with an install hint unless matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"--plot needs matplotlib: pip install 'toolkeep[plot]' ({exc})") from None


def plot_context(results: Sequence[ReplayResult], out: str | os.PathLike[str], unit: str) -> Path:
    """Draw one panel per session (tokens of each request, per turn) and save it as PNG at ``out``.

    Raises :class:`ImportError` with an install hint when matplotlib is missing.
    """
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    largest = {id(r) for r in sorted(results, key=lambda r: r.without.tokens, reverse=True)[:MAX_PANELS]}
    shown = [r for r in results if id(r) in largest]  # in the input order
    n = max(len(shown), 1)
    cols = min(3, n)
    rows = math.ceil(n / cols)
    # A figure object of its own (no pyplot): no global state, no display needed.
    fig = Figure(figsize=(5.5 * cols, 3.2 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    for i, r in enumerate(shown):
        ax = fig.add_subplot(rows, cols, i + 1)
        turns = range(1, r.turns + 1)
        ax.plot(turns, r.without.per_turn, label="without toolkeep", color="#c0392b", linewidth=1.2)
        ax.plot(turns, r.with_.per_turn, label="with toolkeep", color="#2471a3", linewidth=1.2)
        ax.set_title(_short(r.source), fontsize=8)
        ax.set_xlabel("turn", fontsize=8)
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if i == 0:
            ax.legend(fontsize=7)
    if not shown:
        fig.add_subplot(1, 1, 1).set_title("no turns to plot")
    title = "Context size per turn"
    if len(shown) < len(results):
        title += f" (the {len(shown)} largest of {len(results)} sessions)"
    fig.suptitle(title)
    path = Path(out)
    fig.savefig(path, format="png", dpi=100)
    return path


def _short(source: str, width: int = 60) -> str:
    name = source.replace("\\", "/").rsplit("/", 1)[-1]
    return name if len(name) <= width else "..." + name[-(width - 3) :]
