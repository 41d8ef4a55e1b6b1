"""The node's data files are the operator's alone: files 0600, a data dir it creates 0700.

The cache and the decision log hold tenants' prompts and answers. SQLite creates a database's
``-wal`` and ``-shm`` files with the mode of the database file, so creating that file 0600
before SQLite opens it covers all three.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700
# Files SQLite keeps beside a database, with the database's mode.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) if missing; the directory it creates is 0700.

    A directory that already exists keeps its mode: the operator chose it.
    """
    path = Path(path)
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass  # made meanwhile by another process: keep what it made
    return path


def _tighten(path: Path) -> None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return
    if mode & 0o077:
        try:
            os.chmod(path, FILE_MODE)
        except PermissionError:  # another user's file: SQLite will say whether it can use it
            pass


def private_file(path: Path, *, sqlite: bool = False) -> Path:
    """Create ``path`` empty and 0600 if missing (its directory with :func:`private_dir`); an
    existing one readable by others is made 0600. ``sqlite``: its side files too."""
    path = Path(path)
    private_dir(path.parent)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    except FileExistsError:
        _tighten(path)
    if sqlite:
        for suffix in SQLITE_SIDE_FILES:
            _tighten(path.with_name(path.name + suffix))
    return path
