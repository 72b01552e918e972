"""``toolkeep.wrap``: what each agent's run is given, read off the plans themselves (the real
agents run in tests/test_wrap_agents.py)."""

from __future__ import annotations

import itertools
import json
import os
import tomllib
from pathlib import Path

import pytest

from toolkeep.wrap import AGENTS, WrapError, plan

PROXY = "http://127.0.0.1:4321"


def _overrides(args: list[str]) -> dict[str, object]:
    """The ``-c KEY=VALUE`` overrides of a Codex command line, values parsed as Codex does (TOML)."""
    out: dict[str, object] = {}
    for flag, value in itertools.pairwise(args):
        if flag == "-c":
            key, _, literal = value.partition("=")
            out[key] = tomllib.loads(f"v = {literal}")["v"]
    return out


class TestClaude:
    def test_base_url_mcp_config_and_only_toolkeeps_tools_allowed(self, tmp_path: Path) -> None:
        """The user's arguments come last and whole; ours use the one-word form, so that Claude
        Code's many-valued options do not swallow a prompt after them."""
        launch = plan(AGENTS["claude"], PROXY + "/", None, ["fix it", "-p"], {}, tmp_path)
        assert launch.env == {"ANTHROPIC_BASE_URL": PROXY}
        assert launch.args[-2:] == ["fix it", "-p"]
        assert "--allowedTools=mcp__toolkeep__recall,mcp__toolkeep__read_result" in launch.args
        config = next(a for a in launch.args if a.startswith("--mcp-config="))
        servers = json.loads(Path(config.split("=", 1)[1]).read_text())["mcpServers"]
        assert servers == {"toolkeep": {"type": "http", "url": PROXY + "/toolkeep/mcp", "alwaysLoad": True}}

    def test_a_token_joins_the_users_own_headers(self, tmp_path: Path) -> None:
        env = {"ANTHROPIC_CUSTOM_HEADERS": "X-Team: blue"}
        launch = plan(AGENTS["claude"], PROXY, "s3cret", [], env, tmp_path)
        assert launch.env["ANTHROPIC_CUSTOM_HEADERS"] == "X-Team: blue\nX-Toolkeep-Token: s3cret"
        config = next(a for a in launch.args if a.startswith("--mcp-config="))
        server = json.loads(Path(config.split("=", 1)[1]).read_text())["mcpServers"]["toolkeep"]
        assert server["headers"] == {"X-Toolkeep-Token": "s3cret"}

    def test_the_users_base_url_is_the_upstream(self) -> None:
        upstream = AGENTS["claude"].upstream
        assert upstream([], {"ANTHROPIC_BASE_URL": "https://gw.example/"}) == "https://gw.example"
        assert upstream([], {}) is None


class TestCodex:
    def home(self, tmp_path: Path, text: str) -> dict[str, str]:
        (tmp_path / "config.toml").write_text(text)
        return {"CODEX_HOME": str(tmp_path)}

    def test_the_users_provider_is_pointed_at_the_proxy_for_this_run(self, tmp_path: Path) -> None:
        env = self.home(
            tmp_path,
            'model_provider = "gw"\n[model_providers.gw]\nname = "gw"\nbase_url = "https://gw.example/v1"\n',
        )
        before = (tmp_path / "config.toml").read_bytes()
        launch = plan(AGENTS["codex"], PROXY, "t", ["exec", "hi"], env, tmp_path)
        assert launch.args[-2:] == ["exec", "hi"]
        assert _overrides(launch.args) == {
            "mcp_servers.toolkeep.url": PROXY + "/toolkeep/mcp",
            "mcp_servers.toolkeep.required": True,
            "mcp_servers.toolkeep.default_tools_approval_mode": "approve",
            "mcp_servers.toolkeep.http_headers": {"X-Toolkeep-Token": "t"},
            "model_providers.gw.base_url": PROXY + "/v1",
            "model_providers.gw.http_headers.X-Toolkeep-Token": "t",
        }
        assert AGENTS["codex"].upstream(["exec"], env) == "https://gw.example"
        assert (tmp_path / "config.toml").read_bytes() == before

    def test_a_profile_or_override_chooses_the_provider(self, tmp_path: Path) -> None:
        env = self.home(
            tmp_path,
            'model_provider = "a"\n[profiles.work]\nmodel_provider = "b"\n'
            '[model_providers.a]\nbase_url = "https://a.example/v1"\n'
            '[model_providers.b]\nbase_url = "https://b.example/v1"\n',
        )
        upstream = AGENTS["codex"].upstream
        assert upstream([], env) == "https://a.example"
        assert upstream(["--profile", "work"], env) == "https://b.example"
        assert upstream(["-c", 'model_provider="b"'], env) == "https://b.example"

    def test_the_builtin_openai_provider(self, tmp_path: Path) -> None:
        env = {"CODEX_HOME": str(tmp_path)}
        assert _overrides(plan(AGENTS["codex"], PROXY, None, [], env, tmp_path).args)["openai_base_url"] == (
            PROXY + "/v1"
        )
        with_token = _overrides(plan(AGENTS["codex"], PROXY, "t", [], env, tmp_path).args)
        assert with_token["model_provider"] == "toolkeep"
        assert with_token["model_providers.toolkeep"] == {
            "name": "OpenAI",
            "base_url": PROXY + "/v1",
            "wire_api": "responses",
            "requires_openai_auth": True,
            "http_headers": {"X-Toolkeep-Token": "t"},
        }

    @pytest.mark.parametrize(
        "config",
        [
            'model_provider = "ollama"\n',  # built in, not OpenAI's
            'model_provider = "x"\n[model_providers.x]\nbase_url = "https://x.example/api"\n',
            "model_provider = \n",  # not TOML
        ],
    )
    def test_what_cannot_be_proxied_is_a_clear_error(self, tmp_path: Path, config: str) -> None:
        env = self.home(tmp_path, config)
        with pytest.raises(WrapError):
            plan(AGENTS["codex"], PROXY, None, [], env, tmp_path)


