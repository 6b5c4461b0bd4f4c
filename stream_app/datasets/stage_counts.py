"""What the manifest counts of the records an export stages: each shard's distinct sessions
and the prompts each split trains on, on disk, since both grow with the input."""

from __future__ import annotations

from stream_app.datasets.options import Split
from stream_app.datasets.scratch import scratch_database, text_blob
from stream_app.datasets.writers import SplitFiles

_COUNTS_SCHEMA = """
CREATE TABLE shard_session (
    split TEXT NOT NULL,
    shard INTEGER NOT NULL,  -- the shard's number in its split
    session BLOB NOT NULL,  -- UTF-8 (a lone surrogate passed)
    PRIMARY KEY (split, shard, session)
) WITHOUT ROWID;
CREATE TABLE prompt (
    hash TEXT PRIMARY KEY,
    sides INTEGER NOT NULL  -- the splits it has examples in: 1 train, 2 eval
) WITHOUT ROWID;
"""
_SIDES: dict[Split, int] = {"all": 0, "train": 1, "eval": 2}


class StageCounts:
    """What the manifest counts of the records staged, in a scratch database (``scratch.py``)
    since both grow with the input: each shard's distinct sessions and the prompts of each
    split. One transaction, never committed: nothing here outlives the stage."""

    def __init__(self) -> None:
        self.db = scratch_database(_COUNTS_SCHEMA)

    def session(self, target: SplitFiles, session_id: str) -> None:
        """``session_id`` has a record in ``target``'s shard being written: counted in its
        ``sessions`` when new there. A session's records mostly come one after another (all
        formats but dpo write a session at a time), so a repeat of the last is not looked up."""
        if session_id == target.last_session:
            return
        target.last_session = session_id
        row = (target.split, len(target.shards), text_blob(session_id))
        added = self.db.execute("INSERT OR IGNORE INTO shard_session VALUES (?, ?, ?)", row)
        target.sessions += added.rowcount

    def prompt(self, prompt: str, split: Split) -> None:
        """An example of ``split`` trains on ``prompt`` (its hash)."""
        self.db.execute(
            "INSERT INTO prompt VALUES (?, ?)"
            " ON CONFLICT (hash) DO UPDATE SET sides = sides | excluded.sides",
            (prompt, _SIDES[split]),
        )

    def shared(self) -> int:
        """Prompts with examples in both splits."""
        both = _SIDES["train"] | _SIDES["eval"]
        query = "SELECT COUNT(*) FROM prompt WHERE sides = ?"
        return int(self.db.execute(query, (both,)).fetchone()[0])

    def close(self) -> None:
        self.db.close()
