"""Masking of store URLs: the one way a store URL is shown (errors, logs, ``store stats``, the
model's answers). A module of its own, so that every backend can mask without importing
:mod:`.url`, which opens the backends."""

from __future__ import annotations

import re

__all__ = ["mask_url"]

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(?://)?")
_PATH_SCHEMES = ("file", "sqlite", "memory")
"""Schemes whose URLs name a place on this machine: no userinfo to hide."""
_SECRET_PARAM = re.compile(
    r"(?<=[?&;])([^=&;#]*(?:pass|pwd|secret|token|auth)[^=&;#]*=)[^&;#]*", re.IGNORECASE
)


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***``: the one way a store URL is shown.

    Everything before the URL's last ``@`` is taken as userinfo and masked but for the user name:
    redis-py reads the password up to the authority's last ``@``, and one holding ``/``, ``?`` or
    ``#`` (which end the authority) is hidden too. When in doubt more is hidden (an ``@`` in a
    later parameter hides the host as well); a URL without ``@`` keeps its host. A query parameter whose name holds ``pass``, ``pwd``,
    ``secret``, ``token`` or ``auth`` (``password``, ``ssl_password``) is masked up to the next
    ``&``, ``;`` or ``#`` (a value holding those must percent-encode them, as URLs do).

        >>> mask_url("redis://me:p@ss:w0rd@db:6379/0?password=x&prefix=a")
        'redis://me:***@db:6379/0?password=***&prefix=a'
    """
    m = _SCHEME.match(url)
    if m is None:
        return url  # a bare path
    head, rest = url[: m.end()], _SECRET_PARAM.sub(r"\1***", url[m.end() :])
    if m[1].lower() in _PATH_SCHEMES:
        return head + rest
    at = rest.rfind("@")
    if at < 0:
        return head + rest
    user, colon, _ = rest[:at].partition(":")
    return head + (f"{user}:***" if colon else "***") + rest[at:]
