"""Configuration (SPEC 9): explicit values first, then TOOLKEEP_* (CHATCLI_* as fallbacks), then
the defaults; an invalid value is a ConfigError naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeep import Config, ConfigError, Session
from toolkeep.config import ENV_VARIABLES

NUMBERS = [
    ("max_result_chars", "TOOLKEEP_TOOL_RESULT_MAX_CHARS", "CHATCLI_TOOL_RESULT_MAX_CHARS", 20_000),
    ("turn_budget_chars", "TOOLKEEP_TOOL_RESULT_BUDGET_CHARS", "CHATCLI_TOOL_RESULT_BUDGET_CHARS", 200_000),
    ("truncate_turns", "TOOLKEEP_MICROCOMPACT_TRUNCATE_TURNS", "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS", 2),
    ("summarize_turns", "TOOLKEEP_MICROCOMPACT_SUMMARIZE_TURNS", "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS", 4),
]
ALL = [*NUMBERS, ("keep_tmpdir", "TOOLKEEP_KEEP_TMPDIR", "CHATCLI_AGENT_KEEP_TMPDIR", False)]
# settings ChatCLI never had: a TOOLKEEP_* variable and no fallback
TOOLKEEP_ONLY = [
    ("keep_orphans", "TOOLKEEP_KEEP_ORPHANS", False),
    ("pricing", "TOOLKEEP_PRICING", None),
    ("max_request_tokens", "TOOLKEEP_MAX_REQUEST_TOKENS", None),
    ("policy", "TOOLKEEP_POLICY", "economy"),
    ("compact_min_chars", "TOOLKEEP_COMPACT_MIN_CHARS", 3_000),
]


class TestDefaults:
    def test_spec_defaults(self) -> None:
        """Every number of SPEC 3, 4, 6 and 9 is the default."""
        c = Config()
        assert (c.default_tool_cap, c.cap_head_chars, c.cap_tail_chars) == (30_000, None, None)
        assert (c.max_result_chars, c.turn_budget_chars) == (20_000, 200_000)
        assert (c.preview_head_chars, c.preview_tail_chars) == (4_000, 1_000)
        assert (c.truncate_turns, c.summarize_turns, c.compact_min_chars) == (2, 4, 3_000)
        assert (c.compact_head_chars, c.compact_tail_chars) == (2_000, 500)
        assert c.keep_tmpdir is False and c.preserve_errors is True
        assert {"write", "edit", "patch", "bash", "shell", "exec", "run"} <= c.preserve_tools

    def test_variable_table(self) -> None:
        """The variables and their ChatCLI fallbacks are exactly the SPEC's table, plus the
        variables of toolkeep's own settings (no fallback)."""
        assert {name: pair for name, pair in ENV_VARIABLES.items()} == {
            **{name: (primary, fallback) for name, primary, fallback, _ in ALL},
            **{name: (primary,) for name, primary, _ in TOOLKEEP_ONLY},
        }
        assert all(getattr(Config(), name) == default for name, _, default in TOOLKEEP_ONLY)

    def test_empty_environment_gives_defaults(self) -> None:
        """With no variables set, from_env equals the plain defaults."""
        assert Config.from_env({}) == Config()


