"""Reading turn lines: the latest revision of every turn key of a TURNS or FINAL file (or the
topic), and the sessions they form."""

from __future__ import annotations

import io
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, NamedTuple, cast

import orjson
from pydantic import ValidationError

from stream_app.core.records import turn_key as worker_key
from stream_app.core.revisions import Kept, RevisionHeaders, replaces, turn_identity
from stream_app.datasets.options import MAX_EXAMPLE_BYTES
from stream_app.datasets.scratch import blob_text, scratch_database, text_blob
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.models.json_types import Json
from stream_app.models.turn import Turn, TurnDict

# A Turn the worker writes nests less than 64 levels of input (core/limits.py) and ten of its
# own; one deeper than this is not one of them, and orjson writes no more than 255 levels.
MAX_TURN_DEPTH = 128


_KEY_AT_START = re.compile(rb'^\s*\{\s*"key"\s*:\s*("(?:[^"\\]|\\.)*")')
HEAD_BYTES = 65536  # of a line over the limit, what is kept to find its key
CHUNK_BYTES = 1 << 20  # of a line over the limit, what is read at a time to pass it by
Where = tuple[int, int]  # a line's position in the source and its length, in bytes


_SCHEMA = """
CREATE TABLE turn (
    key BLOB PRIMARY KEY,    -- as the worker spells it (UTF-8, a lone surrogate passed)
    session BLOB,            -- the session the key names; NULL: it names none
    rank INTEGER NOT NULL,   -- its place: its partition, then the order of its first line
    at INTEGER,              -- where its latest line is in the source, and its length;
    length INTEGER,
    skip TEXT,               -- or why that line can be no turn (at and length NULL)
    partition INTEGER,       -- a topic's: the record kept (NULL from a file) ...
    offset INTEGER,
    revision INTEGER,        -- ... and its revision headers (NULL: it has none)
    final_after REAL,
    deleted INTEGER NOT NULL -- 1: the record kept is a tombstone, the key is not written
) WITHOUT ROWID;
"""
_PUT = """
INSERT INTO turn VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, NULL, NULL, 0)
ON CONFLICT (key) DO UPDATE SET at = excluded.at, length = excluded.length, skip = excluded.skip
"""
_REVISE = "INSERT OR REPLACE INTO turn VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_Row = tuple[bytes, bytes | None, int, int | None, int | None, str | None]  # _PUT's
PUT_BATCH = 1000  # lines put in the index at a time
_FIRST = (1 << 40) - 1  # of a rank, the order of the key's first record (the rest: its partition)


