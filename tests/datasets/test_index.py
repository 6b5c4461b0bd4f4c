"""The index of the latest revision of every turn key (issue 52 item 7): on disk, so that an
export's memory does not grow with its input; from a topic, the revision rule of
``core/revisions.replaces`` and the counts the export says."""

from __future__ import annotations

from collections import Counter

from stream_app.core.revisions import RevisionHeaders
from stream_app.datasets.skips import SkipReason, Skips
from stream_app.datasets.topic import kept_counts
from stream_app.datasets.turn_lines import TurnLines, read_turn_lines, sessions


def headers(revision: int, final_after: float, session: str = "s1") -> RevisionHeaders:
    return RevisionHeaders(session, revision, final_after)


def test_the_last_revision_of_a_key_in_its_partition_is_kept_in_topic_order() -> None:
    read = TurnLines()
    read.add_revision(1, 0, b"k1", headers(1, 100.0), (0, 10))
    read.add_revision(0, 0, b"k2", headers(1, 100.0), (10, 10))
    read.add_revision(1, 1, b"k1", headers(2, 100.0), (20, 10))
    # a re-emission after a crash repeats revision 2 with the same content: still the latest
    read.add_revision(1, 2, b"k1", headers(2, 100.0), (30, 10))
    assert list(read.entries()) == [("k2", (10, 10)), ("k1", (30, 10))]  # by partition
    assert kept_counts(read, now=200.0) == Counter(keys=2, final=2, written=2)
    assert read.records == 4


def test_a_key_seen_in_two_partitions_keeps_the_higher_revision() -> None:
    read = TurnLines()
    read.add_revision(3, 9, b"k", headers(2, 100.0), (0, 10))
    read.add_revision(0, 0, b"k", headers(1, 100.0), (10, 10))
    assert read.where("k") == (0, 10)


def test_turns_past_final_after_are_counted_final_and_a_tombstone_deletes_its_key() -> None:
    read = TurnLines()
    read.add_revision(0, 0, b"closed", headers(1, 99.0), (0, 1))
    read.add_revision(0, 1, b"at-now", headers(1, 100.0), (1, 1))  # final only after it
    read.add_revision(0, 2, b"open", headers(1, 500.0), (2, 1))
    read.add_revision(0, 3, b"old-worker", None, (3, 1))  # cannot tell: counted open
    read.add_revision(0, 4, b"gone", headers(1, 50.0), (4, 1))
    read.add_revision(0, 5, b"gone", None, None)  # a tombstone deletes the key
    counts = kept_counts(read, now=100.0)
    assert counts["final"] == 1 and counts["open"] == 3
    assert counts["without_headers"] == 1 and counts["deleted"] == 1
    assert counts["written"] == 4 and counts["keys"] == 5
    assert [key for key, _ in read.entries()] == ["closed", "at-now", "open", "old-worker"]
    assert read.where("gone") is None


def test_a_key_spelled_two_ways_is_one_turn() -> None:
    """Issue 49 item 5: a turn is its parsed key, not its text: ``["s", "a1"]`` (as
    ``json.dumps`` writes it) is a later revision of ``["s","a1"]``, and it is written under
    the key as the worker spells it."""
    read = TurnLines()
    read.add_revision(0, 0, b'["s","a1"]', headers(1, 100.0, "s"), (0, 1))
    read.add_revision(0, 1, b'["s","a2"]', headers(1, 100.0, "s"), (1, 1))
    read.add_revision(0, 2, b'["s", "a1"]', headers(2, 100.0, "s"), (2, 1))
    read.add_revision(0, 3, b'[ "s" , "\\u0061\\u0032" ]', headers(2, 100.0, "s"), (3, 1))
    assert list(read.entries()) == [('["s","a1"]', (2, 1)), ('["s","a2"]', (3, 1))]
    assert kept_counts(read, now=200.0) == Counter(keys=2, final=2, written=2)
    # a key that names no turn is kept as it is, apart from every turn's
    read.add_revision(0, 4, b"not a turn", headers(1, 100.0, "s"), (4, 1))
    read.add_revision(0, 5, b'["s"]', headers(1, 100.0, "s"), (5, 1))
    assert read.keys == 4 and read.turns == 2 and read.sessions == 1


def test_sessions_come_in_the_order_of_their_first_turn_each_turn_where_first_emitted() -> None:
    def line(session: str, call: str, revision: int) -> bytes:
        return b'{"key":"[\\"%s\\",\\"%s\\"]","value":%d}' % (
            session.encode(),
            call.encode(),
            revision,
        )

    read = read_turn_lines(
        [line("b", "1", 1), line("a", "1", 1), line("b", "2", 1), line("b", "1", 2)]
    )
    found = [(session_id, list(turns.turn_keys())) for session_id, turns in sessions(read, Skips())]
    assert found == [("b", ['["b","1"]', '["b","2"]']), ("a", ['["a","1"]'])]
    size = len(line("b", "1", 1)) + 1  # with its newline
    assert read.where('["b","1"]') == (3 * size, size)


def test_the_index_holds_no_key_in_python_memory() -> None:
    """Four times the keys take no more of Python's memory (tracemalloc counts Python's
    allocations, not SQLite's page cache, which has its own bound): the index grows on
    disk. A dict of the keys, as before, grew with them."""
    import tracemalloc

    def peak(keys: int) -> int:
        lines = (
            b'{"key":"[\\"s%d\\",\\"c%d\\"]","value":null}' % (i % 997, i) for i in range(keys)
        )
        tracemalloc.start()
        read = TurnLines()
        for n, text in enumerate(lines):
            read.add(text, n * 64, len(text))
        assert read.keys == keys
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        read.close()
        return top

    small, large = peak(5_000), peak(20_000)
    assert large < small + 256 * 1024, (small, large)


def test_a_line_skipped_for_what_it_is_keeps_its_reason_in_the_index() -> None:
    read = read_turn_lines([b'{"key":"[\\"s\\",\\"a\\"]","value":NaN}'])
    assert read.where('["s","a"]') == SkipReason.NON_FINITE_NUMBER