class TestEnvironment:
    @pytest.mark.parametrize(("name", "primary", "fallback", "default"), NUMBERS)
    def test_primary_then_fallback_then_default(
        self, name: str, primary: str, fallback: str, default: int
    ) -> None:
        """TOOLKEEP_* wins over CHATCLI_*, which wins over the default."""
        assert getattr(Config.from_env({}), name) == default
        assert getattr(Config.from_env({fallback: "3"}), name) == 3
        assert getattr(Config.from_env({primary: "4", fallback: "3"}), name) == 4

    def test_both_turn_variables_together(self) -> None:
        """Truncate and summarize ages set together (summarize must not be below truncate)."""
        c = Config.from_env(
            {"TOOLKEEP_MICROCOMPACT_TRUNCATE_TURNS": "5", "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS": "8"}
        )
        assert (c.truncate_turns, c.summarize_turns) == (5, 8)

    @pytest.mark.parametrize("var", ["TOOLKEEP_KEEP_TMPDIR", "CHATCLI_AGENT_KEEP_TMPDIR"])
    @pytest.mark.parametrize(
        ("text", "value"),
        [
            ("true", True),
            ("TRUE", True),
            ("1", True),
            ("yes", True),
            ("false", False),
            ("0", False),
            ("", False),
        ],
    )
    def test_keep_tmpdir_booleans(self, var: str, text: str, value: bool) -> None:
        """The keep switch reads the usual spellings of true and false."""
        assert Config.from_env({var: text}).keep_tmpdir is value

    @pytest.mark.parametrize(("text", "value"), [("true", True), ("on", True), ("0", False), ("no", False)])
    def test_keep_orphans_booleans(self, text: str, value: bool) -> None:
        """TOOLKEEP_KEEP_ORPHANS reads the same spellings; anything else names the variable."""
        assert Config.from_env({"TOOLKEEP_KEEP_ORPHANS": text}).keep_orphans is value
        assert (
            Config.from_env({"TOOLKEEP_KEEP_ORPHANS": text}, keep_orphans=not value).keep_orphans is not value
        )
        with pytest.raises(ConfigError, match="TOOLKEEP_KEEP_ORPHANS"):
            Config.from_env({"TOOLKEEP_KEEP_ORPHANS": "sometimes"})

    def test_explicit_overrides_win_over_environment(self) -> None:
        """A value given explicitly wins over the environment."""
        env = {"TOOLKEEP_TOOL_RESULT_MAX_CHARS": "5", "TOOLKEEP_TOOL_RESULT_BUDGET_CHARS": "50"}
        c = Config.from_env(env, max_result_chars=1_234)
        assert (c.max_result_chars, c.turn_budget_chars) == (1_234, 50)

    def test_session_without_config_reads_process_environment(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """``Session()`` takes its config from os.environ."""
        monkeypatch.setenv("CHATCLI_TOOL_RESULT_MAX_CHARS", "12345")
        with Session(workspace=tmp_path) as s:
            assert s.config.max_result_chars == 12_345

    def test_explicit_config_object_is_used_as_given(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """An explicit Config object is used as it is: the environment does not change it."""
        monkeypatch.setenv("TOOLKEEP_TOOL_RESULT_MAX_CHARS", "5")
        with Session(Config(turn_budget_chars=99_999), workspace=tmp_path) as s:
            assert (s.config.max_result_chars, s.config.turn_budget_chars) == (20_000, 99_999)


class TestInvalid:
    @pytest.mark.parametrize(("name", "primary", "fallback", "default"), ALL)
    @pytest.mark.parametrize("bad", ["lots", "1.5", "-3", "2e4", "nan"])
    def test_invalid_value_names_the_variable(
        self, name: str, primary: str, fallback: str, default: object, bad: str
    ) -> None:
        """A bad value is a ConfigError whose message and ``variable`` name the variable."""
        for var in (primary, fallback):
            with pytest.raises(ConfigError) as info:
                Config.from_env({var: bad})
            assert info.value.variable == var
            assert var in str(info.value)

    def test_invalid_primary_is_not_hidden_by_valid_fallback(self) -> None:
        """A bad TOOLKEEP_* value is an error even when the CHATCLI_* one is fine."""
        with pytest.raises(ConfigError, match="TOOLKEEP_TOOL_RESULT_MAX_CHARS"):
            Config.from_env({"TOOLKEEP_TOOL_RESULT_MAX_CHARS": "x", "CHATCLI_TOOL_RESULT_MAX_CHARS": "5"})

    def test_session_raises_config_error(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``Session()`` with a bad variable raises instead of silently using the default."""
        monkeypatch.setenv("TOOLKEEP_KEEP_TMPDIR", "perhaps")
        with pytest.raises(ConfigError, match="TOOLKEEP_KEEP_TMPDIR"):
            Session()

    def test_summarize_before_truncate_rejected(self) -> None:
        """Summarizing earlier than truncating makes no sense and is refused, naming the variable."""
        with pytest.raises(ConfigError):
            Config(truncate_turns=5, summarize_turns=3)
        with pytest.raises(ConfigError, match="TOOLKEEP_MICROCOMPACT_SUMMARIZE_TURNS") as info:
            Config.from_env({"TOOLKEEP_MICROCOMPACT_SUMMARIZE_TURNS": "1"})
        assert info.value.variable == "TOOLKEEP_MICROCOMPACT_SUMMARIZE_TURNS"
        with pytest.raises(ConfigError, match="CHATCLI_MICROCOMPACT_TRUNCATE_TURNS") as info:
            Config.from_env({"CHATCLI_MICROCOMPACT_TRUNCATE_TURNS": "7"})
        assert info.value.variable == "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS"

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"max_result_chars": -1},
            {"max_result_chars": "5"},
            {"turn_budget_chars": True},
            {"tool_caps": {"read": 0}},
        ],
    )
    def test_invalid_explicit_values(self, kwargs: dict[str, object]) -> None:
        """Explicit values are checked too: negatives, strings, booleans, zero caps."""
        with pytest.raises(ConfigError):
            Config(**kwargs)  # type: ignore[arg-type]

    def test_whitespace_and_underscores_accepted(self) -> None:
        """``" 20_000 "`` is a whole number: surrounding space and digit separators are fine."""
        assert Config.from_env({"TOOLKEEP_TOOL_RESULT_MAX_CHARS": " 20_000 "}).max_result_chars == 20_000


class TestPolicy:
    def test_the_default_is_economy(self) -> None:
        """``Config()`` is cache-aware; ``"default"`` names it and is read back as its name."""
        assert Config().policy == "economy"
        assert Config(policy="default") == Config()
        assert Config(policy="default").policy == "economy"
        assert Config(policy="spec").replace(policy="default").policy == "economy"
        assert Config.from_env({"TOOLKEEP_POLICY": "default"}).policy == "economy"
        assert Config.from_env({"TOOLKEEP_POLICY": " spec "}).policy == "spec"
        assert Config.from_env({"TOOLKEEP_POLICY": "seed"}, policy="default").policy == "economy"

    @pytest.mark.parametrize("name", ["economy", "spec", "seed", "default"])
    def test_the_report_names_the_policy_that_ran(self, name: str) -> None:
        with Session(Config(policy=name)) as session:
            report = session.prepare([{"role": "user", "content": "hi"}], format="anthropic").report
        assert report.policy == report.to_dict()["policy"] == ("economy" if name == "default" else name)

    @pytest.mark.parametrize("name", ["frugal", "Default", "SPEC", ""])
    def test_an_unknown_name_is_refused_listing_the_known(self, name: str) -> None:
        with pytest.raises(ConfigError, match=r"unknown policy .* \(known: economy, seed, spec\)"):
            Session(Config(policy=name))

    def test_a_policy_is_a_name(self) -> None:
        with pytest.raises(ConfigError, match="policy must be a policy name"):
            Config(policy=None)  # type: ignore[arg-type]

    def test_an_unknown_variable_is_refused(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("TOOLKEEP_POLICY", "frugal")
        with pytest.raises(ConfigError, match="unknown policy 'frugal'"):
            Session()
