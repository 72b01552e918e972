"""Drop-in use of toolkeep from the frameworks agents are built with.

Each module imports its framework only when used, and says what to install when it is missing:

- :mod:`toolkeep.integrations.langchain`: ``ToolkeepMiddleware`` for LangChain v1's
  ``create_agent(..., middleware=[...])`` (``pip install 'toolkeep[langchain]'``)
- :mod:`toolkeep.integrations.pydantic_ai`: ``ToolkeepHistory``, a history processor for
  ``Agent(..., capabilities=[ProcessHistory(...)])`` (``pip install 'toolkeep[pydantic-ai]'``)
- :mod:`toolkeep.integrations.openai_agents`: ``ToolkeepInputFilter`` for
  ``RunConfig(call_model_input_filter=...)`` and the recall tools as function tools
  (``pip install 'toolkeep[openai-agents]'``)
- :mod:`toolkeep.integrations.raw`: ``ToolLoop`` for a hand-written tool loop over the
  ``anthropic``, ``openai``, ``google-genai`` or boto3 ``bedrock-runtime`` client (no extra
  needed beyond the SDK itself)
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..closing import Closing
from ..config import Config
from ..session import Session

__all__ = ["SessionOwner", "require"]


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module``, or raise :class:`ImportError` saying which extra to install.

    >>> require("json", "none", "this example").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{what} needs {module.split('.')[0]}: pip install 'toolkeep[{extra}]' ({exc})"
        ) from exc


class SessionOwner(Closing):
    """Holds a :class:`~toolkeep.Session`: the caller's (used as is, left open) or its own, made
    from ``config`` and closed (its workspace removed) on :meth:`close` or at the end of a
    ``with`` block. Without ``config``, its own session reads the environment unless the
    constructor was given ``trust_env=False`` (:meth:`toolkeep.Config.resolve`)."""

    session: Session

    def _hold(self, session: Session | None, config: Config | None, trust_env: bool = True) -> None:
        self._owns_session = session is None
        self.session = session if session is not None else Session(config, trust_env=trust_env)

    def close(self) -> None:
        """Close the session (and remove its workspace) if this object made it."""
        if self._owns_session:
            self.session.close()
