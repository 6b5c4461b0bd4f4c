"""Event log lines: JSON for machines, key=value on a terminal."""

from __future__ import annotations

import io
import logging
import sys
import threading

import orjson
import pytest

from stream_app.observability import logs


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_event_lines_are_json_when_not_on_a_terminal() -> None:
    out = io.StringIO()
    logs.configure(out)
    logs.event("dead_letter", reason="schema", offset=17)
    line = orjson.loads(out.getvalue())
    assert (line["event"], line["level"], line["reason"], line["offset"]) == (
        "dead_letter",
        "info",
        "schema",
        17,
    )
    assert line["ts"].endswith("Z")


def test_event_lines_are_readable_on_a_terminal() -> None:
    out = Terminal()
    logs.configure(out)
    logs.event("partitions_assigned", partitions=["s:0", "s:1"])
    text = out.getvalue()
    assert "partitions_assigned" in text and "partitions=['s:0', 's:1']" in text
    assert not text.startswith("{")


def _record(name: str, level: int, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_a_clients_repeated_errors_pass_once_a_window_and_count_the_rest() -> None:
    # Issue 20 item 3: with the brokers gone aiokafka logged ~385 ERROR lines in 5 s.
    now = [0.0]
    repeats = logs.Repeats(window=30.0, clock=lambda: now[0])
    unable = "Unable connect to node with id %s: %s"
    passed = []
    for i in range(100):
        now[0] = i * 0.5  # 50 s of the same error, twice a second, for two nodes
        for node in (1, 2):
            record = _record("aiokafka.conn", logging.ERROR, unable, node, "refused")
            if repeats.filter(record):
                passed.append((now[0], getattr(record, "suppressed", 0)))
    # One of the kind per 30 s (the node is an argument: the same kind), and the next one
    # through says how many were held back meanwhile.
    assert passed == [(0.0, 0), (30.0, 119)]
    other = _record("aiokafka", logging.ERROR, "Unable to update metadata from %s", [111])
    assert repeats.filter(other)  # another kind


def test_what_is_not_a_clients_warning_always_passes() -> None:
    repeats = logs.Repeats(window=30.0, clock=lambda: 0.0)
    joining = _record("aiokafka.consumer.group_coordinator", logging.INFO, "(Re-)joining group")
    assert all(repeats.filter(joining) for _ in range(5))  # every rebalance shows
    faust_error = _record("faust.transport", logging.ERROR, "same")
    assert all(repeats.filter(faust_error) for _ in range(5))


def test_a_library_record_with_a_traceback_is_one_json_line() -> None:
    try:
        raise ValueError("inner")
    except ValueError:
        record = logging.LogRecord(
            "faust.worker", logging.ERROR, __file__, 1, "Crashed %r", ("x",), sys.exc_info()
        )
    record.suppressed = 4
    line = logs.OneLineFormatter(as_json=True).format(record)
    assert "\n" not in line
    doc = orjson.loads(line)
    assert (doc["logger"], doc["level"], doc["message"]) == ("faust.worker", "error", "Crashed 'x'")
    assert doc["traceback"].startswith("Traceback") and "ValueError: inner" in doc["traceback"]
    assert doc["suppressed"] == 4 and "event" not in doc  # not one of the project's events


def test_an_exception_that_ends_a_thread_is_one_record(caplog: pytest.LogCaptureFixture) -> None:
    def dies() -> None:
        raise RuntimeError("the consumer's thread died in its stop")

    previous = threading.excepthook
    logs.log_thread_exceptions()
    try:
        thread = threading.Thread(target=dies, name="ConsumerThread")
        with caplog.at_level(logging.ERROR, "stream_app.threads"):
            thread.start()
            thread.join()
    finally:
        threading.excepthook = previous
    (record,) = [r for r in caplog.records if r.name == "stream_app.threads"]
    assert "ConsumerThread" in record.getMessage()
    assert record.exc_info is not None and "died in its stop" in str(record.exc_info[1])
