"""The pipeline's steps: each a callable ``step(history, context) -> history`` (a :class:`Step`)
with a declaration of what the engine may reuse of its work (a :class:`Reuse`), in the named
slots of a :class:`Pipeline`."""

from __future__ import annotations

from ._context import (
    WHOLE,
    FunctionStep,
    Place,
    Plan,
    ResultSlot,
    Reuse,
    SaveContext,
    Step,
    StepContext,
    block_local,
    iter_results,
    replace_results,
    reuse_of,
)
from .budget import ResultBudget
from .caps import ToolCaps
from .memo import MISSING, Memo
from .microcompact import Microcompactor
from .originals import restore_originals
from .pairing import MISSING_RESULT_TEXT, repair_pairing, synthetic_result
from .slots import SLOTS, Bound, Pipeline, Slot

__all__ = [
    "MISSING",
    "MISSING_RESULT_TEXT",
    "SLOTS",
    "WHOLE",
    "Bound",
    "FunctionStep",
    "Memo",
    "Microcompactor",
    "Pipeline",
    "Place",
    "Plan",
    "ResultBudget",
    "ResultSlot",
    "Reuse",
    "SaveContext",
    "Slot",
    "Step",
    "StepContext",
    "ToolCaps",
    "block_local",
    "iter_results",
    "repair_pairing",
    "replace_results",
    "restore_originals",
    "reuse_of",
    "synthetic_result",
]
