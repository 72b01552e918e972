"""The front doors read the environment only through ``Config.resolve``, and ``trust_env=False``
keeps it out, as httpx's clients do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolkeep import Config, Session, run_pipeline
from toolkeep.integrations.raw import ToolLoop

LONG = "x" * 10_000
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "grep", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": LONG}]},
]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real process variables that change what a config holds."""
    monkeypatch.setenv("TOOLKEEP_TOOL_RESULT_MAX_CHARS", "5000")
    monkeypatch.setenv("TOOLKEEP_POLICY", "spec")


def _result_chars(messages: list[dict[str, Any]]) -> int:
    return len(messages[2]["content"][0]["content"])


class TestResolve:
    def test_reads_the_environment_by_default(self, env: None) -> None:
        """Without a config, ``resolve`` reads the process environment."""
        assert Config.resolve(None).max_result_chars == 5_000

    def test_trust_env_false_gives_the_defaults(self, env: None) -> None:
        """``trust_env=False`` ignores every variable: the config is the defaults."""
        assert Config.resolve(None, trust_env=False) == Config()

    def test_given_config_is_used_as_it_is(self, env: None) -> None:
        """A config given is returned unchanged, whatever ``trust_env`` says."""
        given = Config(max_result_chars=7_000)
        assert Config.resolve(given, trust_env=True) is given

    def test_refuses_what_is_not_a_config(self) -> None:
        """Anything but a ``Config`` is refused with a typed error."""
        from toolkeep.exceptions import ConfigError

        with pytest.raises(ConfigError, match=r"toolkeep\.Config"):
            Config.resolve({"max_result_chars": 5}, trust_env=True)  # type: ignore[arg-type]


class TestFrontDoors:
    def test_session(self, env: None, tmp_path: Path) -> None:
        """``Session()`` reads the variables; ``Session(trust_env=False)`` does not."""
        with (
            Session(workspace=tmp_path / "a") as trusting,
            Session(workspace=tmp_path / "b", trust_env=False) as not_,
        ):
            assert (trusting.config.max_result_chars, trusting.config.policy) == (5_000, "spec")
            assert not_.config == Config()

    def test_run_pipeline(self, env: None) -> None:
        """``run_pipeline`` cuts at the environment's limit only while it trusts it."""
        trusting = run_pipeline(HISTORY)
        ignoring = run_pipeline(HISTORY, trust_env=False)
        assert trusting.report.policy == "spec"
        assert ignoring.report.policy == "economy"
        assert [c.reason for c in trusting.report.cuts] == ["result budget: over 5,000 chars for one result"]
        assert ignoring.report.cuts == []
        assert _result_chars(trusting.messages) < 10_000 == _result_chars(ignoring.messages)

    def test_tool_loop(self, env: None) -> None:
        """``ToolLoop`` passes ``trust_env`` to the session it makes, declared caps or not."""
        from toolkeep import result_cap

        @result_cap(1_000)
        def grep() -> str:
            return "found"

        for tools in ({"read": lambda: "x"}, {"grep": grep}):
            with (
                ToolLoop(tools, format="anthropic") as trusting,
                ToolLoop(tools, format="anthropic", trust_env=False) as not_,
            ):
                assert trusting.session.config.max_result_chars == 5_000
                assert not_.session.config.max_result_chars == Config().max_result_chars
                assert not_.session.config.policy == "economy"

    def test_integrations(self, env: None) -> None:
        """Each framework integration passes ``trust_env`` to the session it makes."""
        from toolkeep.integrations.langchain import ToolkeepMiddleware
        from toolkeep.integrations.openai_agents import ToolkeepInputFilter
        from toolkeep.integrations.pydantic_ai import ToolkeepHistory

        for kind in (ToolkeepMiddleware, ToolkeepInputFilter, ToolkeepHistory):
            with kind() as trusting, kind(trust_env=False) as not_:
                assert trusting.session.config.policy == "spec", kind
                assert not_.session.config == Config(), kind