class TestGemini:
    def test_the_users_settings_plus_our_server_in_a_home_of_the_runs_own(self, tmp_path: Path) -> None:
        home = tmp_path / "home"
        (home / ".gemini" / "extensions").mkdir(parents=True)
        user = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "mcpServers": {"mine": {"command": "my-server"}},
        }
        (home / ".gemini" / "settings.json").write_text(json.dumps(user))
        (home / ".gemini" / "oauth_creds.json").write_text("{}")
        before = (home / ".gemini" / "settings.json").read_bytes()
        run = tmp_path / "run"
        run.mkdir()
        env = {"HOME": str(home), "GEMINI_CLI_CUSTOM_HEADERS": "X-Team: blue"}
        launch = plan(AGENTS["gemini"], PROXY, "t", ["-p", "hi"], env, run)
        assert launch.args == ["-p", "hi"]
        assert launch.env["GOOGLE_GEMINI_BASE_URL"] == PROXY
        assert launch.env["GEMINI_CLI_CUSTOM_HEADERS"] == "X-Team: blue, X-Toolkeep-Token: t"
        shadow = Path(launch.env["GEMINI_CLI_HOME"]) / ".gemini"
        assert shadow.is_relative_to(run)
        settings = json.loads((shadow / "settings.json").read_text())
        assert settings["security"] == user["security"]
        assert settings["mcpServers"] == {
            "mine": {"command": "my-server"},
            "toolkeep": {
                "httpUrl": PROXY + "/toolkeep/mcp",
                "trust": True,
                "headers": {"X-Toolkeep-Token": "t"},
            },
        }
        assert sorted(p.name for p in shadow.iterdir()) == ["extensions", "oauth_creds.json", "settings.json"]
        assert os.readlink(shadow / "oauth_creds.json") == str(home / ".gemini" / "oauth_creds.json")
        assert (home / ".gemini" / "settings.json").read_bytes() == before

    @pytest.mark.parametrize(
        "text", ['{"security": {"auth": {"selectedType": "oauth-personal"}}}', "// a comment\n{}", "[]"]
    )
    def test_settings_wrap_cannot_use_are_a_clear_error(self, tmp_path: Path, text: str) -> None:
        (tmp_path / ".gemini").mkdir()
        (tmp_path / ".gemini" / "settings.json").write_text(text)
        with pytest.raises(WrapError):
            plan(AGENTS["gemini"], PROXY, None, [], {"HOME": str(tmp_path)}, tmp_path)


def test_codexs_namespaced_recall_tool_is_the_one_a_shortened_text_names() -> None:
    """Codex declares each MCP server's tools in a Responses ``namespace`` (``mcp__toolkeep``,
    as its requests through wrap show): toolkeep's recall there is ``mcp__toolkeep__recall``."""
    from toolkeep.formats import get_format
    from toolkeep.recall import recall_tool_name, tool_specs

    inner = [
        {
            "type": "function",
            "name": s.name,
            "description": s.description,
            "strict": False,
            "parameters": s.schema,
        }
        for s in tool_specs()
    ]
    request = {
        "tools": [
            {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
            {"type": "namespace", "name": "mcp__toolkeep", "description": "Tools in it.", "tools": inner},
            {"type": "namespace", "name": "broken", "tools": "not a list"},
        ]
    }
    tools = get_format("openai-responses").request_tools(request)
    assert [t.name for t in tools] == ["exec_command", "mcp__toolkeep__recall", "mcp__toolkeep__read_result"]
    assert recall_tool_name(tools) == "mcp__toolkeep__recall"
