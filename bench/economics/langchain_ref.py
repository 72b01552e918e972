"""LangChain's real ``ClearToolUsesEdit`` (``langchain.agents.middleware``), run on each request.

Needs ``pip install 'langchain>=1' 'langchain-core<=1.8.3'``; :func:`available` says whether it
imports. The middleware deep-copies the request's messages and applies the edit before every
model call, so it is as stateless as Anthropic's server-side edit; we do the same.
"""

from __future__ import annotations

from typing import Any

from .data import Trajectory, block_text
from .references import Masker, Policy


def available() -> str | None:
    """``None`` when LangChain's middleware imports, else why not."""
    try:
        import langchain.agents.middleware  # noqa: F401
    except ImportError as exc:
        return f"langchain>=1 not installed ({exc.name})"
    return None


def langchain_clear_tool_uses(trajectory: Trajectory) -> Policy:
    """Requests as ``ContextEditingMiddleware()`` with its default ``ClearToolUsesEdit()`` sends them
    (trigger 100,000 approximate tokens, keep 3, placeholder ``[cleared]``)."""
    from langchain.agents.middleware import ClearToolUsesEdit
    from langchain.agents.middleware.context_editing import DEFAULT_TOOL_PLACEHOLDER
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
    from langchain_core.messages.utils import count_tokens_approximately

    edit = ClearToolUsesEdit()
    lc: list[AnyMessage] = []
    starts: list[int] = []  # index in ``lc`` where message i starts
    origin: dict[int, tuple[int, str]] = {}  # lc index of a ToolMessage -> (message, call id)
    for i, m in enumerate(trajectory.messages):
        starts.append(len(lc))
        content = m["content"]
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        )
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        if m["role"] == "assistant":
            calls = [
                {"name": b["name"], "args": b.get("input") or {}, "id": b["id"], "type": "tool_call"}
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            lc.append(AIMessage(content=text, tool_calls=calls))
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                origin[len(lc)] = (i, b["tool_use_id"])
                lc.append(ToolMessage(content=block_text(b), tool_call_id=b["tool_use_id"]))
        if text:
            lc.append(HumanMessage(content=text))
    starts.append(len(lc))
    masker = Masker(trajectory, lambda text: DEFAULT_TOOL_PLACEHOLDER)

    def request(i: int) -> list[Any]:
        messages = list(lc[: starts[i]])
        edit.apply(messages, count_tokens=count_tokens_approximately)
        masked = {origin[n] for n, msg in enumerate(messages) if msg is not lc[n] and n in origin}
        built: list[Any] = masker.build(i, masked)
        return built

    return request
