"""The real trajectories: where they are, how to read them, which requests they make.

Read from ``../shared/bench-data/anthropic/`` at run time, never copied into the repository.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("TOOLKEEP_SHARED", REPO.parent / "shared"))
DATA_DIR = SHARED / "bench-data" / "anthropic"


@dataclass
class Trajectory:
    """One recorded session in Anthropic Messages shape."""

    name: str
    messages: list[dict[str, Any]]
    requests: list[int] = field(default_factory=list)
    """Index of every assistant message: request ``i`` is ``messages[:i]``."""

    @property
    def system(self) -> str:
        """The agent system that recorded it (file names start with it)."""
        return self.name.split("__", 1)[0]


def load_trajectories(data_dir: Path = DATA_DIR) -> list[Trajectory]:
    """Every trajectory in ``data_dir``, sorted by file name."""
    out = []
    for path in sorted(data_dir.glob("*.json")):
        messages = json.loads(path.read_text(encoding="utf-8"))
        requests = [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]
        out.append(Trajectory(path.stem, messages, requests))
    return out


def block_text(block: dict[str, Any]) -> str:
    """The text of a ``tool_result`` block (string content or its text blocks joined)."""
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
