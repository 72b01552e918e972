"""mini-swe-agent trajectories (``*.traj.json``): ``{"info", "messages", "trajectory_format"}``.

``messages`` is the OpenAI-style list the agent sent: ``system``, ``user``, ``assistant`` (with
``tool_calls`` in the tool-calling configuration), ``tool`` results, and a final ``exit`` entry
that is bookkeeping. In the text protocol (no ``tool_calls``) the model writes one fenced
``bash`` block per turn and the next ``user`` message carries its output: that pair is replayed as
a ``bash`` call and its result, which is how a tool-calling agent would have sent it.
"""

from __future__ import annotations

import re

from ._base import Document, Importer, RecordedSession, TranscriptBuilder, text_of

__all__ = ["MiniSWEAgentImporter"]

_BASH_BLOCK_RE = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.S)


class MiniSWEAgentImporter(Importer):
    """mini-swe-agent ``.traj.json`` files."""

    name = "mini-swe-agent"
    description = "mini-swe-agent trajectory (*.traj.json: info + messages)"

    def detect(self, doc: Document) -> bool:
        d = doc.data
        if doc.jsonl or not isinstance(d, dict) or not isinstance(d.get("messages"), list):
            return False
        fmt = str(d.get("trajectory_format", ""))
        info = d.get("info")
        return fmt.startswith("mini-swe-agent") or (isinstance(info, dict) and "mini_version" in info)

    def load(self, doc: Document) -> list[RecordedSession]:
        b = TranscriptBuilder()
        system = None
        pending_text_call: str | None = None
        for i, m in enumerate(doc.data["messages"]):
            if not isinstance(m, dict):
                continue
            role, content = m.get("role"), m.get("content")
            if role == "system":
                system = text_of(content) if system is None else system + "\n\n" + text_of(content)
            elif role == "assistant":
                text = text_of(content)
                b.assistant_text(text, turn=i)
                calls = m.get("tool_calls") or []
                for call in calls:
                    fn = call.get("function") or {}
                    b.tool_call(fn.get("name") or "bash", fn.get("arguments"), call.get("id"), turn=i)
                blocks = _BASH_BLOCK_RE.findall(text) if not calls else []
                if len(blocks) == 1:
                    pending_text_call = b.tool_call("bash", {"command": blocks[0]}, turn=i)
            elif role == "tool":
                b.tool_result(text_of(content), m.get("tool_call_id"))
            elif role == "user":
                if pending_text_call is not None:
                    b.tool_result(text_of(content), call_id=pending_text_call)
                    pending_text_call = None
                else:
                    b.user_text(text_of(content))
        return [RecordedSession(str(doc.path), self.name, b.finish(), system=system, notes=b.notes())]
