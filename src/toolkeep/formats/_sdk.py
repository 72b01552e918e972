"""SDK objects in, SDK objects out.

Agents often keep the SDK's own objects in their history: Anthropic response blocks appended as an
assistant turn (``{"role": "assistant", "content": response.content}``), an OpenAI
``ChatCompletionMessage`` appended as is, Responses output items (``input += response.output``),
google-genai ``types.Content``. The format adapters read plain dicts, so :class:`ObjectFormat`
wraps one: ``load`` turns each SDK object into the dict the SDK itself would send (same
``model_dump`` options, so the request body does not change) and remembers which object each dict
came from; ``dump`` puts every untouched object back, and rebuilds a changed message as an object
of the class it came in as. A block the pipeline changed inside a dict message comes back as a
dict, which every SDK accepts beside its objects.

Only the levels where SDKs put objects are scanned: the messages themselves and the items of their
``content``, ``tool_calls`` and ``parts`` lists. LangChain messages are not touched here: the
``langchain`` format reads them natively.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from ..messages import History, Message, Part, ToolResultPart
from ._base import Answer, Format, ToolCall, ToolSpec, Violation

__all__ = ["ObjectFormat", "has_objects", "is_sdk_object", "plain_view", "wrap"]

_LIST_FIELDS = ("content", "tool_calls", "parts")
_META_KEY = "toolkeep.sdk"


def is_sdk_object(value: Any) -> bool:
    """True for a pydantic model from an SDK (not a LangChain message, which is read natively)."""
    cls = type(value)
    if not (hasattr(cls, "model_dump") and hasattr(cls, "model_validate")):
        return False
    return not cls.__module__.startswith("langchain")


def _dump_model(obj: Any) -> dict[str, Any]:
    """The dict the object's own SDK would put in a request body."""
    if type(obj).__module__.startswith("google.genai"):
        # google-genai keeps bytes as bytes and drops unset (None) fields before sending
        data: dict[str, Any] = obj.model_dump(exclude_none=True, mode="python")
        return data
    data = obj.model_dump(
        exclude_unset=True, mode="json", by_alias=True, exclude=getattr(obj, "__api_exclude__", None)
    )
    return data


def has_objects(messages: Sequence[Any]) -> bool:
    """True when a history holds SDK objects where SDKs put them."""
    for m in messages:
        if type(m) is not dict:  # plain dicts, the usual case, are told apart without a lookup
            if is_sdk_object(m):
                return True
            if not isinstance(m, dict):
                continue
        for key in _LIST_FIELDS:
            items = m.get(key)
            if isinstance(items, list):
                for x in items:  # a loop, not any(<generator>): thousands of messages per call
                    if type(x) is not dict and is_sdk_object(x):
                        return True
    return False


class _Originals:
    """Plain dicts made from SDK objects, each with the object it came from."""

    def __init__(self) -> None:
        self.by_id: dict[int, tuple[Any, Any]] = {}
        """``id(plain) -> (plain, original)``; holding ``plain`` keeps its id from being reused."""
        self.message_class: type | None = None
        """The class every message came in as, when all did (new messages are made in it)."""

    def plain(self, obj: Any) -> Any:
        if not is_sdk_object(obj):
            return obj
        data = _dump_model(obj)
        self.by_id[id(data)] = (data, obj)
        for key in _LIST_FIELDS:  # the items too, so a rebuilt message reuses its untouched ones
            items, dumped = getattr(obj, key, None), data.get(key)
            if isinstance(items, list) and isinstance(dumped, list) and len(items) == len(dumped):
                for item, plain in zip(items, dumped, strict=True):
                    if is_sdk_object(item) and isinstance(plain, dict):
                        self.by_id[id(plain)] = (plain, item)
        return data

    def plain_message(self, m: Any) -> Any:
        m = self.plain(m)
        if not isinstance(m, dict):
            return m
        changed: dict[str, Any] = {}
        for key in _LIST_FIELDS:
            items = m.get(key)
            if isinstance(items, list) and any(is_sdk_object(x) for x in items):
                changed[key] = [self.plain(x) for x in items]
        if not changed:
            return m
        data = {**m, **changed}
        self.by_id[id(data)] = (data, m)  # the caller's dict comes back when nothing changed
        return data

    def plain_history(self, messages: Sequence[Any]) -> list[Any]:
        classes = {type(m) for m in messages}
        if len(classes) == 1 and messages and is_sdk_object(messages[0]):
            self.message_class = classes.pop()
        return [self.plain_message(m) for m in messages]

    def original(self, value: Any) -> Any:
        entry = self.by_id.get(id(value))
        return entry[1] if entry is not None and entry[0] is value else None

    def restore(self, value: Any, like: Any = None) -> Any:
        """``value`` with every plain dict we made swapped back for its object.

        ``like`` is the object the message came in as: a changed message is rebuilt in its class.
        """
        back = self.original(value)
        if back is not None:
            return back
        if not isinstance(value, dict):
            return value
        changed: dict[str, Any] = {}
        for key in _LIST_FIELDS:
            items = value.get(key)
            if isinstance(items, list):
                restored = [self.restore(x) for x in items]
                if any(a is not b for a, b in zip(restored, items, strict=True)):
                    changed[key] = restored
        out = {**value, **changed} if changed else value
        cls = type(like) if is_sdk_object(like) else None if like is not None else self.message_class
        if cls is not None:
            try:
                return cls.model_validate(out)  # type: ignore[attr-defined]
            except ValueError:  # e.g. a tool message has no model class in the OpenAI SDK
                return out
        return out


