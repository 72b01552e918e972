"""SWE-agent trajectories (``*.traj``): one JSON object with ``trajectory``, ``history``, ``info``.

``trajectory`` lists the steps: ``thought``/``response`` (what the model wrote), ``action`` (the
command it ran) and ``observation`` (the raw output). ``history`` is the message list SWE-agent
sent: a system prompt, the demonstration and task as user messages, then the model's turns (with
``tool_calls`` when the run used function calling).

Each step becomes an assistant message with the thought and one call, and the observation its
result; with function calling the recorded calls are used, otherwise the tool is named by the
command's first word (``open``, ``edit``, ``search_dir``, ``python`` ...), which is how an agent
with one tool per command would have called it.
"""

from __future__ import annotations

import re
from typing import Any

from ._base import Document, Importer, RecordedSession, TranscriptBuilder, text_of

__all__ = ["SWEAgentImporter", "command_word"]

_WORD_RE = re.compile(r"[A-Za-z0-9_-]+")
_ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def command_word(action: str) -> str:
    """The program a shell-style action runs: its first word, past ``VAR=x`` and ``sudo``."""
    line = next((ln.strip() for ln in action.splitlines() if ln.strip()), "")
    for word in line.split():
        if _ASSIGNMENT_RE.match(word) or word in ("sudo", "env", "time"):
            continue
        match = _WORD_RE.search(word.rstrip("/").rsplit("/", 1)[-1])
        if match:
            return match.group(0)
        break
    return "bash"


def _is_demo(message: dict[str, Any]) -> bool:
    return str(message.get("is_demo", "")).lower() in ("true", "1")


class SWEAgentImporter(Importer):
    """SWE-agent ``.traj`` files."""

    name = "swe-agent"
    description = "SWE-agent trajectory (*.traj: trajectory + history)"

    def detect(self, doc: Document) -> bool:
        d = doc.data
        return (
            not doc.jsonl
            and isinstance(d, dict)
            and isinstance(d.get("trajectory"), list)
            and isinstance(d.get("history"), list)
        )

    def load(self, doc: Document) -> list[RecordedSession]:
        history = [m for m in doc.data["history"] if isinstance(m, dict)]
        steps = [s for s in doc.data["trajectory"] if isinstance(s, dict)]
        b = TranscriptBuilder()
        system = None
        if history and history[0].get("role") == "system":
            system = text_of(history[0].get("content"))
        # The opening user messages (demonstration, task) precede the model's first turn.
        for m in history:
            if m.get("role") == "assistant" and not _is_demo(m):
                break
            if m.get("role") == "user":
                b.user_text(text_of(m.get("content")))
        recorded = [m.get("tool_calls") for m in history if m.get("role") == "assistant" and not _is_demo(m)]
        function_calling = len(recorded) == len(steps) and all(recorded)
        for i, step in enumerate(steps):
            thought = step.get("thought")
            b.assistant_text(str(thought if thought is not None else step.get("response") or ""), turn=i)
            action = str(step.get("action") or "")
            calls: list[tuple[Any, Any, Any]] = []
            if function_calling:
                for call in recorded[i] or []:
                    fn = call.get("function") or {}
                    calls.append((fn.get("name"), fn.get("arguments"), call.get("id")))
            else:
                calls.append((command_word(action), {"command": action}, None))
            ids = [b.tool_call(name, args, source, turn=i) for name, args, source in calls]
            observation = step.get("observation")
            # One observation answers the step; further calls of the step had no output of their own.
            for n, call_id in enumerate(ids):
                b.tool_result("" if observation is None or n else str(observation), call_id=call_id)
        return [RecordedSession(str(doc.path), self.name, b.finish(), system=system, notes=b.notes())]
