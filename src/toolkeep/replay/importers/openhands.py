"""OpenHands trajectories: the classic event stream and the software-agent-sdk (V1) events.

Shapes read:

- a trajectory file: a JSON list of events (``--save-trajectory-path``, the runtime test fixtures);
- an evaluation output: JSON Lines, one ``{"instance_id", "instruction", "history": [events]}``
  record per task; every record is a session, named ``FILE#INSTANCE_ID``.

Classic events are actions (``{"action", "source", "args", "tool_call_metadata"}``) and
observations (``{"observation", "cause", "content", "tool_call_metadata"}``). An action with
``tool_call_metadata`` is a call: its ``function_name`` and ``tool_call_id``, the arguments and the
model's text from ``model_response``, whose ``id`` groups the calls of one response. The
``system`` action carries the system prompt. State changes and recalls are bookkeeping.

V1 events have a ``kind``: ``SystemPromptEvent``, ``MessageEvent`` (``llm_message``),
``ActionEvent`` (``tool_name``, ``tool_call_id``, ``tool_call.arguments``, ``thought``,
``llm_response_id``), ``ObservationEvent`` (``observation.output``/``content``),
``AgentErrorEvent`` and ``UserRejectObservation`` (both answer a call with an error).
"""

from __future__ import annotations

import json
from typing import Any

from ._base import Document, Importer, RecordedSession, TranscriptBuilder, text_of

__all__ = ["OpenHandsImporter"]

_BOOKKEEPING_ACTIONS = {"system", "recall", "change_agent_state", "condensation", "null"}
_BOOKKEEPING_OBSERVATIONS = {"recall", "agent_state_changed", "null", "condensation"}


def _is_event_list(value: Any) -> bool:
    if not isinstance(value, list):
        return False
    return any(
        (("action" in e or "observation" in e) and "source" in e)
        or str(e.get("kind", "")).endswith(("Event", "Observation"))
        for e in value[:50]
        if isinstance(e, dict)
    )


class OpenHandsImporter(Importer):
    """OpenHands trajectories and evaluation outputs."""

    name = "openhands"
    description = "OpenHands trajectory (event list) or evaluation output (JSONL of {instance_id, history})"

    def detect(self, doc: Document) -> bool:
        if doc.jsonl:
            return any(_is_event_list(r.get("history")) for r in doc.records[:5])
        if isinstance(doc.data, dict):
            return _is_event_list(doc.data.get("history"))
        return _is_event_list(doc.data)

    def load(self, doc: Document) -> list[RecordedSession]:
        if isinstance(doc.data, list) and not doc.jsonl:
            return [_session(str(doc.path), doc.data, None)]
        records = doc.records if doc.jsonl else [doc.data]
        sessions = []
        for n, record in enumerate(records):
            events = record.get("history")
            if not isinstance(events, list) or not _is_event_list(events):
                continue
            name = record.get("instance_id")
            source = f"{doc.path}#{name if name is not None else n}" if doc.jsonl else str(doc.path)
            instruction = record.get("instruction")
            sessions.append(_session(source, events, instruction if isinstance(instruction, str) else None))
        return sessions


def _session(source: str, events: list[Any], instruction: str | None) -> RecordedSession:
    events = [e for e in events if isinstance(e, dict)]
    b = TranscriptBuilder()
    if any("kind" in e for e in events):
        system = _load_v1(b, events, instruction)
    else:
        system = _load_classic(b, events, instruction)
    return RecordedSession(source, OpenHandsImporter.name, b.finish(), system=system, notes=b.notes())