def plain_view(messages: Sequence[Any]) -> Sequence[Any]:
    """The history with SDK objects as plain dicts (itself when it holds none), for detection."""
    if not has_objects(messages):
        return messages
    return _Originals().plain_history(messages)


class ObjectFormat(Format):
    """A format that also takes SDK objects and gives them back; see the module docstring."""

    inner: ClassVar[Format]

    def detect(self, messages: Sequence[Any]) -> int:
        return self.inner.detect(plain_view(messages))

    def load(self, messages: Sequence[Any]) -> History:
        originals = _Originals()
        history = self.inner.load(originals.plain_history(messages))
        return [replace(m, meta={**m.meta, _META_KEY: originals}) for m in history]

    def dump(self, history: History) -> list[Any]:
        out = self.inner.dump(history)
        originals = next((m.meta[_META_KEY] for m in history if _META_KEY in m.meta), None)
        if not isinstance(originals, _Originals):
            return out
        calls = {
            p.id: obj for m in history for p in m.calls if (obj := originals.original(p.raw)) is not None
        }
        if len(out) != len(history):  # a format whose dump is not one-to-one (Responses runs)
            return [originals.restore(x, _call_like(x, calls)) for x in out]
        restored: list[Any] = []
        for m, x in zip(history, out, strict=True):
            like = originals.original(m.raw) if m.raw is not None else None
            restored.append(originals.restore(x, like if like is not None else _call_like(x, calls)))
        return restored

    def pack_results(self, results: list[ToolResultPart], rest: list[Message]) -> list[Message]:
        return self.inner.pack_results(results, rest)

    def stands_alone(self, part: Part) -> bool:
        return self.inner.stands_alone(part)

    def validate(self, history: History) -> list[Violation]:
        return self.inner.validate(history)

    def tool_definitions(self, specs: Sequence[ToolSpec]) -> list[Any]:
        return self.inner.tool_definitions(specs)

    def response_calls(self, response: Any) -> list[ToolCall]:
        return self.inner.response_calls(response)  # the inner format reads objects and dicts alike

    def result_messages(self, answered: Sequence[Answer]) -> list[Any]:
        return self.inner.result_messages(answered)  # dicts: every SDK takes them beside its objects

    def message_chars(self, message: Message) -> int:
        return self.inner.message_chars(message)  # loaded messages hold the objects' plain dicts


def _call_like(value: Any, calls: dict[str, Any]) -> Any:
    """The object a rebuilt call item came from (a Responses ``function_call`` whose arguments or
    id changed is a message of its own), found by its call id, so that it comes back in its class;
    ``None`` for anything else."""
    call_id = value.get("call_id") if type(value) is dict else None
    like = calls.get(call_id) if isinstance(call_id, str) else None
    return like if like is not None and getattr(like, "type", None) == value.get("type") else None


_WRAPPERS: dict[str, type[ObjectFormat]] = {}


def wrap(fmt: Format) -> Format:
    """``fmt`` able to take SDK objects (itself when it reads them natively or is wrapped)."""
    if isinstance(fmt, ObjectFormat) or fmt.native_objects:
        return fmt
    cls = _WRAPPERS.get(fmt.name)
    if cls is None or cls.inner is not fmt:
        cls = type(
            f"{type(fmt).__name__}Objects",
            (ObjectFormat,),
            {
                "inner": fmt,
                "name": fmt.name,
                # the wrapped format's rules, but loaded whole: SDK objects are read in the
                # light of the whole history (which class every message came in as)
                "rules": replace(fmt.rules, per_message=False),
                "__doc__": f"{fmt.name} histories holding SDK objects.",
            },
        )
        _WRAPPERS[fmt.name] = cls
    return cls()
