"""The published policies toolkeep is measured against, as bench-only reference implementations.

Each is stateless per request, as its original is: the masking is recomputed from the full
history before every model call, so which results are masked moves with every new result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .data import Trajectory, block_text

Policy = Callable[[int], list[Any]]
"""Gives the request sent before assistant message ``i`` (a list of Anthropic message dicts)."""


class Masker:
    """Builds requests with chosen tool results replaced by a placeholder, memoized per message
    (the same masked message is the same object in every request, as a client would resend it)."""

    def __init__(self, trajectory: Trajectory, placeholder: Callable[[str], str]) -> None:
        self.messages = trajectory.messages
        self.placeholder = placeholder
        self._memo: dict[tuple[int, frozenset[str]], dict[str, Any]] = {}
        # (message index, call id) of every result, oldest first
        self.results: list[tuple[int, str]] = [
            (i, b["tool_use_id"])
            for i, m in enumerate(self.messages)
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]

    def build(self, i: int, masked: set[tuple[int, str]]) -> list[Any]:
        """Request ``messages[:i]`` with the results in ``masked`` replaced."""
        out = list(self.messages[:i])
        by_message: dict[int, set[str]] = {}
        for index, call_id in masked:
            by_message.setdefault(index, set()).add(call_id)
        for index, ids in by_message.items():
            key = (index, frozenset(ids))
            message = self._memo.get(key)
            if message is None:
                message = dict(self.messages[index])
                message["content"] = [
                    {**b, "content": self.placeholder(block_text(b))}
                    if b.get("type") == "tool_result" and b.get("tool_use_id") in ids
                    else b
                    for b in message["content"]
                ]
                self._memo[key] = message
            out[index] = message
        return out

    def results_before(self, i: int) -> list[tuple[int, str]]:
        """The results in ``messages[:i]``, oldest first."""
        return [r for r in self.results if r[0] < i]


def _lines_omitted(text: str) -> str:
    return f"Old environment output: ({len(text.splitlines())} lines omitted)"


def keep_newest(trajectory: Trajectory, keep: int = 5) -> Policy:
    """SWE-agent's ``last_n_observations``: the ``keep`` newest results stay, older are masked."""
    masker = Masker(trajectory, _lines_omitted)

    def request(i: int) -> list[Any]:
        results = masker.results_before(i)
        return masker.build(i, set(results[:-keep] if keep else results))

    return request


def observation_window(trajectory: Trajectory, turns: int = 10) -> Policy:
    """Observation masking with a window of ``turns`` ("The Complexity Trap", M=10): results of
    the last ``turns`` assistant turns stay, older ones are masked."""
    masker = Masker(trajectory, lambda text: "[Old observation omitted]")
    assistants = [i for i, m in enumerate(trajectory.messages) if m["role"] == "assistant"]

    def request(i: int) -> list[Any]:
        # the assistant turn that starts the window: results after it stay
        before = [a for a in assistants if a < i]
        cutoff = before[-turns] if len(before) >= turns else -1
        return masker.build(i, {r for r in masker.results_before(i) if r[0] < cutoff})

    return request


def anthropic_clear_tool_uses(
    trajectory: Trajectory, trigger: int = 100_000, keep: int = 3, chars_per_token: float = 4.0
) -> Policy:
    """Anthropic's ``clear_tool_uses_20250919`` defaults: when the request is over ``trigger``
    input tokens, every result but the ``keep`` newest is cleared (no ``clear_at_least``)."""
    masker = Masker(trajectory, lambda text: "[cleared]")
    sizes = [len(json.dumps(m, separators=(",", ":"), ensure_ascii=False)) for m in trajectory.messages]
    prefix = [0]
    for size in sizes:
        prefix.append(prefix[-1] + size)

    def request(i: int) -> list[Any]:
        if prefix[i] / chars_per_token <= trigger:
            return list(trajectory.messages[:i])
        results = masker.results_before(i)
        return masker.build(i, set(results[:-keep] if keep else results))

    return request
