"""A table partition's RocksDB that cannot be opened because its files are damaged.

Faust opens each partition's database when the partition is assigned; if that raises, the
worker crashes, restarts, opens it again and crashes again, until a person deletes the
directory. The database is a cache of its changelog: Faust reads the changelog from the
offset stored in the database itself (``persisted_offset``), and from its start when the
database is empty. So a damaged database is renamed aside (kept for a post-mortem, never
read again) and an empty one opened in its place, which Faust fills by reading the whole
changelog partition: the cost of a lost volume, for one partition.

Only damage moves a database aside. A lock still held (another worker's, or this one's
own during a rebalance), a full disk, a read-only or missing volume: the files are sound,
the fault passes or needs a person, and moving them aside would throw state away for it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from stream_app.observability import logs

# RocksDB reports a database whose files do not read back as "Corruption: ..." (a CURRENT,
# MANIFEST or table file that fails its checks), and one whose records name a file that
# is not there (a CURRENT naming a MANIFEST that was lost) as an IO error naming a file in
# the database's own directory.
_CORRUPTION = "Corruption:"
_MISSING_FILE = "IO error: No such file or directory"


def damaged(path: Path, error: BaseException) -> bool:
    """Whether ``error``, raised opening the database at ``path``, says its files are
    damaged (not merely unavailable)."""
    text = str(error)
    if not path.is_dir():
        return False
    if text.startswith(_CORRUPTION):
        return True
    return text.startswith(_MISSING_FILE) and f"{path}/" in text


def move_aside(path: Path, error: BaseException) -> Path:
    """Renames the damaged database at ``path`` to a name no table opens (the time of the
    move appended), logs it as one ``store_moved_aside`` event, and returns the new name."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while aside.exists():  # moved aside again within the second
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    path.rename(aside)
    logs.event(
        "store_moved_aside",
        logging.WARNING,
        path=str(path),
        moved_to=str(aside),
        error=str(error),
        action="the partition is rebuilt from its changelog",
    )
    return aside
