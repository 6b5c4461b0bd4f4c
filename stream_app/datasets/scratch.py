"""Scratch space on disk for what an export must hold until its input is read: SQLite's
private temporary database, whose page cache is the only part in memory.

An export's input can hold any number of turns, and some answers need all of them before the
first record is written (the latest revision of each key, the sessions in the order of their
first turn, the turns of one prompt anywhere in the input). Held in Python, that grows with
the input; held here, memory is the cache (``CACHE_KIB``) and SQLite's sorter, whatever the
input's size, and the file goes away when the connection closes.
"""

from __future__ import annotations

import sqlite3

CACHE_KIB = 2048  # the page cache of one scratch database (SQLite's default)


def scratch_database(schema: str) -> sqlite3.Connection:
    """A new private temporary database (an empty file name: on disk, deleted on close) with
    ``schema`` applied, in one transaction that is never committed: nothing here outlives
    the export, and a statement outside a transaction would be a transaction of its own."""
    db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
    db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    db.execute("PRAGMA temp_store = FILE")
    db.executescript(schema)
    db.execute("BEGIN")
    return db


def text_blob(text: str) -> bytes:
    """Text as a scratch database keeps it: UTF-8, a lone surrogate passed (a key or id may
    hold one, which the skips name)."""
    return text.encode("utf-8", "surrogatepass")


def blob_text(blob: bytes) -> str:
    """The text of :func:`text_blob`."""
    return blob.decode("utf-8", "surrogatepass")
