"""An archive store of one file per original in a directory (by default, the session workspace)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..workspace import atomic_write
from ._base import StoreBase, StoreStats, validate_key

__all__ = ["FileStore"]


class FileStore(StoreBase):
    """Stores each original as ``<directory>/<key>.txt`` (0600), written atomically."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._hits = self._misses = 0

    def _path(self, key: str) -> Path:
        return self.directory / f"{validate_key(key)}.txt"

    def put(self, key: str, text: str) -> None:
        path = self._path(key)
        if not path.exists():
            atomic_write(path, text.encode("utf-8", "surrogatepass"))

    def get(self, key: str) -> str | None:
        path = self._path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            with self._lock:
                self._misses += 1
            return None
        with self._lock:
            self._hits += 1
        return data.decode("utf-8", "surrogatepass")

    def delete(self, key: str) -> bool:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            return False
        return True

    def stats(self) -> StoreStats:
        files = [p for p in self.directory.glob("*.txt") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        with self._lock:
            return StoreStats("file", len(files), size, self._hits, self._misses)

    def __repr__(self) -> str:
        return f"FileStore({str(self.directory)!r})"
