"""``toolkeep proxy``: toolkeep in front of agents whose code cannot be changed.

An agent pointed at the proxy (``ANTHROPIC_BASE_URL``, an OpenAI base URL, Gemini's
``GOOGLE_GEMINI_BASE_URL``) sends its requests through it; the proxy prepares the history of each
(``messages`` / ``input`` / ``contents``: repaired, within budget, compacted, byte-stable across
requests) and forwards everything else exactly as it came, streaming the answer back byte for
byte. See :mod:`.app` (HTTP), :mod:`.prepare` (one body,
fail open), :mod:`.conversations` (one state per conversation), :mod:`.routes` (which provider,
which requests are prepared) and :mod:`.files` (shortened results name a way back the agent has:
its recall tool, or a file it can read).

Needs the ``proxy`` extra: ``pip install 'toolkeep[proxy]'`` (Starlette, uvicorn, httpx).
"""

from __future__ import annotations

import atexit
from pathlib import Path
from typing import IO

from ..config import Config
from ..stores import ArchiveStore, Limits, open_store, store_for_config
from ..userdirs import user_cache_dir
from .conversations import Conversations
from .disk import DEFAULT_MAX_AGE_DAYS, DEFAULT_MAX_BYTES, DiskCap, ProxyArchive, ProxyWorkspace
from .prepare import Outcome, Preparer
from .stats import stats_backend

__all__ = ["Conversations", "Outcome", "Preparer", "default_workspace", "make_preparer"]


def default_workspace() -> Path:
    """The proxy's workspace when none is given: ``proxy/`` in the per-user cache directory,
    which outlives the proxy, so a file a shortened result names can still be read after a
    restart."""
    return user_cache_dir() / "proxy"


def make_preparer(
    config: Config,
    workspace: str | Path | None = None,
    store: str | ArchiveStore | None = None,
    *,
    remote_agents: bool = False,
    log_json: IO[str] | None = None,
    max_disk_bytes: int | None = DEFAULT_MAX_BYTES,
    max_age_days: float | None = DEFAULT_MAX_AGE_DAYS,
) -> Preparer:
    """The preparer of a proxy: its workspace (kept), its store (``store`` or the config's, else
    the workspace's archive) and its table of conversations; ``remote_agents``: the agents cannot
    read the proxy's files, so shortened results name only tools (see :mod:`.files`);
    ``log_json``: where one JSON line per request goes (:mod:`.observe`); ``max_disk_bytes``
    and ``max_age_days``: the caps on its saved results and archive (:mod:`.disk`, ``None``: no
    cap), collected once here."""
    from .observe import Observer, observe  # (Starlette: the proxy extra)

    ws = ProxyWorkspace(workspace if workspace is not None else default_workspace(), keep=True)
    if isinstance(store, str):
        archive: ArchiveStore = open_store(store)
    elif store is not None:
        archive = store
    elif config.store_url:
        archive = store_for_config(config, ws.archive_dir)
    else:  # the workspace's archive/: what was saved is linked, not written again
        ttl = config.store_ttl_seconds
        limits = Limits(max_bytes=config.store_max_bytes, ttl=float(ttl) if ttl is not None else None)
        archive = ProxyArchive(ws, limits=limits)
    max_age = None if max_age_days is None else max_age_days * 86_400
    ws.disk = DiskCap(ws.path, archive, max_bytes=max_disk_bytes, max_age=max_age)
    if isinstance(archive, ProxyArchive):
        archive.disk = ws.disk
    ws.disk.collect()
    atexit.register(ws.disk.remove_pins)
    table = Conversations(config, ws, archive, remote_agents=remote_agents)
    preparer = Preparer(table)
    observe(preparer, Observer(table, stats_backend(archive, ws.path), log_json=log_json))
    return preparer
