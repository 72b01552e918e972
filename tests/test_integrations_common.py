"""What every integration module shares: lazy framework imports with an install hint, and an
explicit, sorted ``__all__``."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from tests.test_exported_members import defined_members, isort_key
from toolkeep.integrations import require

INTEGRATIONS = {
    "toolkeep.integrations.langchain": ("langchain", "langchain"),
    "toolkeep.integrations.pydantic_ai": ("pydantic_ai", "pydantic-ai"),
    "toolkeep.integrations.openai_agents": ("agents", "openai-agents"),
}
FRAMEWORKS = ("langchain", "langchain_core", "langgraph", "pydantic_ai", "agents", "anthropic", "openai")


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


class TestLazyImports:
    def test_core_imports_no_framework(self) -> None:
        """``import toolkeep`` and ``toolkeep.integrations`` (and the raw loop) load no framework or SDK."""
        done = python(
            "import sys, toolkeep, toolkeep.integrations, toolkeep.integrations.raw\n"
            f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))"
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]"

    @pytest.mark.parametrize("module", sorted(INTEGRATIONS))
    def test_missing_framework_names_the_extra(self, module: str) -> None:
        """With its framework absent, an integration fails at import with ``pip install 'toolkeep[extra]'``."""
        package, extra = INTEGRATIONS[module]
        done = python(f"import sys; sys.modules[{package!r}] = None\nimport {module}")
        assert done.returncode == 1
        assert "ImportError" in done.stderr and f"pip install 'toolkeep[{extra}]'" in done.stderr

    def test_require(self) -> None:
        """``require`` gives the module, or an ImportError naming what needs it and the extra."""
        assert require("json", "none", "x").__name__ == "json"
        with pytest.raises(
            ImportError, match=r"the widget needs nowhere_pkg: pip install 'toolkeep\[widget\]'"
        ):
            require("nowhere_pkg.sub", "widget", "the widget")


@pytest.mark.parametrize(
    "name", ["toolkeep.integrations", "toolkeep.integrations.raw", *sorted(INTEGRATIONS)]
)
def test_all_sorted_and_complete(name: str) -> None:
    """``__all__`` is in ruff's order and names exactly the public members the module defines."""
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=isort_key)
    assert set(exported) == defined_members(module)
