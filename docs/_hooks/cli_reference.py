"""The CLI reference, written from the click commands when the site is built.

``{{ cli_reference }}`` on a page becomes one section per command (subcommands included), each
holding what ``toolkeep COMMAND -h`` prints: the reference cannot go out of date, and
``tests/test_docs_blocks.py`` checks that it covers every command.
"""

from __future__ import annotations

from typing import Any

PLACEHOLDER = "{{ cli_reference }}"


def commands() -> list[tuple[str, Any]]:
    """``(path, command)`` of the group and every command under it, depth first, by name."""
    from toolkeep.cli import cli

    found: list[tuple[str, Any]] = []

    def walk(path: str, command: Any) -> None:
        found.append((path, command))
        for name in sorted(getattr(command, "commands", {})):
            walk(f"{path} {name}", command.commands[name])

    walk("toolkeep", cli)
    return found


def help_text(path: str) -> str:
    """What ``path -h`` prints, at 100 columns."""
    import click

    from toolkeep.cli import cli

    words = path.split()[1:]
    command: Any = cli
    parent = click.Context(cli, info_name="toolkeep", terminal_width=100, max_content_width=100)
    ctx = parent
    for word in words:
        command = command.commands[word]
        ctx = click.Context(command, info_name=word, parent=ctx, terminal_width=100, max_content_width=100)
    return str(command.get_help(ctx))


def reference() -> str:
    """The Markdown of the whole reference."""
    parts = []
    for path, _ in commands():
        parts.append(f"## `{path}`\n\n```text\n{help_text(path).rstrip()}\n```\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if PLACEHOLDER not in markdown:
        return markdown
    return markdown.replace(PLACEHOLDER, reference())
