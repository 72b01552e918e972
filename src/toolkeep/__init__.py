"""toolkeep: keep the tool results in an LLM agent's history valid, within budget and recoverable.

>>> import toolkeep
>>> with toolkeep.Session() as session:
...     messages, report = session.prepare([{"role": "user", "content": "hi"}])
>>> messages
[{'role': 'user', 'content': 'hi'}]
"""

from __future__ import annotations

from . import recall
from .config import Config, Economy, ToolCap
from .content_type import detect_content_type
from .dispatch import declared_cap, result_cap
from .exceptions import (
    ConfigError,
    DetectionError,
    FormatError,
    InvalidKeyError,
    ReaderError,
    RequestTooLargeError,
    SessionClosedError,
    StoreError,
    ToolkeepError,
    WorkspaceError,
)
from .formats import Format, Violation, detect_format, get_format, validate
from .messages import Message, OpaquePart, TextPart, ToolCallPart, ToolResultPart
from .pipeline import Prepared, build_steps, run_pipeline
from .pricing import PRESETS, Pricing
from .report import Report
from .session import Session
from .steps import (
    MISSING_RESULT_TEXT,
    Microcompactor,
    Pipeline,
    ResultBudget,
    Reuse,
    Step,
    StepContext,
    ToolCaps,
    repair_pairing,
    restore_originals,
)
from .stores import ArchiveStore, FileStore, MemoryStore, open_store
from .version import __version__
from .workspace import Workspace

__all__ = [
    "MISSING_RESULT_TEXT",
    "PRESETS",
    "ArchiveStore",
    "Config",
    "ConfigError",
    "DetectionError",
    "Economy",
    "FileStore",
    "Format",
    "FormatError",
    "InvalidKeyError",
    "MemoryStore",
    "Message",
    "Microcompactor",
    "OpaquePart",
    "Pipeline",
    "Prepared",
    "Pricing",
    "ReaderError",
    "Report",
    "RequestTooLargeError",
    "ResultBudget",
    "Reuse",
    "Session",
    "SessionClosedError",
    "Step",
    "StepContext",
    "StoreError",
    "TextPart",
    "ToolCallPart",
    "ToolCap",
    "ToolCaps",
    "ToolResultPart",
    "ToolkeepError",
    "Violation",
    "Workspace",
    "WorkspaceError",
    "__version__",
    "build_steps",
    "declared_cap",
    "detect_content_type",
    "detect_format",
    "get_format",
    "open_store",
    "recall",
    "repair_pairing",
    "restore_originals",
    "result_cap",
    "run_pipeline",
    "validate",
]
