"""The pipeline's steps: each a :class:`Step`, called ``step(history, context) -> history``."""

from __future__ import annotations

from ._context import (
    FunctionStep,
    Plan,
    ResultSlot,
    Step,
    StepContext,
    as_step,
    block_local,
    iter_results,
    replace_results,
)
from .budget import ResultBudget
from .caps import ToolCaps
from .memo import MISSING, Memo
from .microcompact import Microcompactor
from .originals import restore_originals
from .pairing import MISSING_RESULT_TEXT, repair_pairing, synthetic_result

__all__ = [
    "MISSING",
    "MISSING_RESULT_TEXT",
    "FunctionStep",
    "Memo",
    "Microcompactor",
    "Plan",
    "ResultBudget",
    "ResultSlot",
    "Step",
    "StepContext",
    "ToolCaps",
    "as_step",
    "block_local",
    "iter_results",
    "repair_pairing",
    "replace_results",
    "restore_originals",
    "synthetic_result",
]
