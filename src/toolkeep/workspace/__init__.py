"""The session workspace: a private directory for persisted outputs and the agent's scratch files.

Layout (directories 0700, files 0600; toolkeep writes its files through descriptors of
directories it checked are not symbolic links, and refuses a link planted in their place)::

    <user cache dir>/sessions/<key>/   Workspace.for_conversation(key): a Session's default
        tool-results/   budget_<id>_<hash>.txt, one per persisted output, written once
        archive/        originals behind <<ccr:KEY>> markers (when the session archives here)
        scratch/        free for the agent

A persisted file's name depends only on the call id and the content, and a conversation's
directory only on its first message, so the same history always names the same file, in any
process, and the prompt stays byte-stable. The directory of a conversation is shared by the
sessions that serve it (each holds a shared lock on ``<key>.lock`` beside it) and removed by the
last one to close, unless one of them keeps it (``keep``, ``TOOLKEEP_KEEP_TMPDIR``); one nobody
holds and nobody used for :data:`SESSION_TTL_SECONDS` is swept (a killed process's, a kept one).

The package is split by job: :mod:`._files` (the filesystem primitives: atomic writes through
checked directory descriptors, persisted names), :mod:`._locks` (conversations' directories held,
released and swept), :mod:`._reader` (the safe reader and the paths it accepts) and
:mod:`._directory` (the :class:`Workspace` over them).
"""

from __future__ import annotations

from ._directory import Workspace
from ._files import (
    STALE_WRITE_SECONDS,
    SUBDIRS,
    TMP_PREFIX,
    atomic_write,
    opened_directory,
    own_file_exists,
    persisted_name,
    refused_link,
)
from ._locks import SESSION_TTL_SECONDS
from ._reader import (
    MAX_NAME_BYTES,
    MAX_PATH_CHARS,
    MAX_READ_BYTES,
    WorkspaceReader,
    split_lines,
    workspace_path_refusal,
)

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "MAX_READ_BYTES",
    "SESSION_TTL_SECONDS",
    "STALE_WRITE_SECONDS",
    "SUBDIRS",
    "TMP_PREFIX",
    "Workspace",
    "WorkspaceReader",
    "atomic_write",
    "opened_directory",
    "own_file_exists",
    "persisted_name",
    "refused_link",
    "split_lines",
    "workspace_path_refusal",
]