@dataclass(slots=True)
class TurnLines:
    """The latest revision of every key of a TURNS or FINAL file (or of the topic read), in
    first-emission order: an index, not the lines, and on disk (``scratch.py``).

    Each key maps to where the line of its latest revision is in ``source`` (the file, or
    the spool of the topic's records), read again when its session is built, or to the
    reason it cannot be one. Python holds no key: memory is SQLite's page cache and a line
    being read (a line over ``max_bytes`` is not read whole: its first bytes name its key),
    whatever the number of keys. A key keeps the place of its first line, so the order is
    the order the turns were first emitted. A turn is its parsed key, never the key's text:
    keys are held as the worker spells them (``known_as``).
    """

    source: IO[bytes] | None = None  # what the positions point into; open while it is written
    records: int = 0  # lines (records) read, blank ones left out
    unkeyed: int = 0  # lines with no string key: not turns, of no knowable session
    max_bytes: int = MAX_EXAMPLE_BYTES
    first_bad: int | None = None  # the number (from 1) of the first line with no turn key
    lines: int = 0  # lines seen, blank ones included (for first_bad)
    _db: sqlite3.Connection = field(
        default_factory=lambda: scratch_database(_SCHEMA), init=False, repr=False
    )
    _pending: list[_Row] = field(default_factory=list, init=False, repr=False)  # lines to put

    @property
    def db(self) -> sqlite3.Connection:
        """The index's database, with every line added so far in it."""
        self._put()
        return self._db

    def _put(self) -> None:
        """The lines added, put in the index: by the thousand, as a statement a line costs
        twice as much."""
        if self._pending:
            self._db.executemany(_PUT, self._pending)
            self._pending.clear()

    def add(self, line: bytes, at: int = 0, length: int | None = None) -> None:
        """The line at ``at`` of the source: ``line`` is all of it, or, when ``length`` says
        it is over ``max_bytes``, its first bytes only."""
        self.lines += 1
        size = len(line) if length is None else length
        if size <= self.max_bytes and not line.strip():
            return
        self.records += 1
        if size > self.max_bytes:
            found = _KEY_AT_START.match(line[:HEAD_BYTES])
            key = orjson.loads(found.group(1)) if found else None
            self._keep(key, SkipReason.TOO_LARGE)
            return
        problem: SkipReason | None = None
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            doc, problem = _lenient(line)
        key = doc.get("key") if isinstance(doc, dict) else None
        self._keep(key, problem if problem is not None else (at, size))

    def add_revision(
        self,
        partition: int,
        offset: int,
        key: bytes,
        headers: RevisionHeaders | None,
        line: Where | None,
    ) -> None:
        """A record of a topic whose line is at ``line`` of the source (None: a tombstone),
        kept when it is the latest revision of its turn key so far
        (``core/revisions.replaces``): indexed without reading it, parsed once when its
        session is built. ``key`` must be UTF-8."""
        self.records += 1
        identity = turn_identity(key)
        revision = None if headers is None else headers.revision
        new = Kept(partition, offset, revision)
        row = self.db.execute(
            "SELECT rank, partition, offset, revision FROM turn WHERE key = ?", (identity,)
        ).fetchone()
        if row is not None and not replaces(new, Kept(*row[1:])):
            return
        first = self.records if row is None else row[0] & _FIRST
        text = identity.decode()
        pair = turn_key(text)
        session = None if pair is None else text_blob(pair[0])
        place: tuple[int | None, int | None, str | None] = (None, None, None)
        if line is not None:
            place = _where(SkipReason.TOO_LARGE if line[1] > self.max_bytes else line)
        final_after = None if headers is None else headers.final_after
        rank = (partition << 40) | first
        self.db.execute(
            _REVISE,
            (
                identity,
                session,
                rank,
                *place,
                partition,
                offset,
                revision,
                final_after,
                line is None,
            ),
        )

    def _keep(self, key: object, line: Where | SkipReason) -> None:
        if not isinstance(key, str):
            self.unkeyed += 1
            if self.first_bad is None:
                self.first_bad = self.lines
            return
        pair = turn_key(key)
        if pair is None and self.first_bad is None:
            self.first_bad = self.lines
        session = None if pair is None else text_blob(pair[0])
        self._pending.append((text_blob(known_as(key)), session, self.lines, *_where(line)))
        if len(self._pending) >= PUT_BATCH:
            self._put()

    def line(self, where: Where) -> bytes:
        """The line at ``where`` in the source."""
        assert self.source is not None, "a position without a source"
        self.source.seek(where[0])
        return self.source.read(where[1])

    def where(self, key: str) -> Where | SkipReason | None:
        """Where the latest line of ``key`` is, or why it is no turn; None: not read."""
        row = self.db.execute(
            "SELECT at, length, skip FROM turn WHERE key = ? AND NOT deleted", (text_blob(key),)
        ).fetchone()
        return None if row is None else _place(row)

    def entries(self) -> Iterator[tuple[str, Where | SkipReason]]:
        """Every key read, with where its latest line is, in first-emission order."""
        rows = self.db.execute(
            "SELECT key, at, length, skip FROM turn WHERE NOT deleted ORDER BY rank"
        )
        for key, *place in rows:
            yield blob_text(key), _place(place)

    def kept(self) -> Iterator[tuple[bool, float | None]]:
        """For each key of a topic: whether the record kept deletes it, and its headers'
        ``final_after`` (None: it has none)."""
        for deleted, final_after in self.db.execute("SELECT deleted, final_after FROM turn"):
            yield bool(deleted), final_after

    @property
    def turns(self) -> int:
        """Keys that name a turn: zero means the input holds no turn line at all."""
        query = "SELECT COUNT(*) FROM turn WHERE session IS NOT NULL AND NOT deleted"
        return int(self.db.execute(query).fetchone()[0])

    @property
    def keys(self) -> int:
        """Distinct keys read, turns or not."""
        return int(self.db.execute("SELECT COUNT(*) FROM turn WHERE NOT deleted").fetchone()[0])

    @property
    def sessions(self) -> int:
        """Distinct sessions the keys name."""
        query = "SELECT COUNT(DISTINCT session) FROM turn WHERE NOT deleted"
        return int(self.db.execute(query).fetchone()[0])

    def close(self) -> None:
        """Lets the index go (its file is deleted)."""
        self._db.close()


