"""The API reference shows the docstrings' reST roles as code: ``:class:`~toolkeep.Config``` is
written ``Config``, as the CLI's help shows it (toolkeep.cli._app.plain)."""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj|const):<code>(~?)([^<]*)</code>")


def _code(m: re.Match[str]) -> str:
    name = m[2].rsplit(".", 1)[-1] if m[1] else m[2]
    return f"<code>{name}</code>"


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    return _unlink_non_names(ROLE.sub(_code, html))


# A doctest's output such as ``['recall', 'read_result']`` reads to Markdown as a reference link,
# which the cross-reference plugin then fails to find: anything that is not a dotted name is
# put back as the text it was.
AUTOREF = re.compile(r'<autoref\b[^>]*\bidentifier="([^"]*)"[^>]*>(.*?)</autoref>', re.DOTALL)
NAME = re.compile(r"[\w.]+")


def _text(m: re.Match[str]) -> str:
    return m[0] if NAME.fullmatch(m[1]) else f"[{m[2]}]"


def _unlink_non_names(html: str) -> str:
    return AUTOREF.sub(_text, html)