def _load_classic(b: TranscriptBuilder, events: list[dict[str, Any]], instruction: str | None) -> str | None:
    system = None
    call_of_action: dict[Any, Any] = {}
    for e in events:
        if "action" in e:
            action, meta = e.get("action"), e.get("tool_call_metadata") or {}
            raw_args = e.get("args")
            args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
            if action == "system":
                system = str(args.get("content") or e.get("message") or "")
            elif action == "message" and not meta:
                text = str(args.get("content") or e.get("message") or "")
                if e.get("source") == "user":
                    b.user_text(text)
                else:
                    b.assistant_text(text)
            elif meta and action not in _BOOKKEEPING_ACTIONS:
                _classic_call(b, e, meta, instruction)
                call_of_action[e.get("id")] = meta.get("tool_call_id")
        elif "observation" in e and e.get("observation") not in _BOOKKEEPING_OBSERVATIONS:
            meta = e.get("tool_call_metadata") or {}
            source_id = meta.get("tool_call_id") or call_of_action.get(e.get("cause"))
            content = e.get("content")
            text = str(content if content is not None else e.get("message") or "")
            is_error = e.get("observation") == "error"
            if source_id is not None:
                b.tool_result(text, source_id, is_error=is_error)
            elif is_error:  # a controller error not tied to a call: the model read it as text
                b.user_text(text)
    return system


def _classic_call(
    b: TranscriptBuilder, e: dict[str, Any], meta: dict[str, Any], instruction: str | None
) -> None:
    if instruction and not b.messages:
        b.user_text(instruction)
    response = meta.get("model_response") or {}
    turn = response.get("id")
    choices = response.get("choices") or [{}]
    message = (choices[0] or {}).get("message") or {}
    last = b.messages[-1] if b.messages else None
    # The response's text is logged on each of its calls: write it once, before the first.
    if not (
        last and last["role"] == "assistant" and any(c.get("type") == "tool_use" for c in last["content"])
    ):
        b.assistant_text(text_of(message.get("content")), turn)
    arguments: Any = e.get("args") or {}
    for call in message.get("tool_calls") or []:
        if call.get("id") == meta.get("tool_call_id"):
            arguments = (call.get("function") or {}).get("arguments", "{}")
    b.tool_call(meta.get("function_name") or e.get("action"), arguments, meta.get("tool_call_id"), turn)


def _load_v1(b: TranscriptBuilder, events: list[dict[str, Any]], instruction: str | None) -> str | None:
    system = None
    first = next((e for e in events if e.get("kind") != "SystemPromptEvent"), None)
    if instruction and not (first and first.get("kind") == "MessageEvent" and first.get("source") == "user"):
        b.user_text(instruction)
    last_turn: Any = object()
    for e in events:
        kind = e.get("kind")
        if kind == "SystemPromptEvent":
            system = text_of(e.get("system_prompt"))
        elif kind == "MessageEvent":
            message = e.get("llm_message") or {}
            text = text_of(message.get("content"))
            if message.get("role") == "user" or e.get("source") == "user":
                b.user_text(text)
            else:
                b.assistant_text(text)
        elif kind == "ActionEvent":
            turn = e.get("llm_response_id")
            if turn != last_turn:
                b.assistant_text(text_of(e.get("thought")), turn)
                last_turn = turn
            call = e.get("tool_call") or {}
            b.tool_call(
                e.get("tool_name") or call.get("name"), call.get("arguments"), e.get("tool_call_id"), turn
            )
        elif kind == "ObservationEvent":
            observation = e.get("observation") or {}
            b.tool_result(
                _observation_text(observation), e.get("tool_call_id"), is_error=bool(observation.get("error"))
            )
        elif kind in ("AgentErrorEvent", "UserRejectObservation"):
            text = str(e.get("error") or e.get("rejection_reason") or json.dumps(e, ensure_ascii=False))
            b.tool_result(text, e.get("tool_call_id"), is_error=True)
    return system


def _observation_text(observation: dict[str, Any]) -> str:
    for key in ("output", "content", "message"):
        value = observation.get(key)
        if isinstance(value, (str, list)):
            return text_of(value)
    rest = {k: v for k, v in observation.items() if k != "kind"}
    return json.dumps(rest, ensure_ascii=False)