def _where(line: Where | SkipReason) -> tuple[int | None, int | None, str | None]:
    if isinstance(line, SkipReason):
        return None, None, line.value
    return line[0], line[1], None


def _place(row: Sequence[object]) -> Where | SkipReason:
    at, length, skip = row
    if skip is not None:
        return SkipReason(cast(str, skip))
    return cast(int, at), cast(int, length)


def _lenient(line: bytes) -> tuple[Json, SkipReason | None]:
    """A line orjson refuses, read by Python's json: NaN and infinities, lone surrogates.
    Returns the document (None when it is not JSON either) and what is wrong with it."""
    found: list[str] = []

    def constant(name: str) -> None:
        found.append(name)

    try:
        doc = json.loads(line, parse_constant=constant)
    except (ValueError, RecursionError):
        return None, None
    if found:
        return cast(Json, doc), SkipReason.NON_FINITE_NUMBER
    return cast(Json, doc), SkipReason.UNREPRESENTABLE_UNICODE


def scan_lines(
    source: IO[bytes], max_bytes: int, seen: Callable[[bytes], None] | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """Each line of ``source`` as (position, length, bytes): all of a line up to
    ``max_bytes``, only the first ``HEAD_BYTES`` of a longer one, whose rest is read by
    chunks and let go. ``seen`` is given every byte read, once (a digest of the file)."""
    at = 0
    while line := source.readline(max_bytes + 1):
        if seen is not None:
            seen(line)
        length = len(line)
        if length > max_bytes:
            line = line[:HEAD_BYTES]
            last = line
            while not last.endswith(b"\n") and (rest := source.readline(CHUNK_BYTES)):
                if seen is not None:
                    seen(rest)
                length += len(rest)
                last = rest
        yield at, length, line
        at += length


def read_turns_file(
    source: IO[bytes],
    max_bytes: int = MAX_EXAMPLE_BYTES,
    seen: Callable[[bytes], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> TurnLines:
    """The index of a TURNS or FINAL file, read once: ``source`` stays its source (kept open
    until the dataset is written). ``progress`` is told the bytes read, every 1,000 lines."""
    read = TurnLines(source=source, max_bytes=max_bytes)
    done = 0
    for n, (at, length, line) in enumerate(scan_lines(source, max_bytes, seen), 1):
        read.add(line, at, length)
        done = at + length
        if progress is not None and n % 1000 == 0:
            progress(done)
    if progress is not None:
        progress(done)
    return read


def read_turn_lines(lines: Iterable[bytes], max_bytes: int = MAX_EXAMPLE_BYTES) -> TurnLines:
    """The index of ``lines`` (each with or without its newline), held in memory as a file:
    for tests and the bench."""
    data = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)
    return read_turns_file(io.BytesIO(data), max_bytes)


def turn_key(key: str) -> tuple[str, str] | None:
    """The (session_id, inference_call_id) a turn key names, or None when it names none."""
    try:
        pair = orjson.loads(key)
    except (orjson.JSONDecodeError, UnicodeEncodeError, TypeError):
        return None  # (TypeError: orjson refuses a str with a lone surrogate)
    if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
        return pair[0], pair[1]
    return None


def known_as(key: str) -> str:
    """The key a turn is known by: one that names a turn (the JSON text of ``[session_id,
    inference_call_id]``, however spaced or escaped) as the worker writes it; any other as it
    is, which no turn's can equal (the worker's spelling of a pair is always a pair)."""
    pair = turn_key(key)
    if pair is None:
        return key
    try:
        return worker_key(*pair).decode()
    except (UnicodeEncodeError, TypeError):
        return key


def completing_index(turn: TurnDict) -> int | None:
    """The index of the turn's own assistant message: the one with a finish reason (the
    core emits a turn when such a message arrives, so there is exactly one)."""
    found = [
        i
        for i, m in enumerate(turn["new_messages"])
        if m["role"] == "assistant" and m["finish_reason"] is not None
    ]
    return found[0] if len(found) == 1 else None


def _deeper_than(value: Json, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` levels (iterative: any depth is safe)."""
    stack: list[tuple[Json, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth >= limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return False


def _unrepresentable(text: str) -> bool:
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _ids(session_id: str, turn: TurnDict) -> Iterator[str]:
    yield session_id
    yield turn["inference_call_id"]
    for m in turn["new_messages"]:
        for part in m["parts"]:
            if part["type"] in ("tool_call", "tool_call_response"):
                yield part["id"]
    for d in turn["decisions"]:
        yield d["decision_id"]
        yield d["session_id"]


def parse_turn(
    line: bytes | SkipReason, call_id: str, session_id: str = ""
) -> TurnDict | SkipReason:
    """The Turn of a turn line whose key names ``call_id``, or why it holds none."""
    if isinstance(line, SkipReason):
        return line
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:  # (from a topic, where no line was read before)
        return _lenient(line)[1] or SkipReason.NOT_A_TURN
    brackets = len(line) - len(line.translate(None, b"{["))
    if brackets > MAX_TURN_DEPTH and _deeper_than(doc, MAX_TURN_DEPTH + 1):
        return SkipReason.NOT_A_TURN  # (the line's own object is one level)
    value = doc.get("value") if isinstance(doc, dict) else None
    try:
        Turn.model_validate(value)
    except ValidationError:
        return SkipReason.NOT_A_TURN
    turn = cast(TurnDict, value)
    if turn["inference_call_id"] != call_id or completing_index(turn) is None:
        return SkipReason.NOT_A_TURN
    if any(m["role"] not in ("system", "user", "assistant", "tool") for m in turn["new_messages"]):
        return SkipReason.NOT_A_TURN
    if any(_unrepresentable(i) for i in _ids(session_id, turn)):
        return SkipReason.UNREPRESENTABLE_UNICODE
    return turn


class SessionTurn(NamedTuple):
    key: str
    turn: TurnDict | SkipReason  # a reason: the line is not a turn this export can use


@dataclass(frozen=True, slots=True)
class SessionTurns:
    """A session's turns in first-emission order, read from the index and parsed as they are
    iterated (once more each time): memory holds the turn being read, not the session."""

    read: TurnLines
    session: bytes
    session_id: str

    def __iter__(self) -> Iterator[SessionTurn]:
        for key, where in self._rows():
            pair = turn_key(key)
            assert pair is not None, "a key with a session names a turn"
            line = where if isinstance(where, SkipReason) else self.read.line(where)
            yield SessionTurn(key, parse_turn(line, pair[1], self.session_id))

    def turn_keys(self) -> Iterator[str]:
        """The turns' keys, none of their lines read."""
        for key, _ in self._rows():
            yield key

    def _rows(self) -> Iterator[tuple[str, Where | SkipReason]]:
        query = (
            "SELECT key, at, length, skip FROM turn WHERE session = ? AND NOT deleted ORDER BY rank"
        )
        for key, at, length, skip in self.read.db.execute(query, (self.session,)):
            yield blob_text(key), _place((at, length, skip))


def sessions(read: TurnLines, skips: Skips) -> Iterator[tuple[str, SessionTurns]]:
    """Each session's id with its turns, sessions in the order of their first turn. A line
    whose key names no session is skipped here, first."""
    for _ in range(read.unkeyed):
        skips.add(None, SkipReason.NOT_A_TURN)
    db = read.db
    others = "SELECT key, skip FROM turn WHERE session IS NULL AND NOT deleted ORDER BY rank"
    for key, skip in db.execute(others):
        skips.add(blob_text(key), SkipReason(skip) if skip is not None else SkipReason.NOT_A_TURN)
    # Covering: a session's turns are read from the index alone, not looked up by key.
    covering = "session, rank, key, at, length, skip, deleted"
    db.execute(f"CREATE INDEX IF NOT EXISTS turn_by_session ON turn ({covering})")
    order = (
        "SELECT session FROM turn WHERE session IS NOT NULL AND NOT deleted"
        " GROUP BY session ORDER BY MIN(rank)"
    )
    for (session,) in db.execute(order):
        session_id = blob_text(session)
        yield session_id, SessionTurns(read, session, session_id)
