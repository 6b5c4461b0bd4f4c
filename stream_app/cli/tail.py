"""``stream-app tail``: the turn topic as it grows, for people (or as JSON lines).

Failures are one line each, never a traceback. Connecting is tried ``CONNECT_ATTEMPTS``
(5) times, waiting 0.5, 1, 2 and 4 s in between (one line per failed attempt, about 8 s in
all), then tail gives up. A topic the cluster does not have is an error at once. While
tailing, a broker that stops answering for ``LOST_AFTER`` (10) seconds ends tail. Each of
these raises :class:`TailError`, which ``stream-app tail`` prints as one line with exit 2.

Each bound is ``asyncio.timeout``, never ``asyncio.wait_for``: on Python 3.11, wait_for
swallows a cancellation (Ctrl-C, or dev stopping) that arrives as the call it waits on
completes (CPython issue 86296, fixed in 3.12), and tail would follow on, unstoppable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Mapping
from typing import IO

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from stream_app.broker.clients import close_consumer, no_broker, quiet_client_log
from stream_app.cli.arguments import BOOTSTRAP_HELP, Commands, bootstrap_argument
from stream_app.config import KafkaOptions, load_settings
from stream_app.console.wording import counted
from stream_app.core.revisions import read_headers
from stream_app.models.dead_letter import DeadLetterDict
from stream_app.models.turn import TurnDict

CONNECT_ATTEMPTS = 5
FIRST_BACKOFF = 0.5  # seconds before the second attempt, doubled before each next one
ATTEMPT_TIMEOUT = 10.0  # seconds one connection attempt may take
PROBE_AFTER = 2.0  # seconds without records before asking the broker whether it is there
PROBE_TIMEOUT = 2.0
LOST_AFTER = 10.0  # seconds of unanswered probes after which the broker is taken for gone


class TailError(Exception):
    """Why tail cannot go on, in one line."""


def describe(key: str, turn: TurnDict, revision: int | None = None) -> str:
    """One readable paragraph per turn revision; a revision after the first says its number,
    since it replaces the paragraph printed for that key before."""
    calls = ", ".join(f"{c['name']}({c['id']})" for c in turn["tool_calls"]) or "none"
    verdicts = (
        f"{d['decision_id']} {'accepted' if d['accepted'] else 'rejected'} ({d['agent_harness']})"
        for d in turn["decisions"]
    )
    decisions = ", ".join(verdicts) or "none"
    completion = turn["completion"].replace("\n", " / ")
    if len(completion) > 120:
        completion = completion[:117] + "..."
    again = f", revision {revision}" if revision is not None and revision > 1 else ""
    return (
        f"turn {key}{again}: {len(turn['new_messages'])} new messages\n"
        f"  completion: {completion}\n  tool calls: {calls}\n  decisions: {decisions}"
    )


async def tail(
    bootstrap: str,
    topic: str,
    *,
    as_json: bool = False,
    from_beginning: bool = True,
    limit: int | None = None,
    out: IO[str] = sys.stdout,
    err: IO[str] = sys.stderr,
    options: KafkaOptions | None = None,
    dead_letters: str | None = None,
    say_following: bool = False,
    finals: str | None = None,
) -> int:
    """Prints turn revisions until ``limit`` are printed (or forever); returns the count.

    ``options`` are the connection's security (``Settings.kafka_options``); none: plaintext.
    ``dead_letters`` names a dead-letter topic to print as well, interleaved as records
    arrive (they do not count towards ``limit``); ``finals`` names a final topic whose records
    are printed as a line each, saying a turn went final (nor do they count).
    ``say_following`` prints a line on ``err``
    once tailing has begun, for a person who would otherwise wonder why it never ends.
    Raises :class:`TailError` when the broker cannot be reached, the topic does not exist
    or the broker goes away (see the module's docstring for the bounds).
    """
    quiet_client_log()
    consumer = await _connect(bootstrap, err, options)
    try:
        tps = _partitions(consumer, topic, bootstrap)
        if dead_letters is not None:
            tps += _partitions(consumer, dead_letters, bootstrap)
        if finals is not None:
            tps += _partitions(consumer, finals, bootstrap)
        consumer.assign(tps)
        if from_beginning:
            await consumer.seek_to_beginning(*tps)
        else:
            await consumer.seek_to_end(*tps)
        if say_following:
            names = [t for t in (topic, dead_letters, finals) if t is not None]
            what = " and ".join([", ".join(names[:-1]), names[-1]]) if names[1:] else topic
            until = "until Ctrl-C" if limit is None else f"for {counted(limit, 'revision')}"
            print(f"stream-app tail: following {what} at {bootstrap} {until}", file=err, flush=True)
        return await _follow(
            consumer, bootstrap, limit, lambda r: _print(r, as_json, out, dead_letters, finals)
        )
    except KafkaError as exc:
        raise TailError(f"{bootstrap}: {exc}") from None
    finally:
        await close_consumer(consumer)


async def _connect(bootstrap: str, err: IO[str], options: KafkaOptions | None) -> AIOKafkaConsumer:
    # A TLS or SASL failure looks like silence to the client: say which protocol was tried.
    security: Mapping[str, object] = options or {}  # none: plaintext
    protocol = security.get("security_protocol", "PLAINTEXT")
    where = bootstrap if protocol == "PLAINTEXT" else f"{bootstrap} over {protocol}"
    delay = FIRST_BACKOFF
    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, **security
        )
        if await _started(consumer):
            return consumer
        if attempt == CONNECT_ATTEMPTS:
            break
        print(
            f"stream-app tail: no Kafka broker answers at {where} "
            f"(attempt {attempt} of {CONNECT_ATTEMPTS}); retrying in {delay:g} s",
            file=err,
            flush=True,
        )
        await asyncio.sleep(delay)
        delay *= 2
    raise TailError(f"gave up after {CONNECT_ATTEMPTS} attempts: {no_broker(where)}")


async def _started(consumer: AIOKafkaConsumer) -> bool:
    """Whether the consumer connected; closed if not (also when tail is cancelled meanwhile)."""
    try:
        async with asyncio.timeout(ATTEMPT_TIMEOUT):
            await consumer.start()
    except (KafkaError, OSError, TimeoutError):
        await close_consumer(consumer)
        return False
    except BaseException:
        await close_consumer(consumer)
        raise
    return True


def _partitions(consumer: AIOKafkaConsumer, topic: str, bootstrap: str) -> list[TopicPartition]:
    """The topic's partitions, from the metadata the consumer read when it connected."""
    partitions = consumer.partitions_for_topic(topic)
    if not partitions:
        raise TailError(f"topic {topic!r} does not exist on {bootstrap}")
    return [TopicPartition(topic, p) for p in sorted(partitions)]


async def _follow(
    consumer: AIOKafkaConsumer,
    bootstrap: str,
    limit: int | None,
    show: Callable[[ConsumerRecord[bytes, bytes]], bool],
) -> int:
    """Shows records until ``limit`` of those ``show`` counts (turns); asks the broker
    whether it is there when none come."""
    printed = 0
    heard = time.monotonic()  # when the broker last showed it was there
    asked = heard
    while limit is None or printed < limit:
        batch = await consumer.getmany(timeout_ms=500)
        now = time.monotonic()
        if batch:
            heard = asked = now
        elif now - asked >= PROBE_AFTER:
            asked = now
            if await _answers(consumer):
                heard = now
            elif now - heard >= LOST_AFTER:
                raise TailError(
                    f"lost the Kafka broker at {bootstrap}: no answer for {LOST_AFTER:g} s"
                )
        for records in batch.values():
            for record in records:
                if record.value is None or (limit is not None and printed >= limit):
                    continue
                if show(record):
                    printed += 1
    return printed


async def _answers(consumer: AIOKafkaConsumer) -> bool:
    try:
        async with asyncio.timeout(PROBE_TIMEOUT):
            await consumer.topics()  # a metadata request
    except (KafkaError, OSError, TimeoutError):
        return False
    return True


def describe_dead_letter(letter: DeadLetterDict) -> str:
    """One readable paragraph per dead letter: why, and where the record came from."""
    where = f"{letter.get('source_topic')} partition {letter.get('partition')}"
    return (
        f"dead letter: {letter.get('reason')} ({where} offset {letter.get('offset')})\n"
        f"  error: {letter.get('error')}"
    )


def describe_final(key: str, headers: Mapping[str, str]) -> str:
    """One line per final record: which turn, at which revision, and why it is final."""
    why = {
        "window": "its late-decision window has passed",
        "evicted": "a session limit closed it early",
        "expired": "its session expired",
    }.get(headers.get("final_reason", ""), headers.get("final_reason", "?"))
    return f"final: turn {key} at revision {headers.get('revision', '?')} ({why})"


def _print(
    record: ConsumerRecord[bytes, bytes],
    as_json: bool,
    out: IO[str],
    dead_letters: str | None,
    finals: str | None = None,
) -> bool:
    """Writes one record; whether it was a turn (what ``limit`` counts)."""
    if finals is not None and record.topic == finals:
        key = (record.key or b"").decode()
        named = {name: data.decode(errors="replace") for name, data in record.headers or ()}
        if as_json:
            final = {"key": key, "headers": named, "value": orjson.loads(record.value)}
            out.write(orjson.dumps({"final": final}).decode() + "\n")
        else:
            out.write(describe_final(key, named) + "\n")
        out.flush()
        return False
    value = orjson.loads(record.value)
    if dead_letters is not None and record.topic == dead_letters:
        shown = {"dead_letter": value} if as_json else None
        out.write((orjson.dumps(shown).decode() if shown else describe_dead_letter(value)) + "\n")
        out.flush()
        return False
    key = (record.key or b"").decode()
    if as_json:
        # The headers too: without revision and final_after a reader cannot tell the latest
        # revision or whether the turn is final.
        headers_text = {name: data.decode(errors="replace") for name, data in record.headers or ()}
        line = {"key": key, "headers": headers_text, "value": value}
        out.write(orjson.dumps(line).decode() + "\n")
    else:
        headers = read_headers(record.headers)
        out.write(describe(key, value, headers.revision if headers else None) + "\n")
    out.flush()
    return True


def register(commands: Commands) -> None:
    """The ``tail`` subcommand."""
    tail = commands.add_parser(
        "tail",
        help="print turn revisions from the turn topic, until Ctrl-C",
        description="Print the turn topic's revisions from its beginning (--new: from now on) "
        "and follow it until Ctrl-C, or until --limit revisions. Exit status 0 then; 2, with "
        "one line, when no broker answers after 5 attempts (about 8 s), the topic does not "
        "exist, or the broker stops answering for 10 s while tailing.",
    )
    tail.add_argument("--json", action="store_true", help="JSON lines instead of text")
    tail.add_argument("--new", action="store_true", help="only turns produced from now on")
    tail.add_argument("--bootstrap", type=bootstrap_argument, help=BOOTSTRAP_HELP)
    tail.add_argument("--topic", help="default: STREAM_APP_TOPIC_TURNS")
    tail.add_argument(
        "--dead-letters", action="store_true", help="print STREAM_APP_TOPIC_DLQ's records too"
    )
    tail.add_argument("--limit", type=int, help="stop after this many revisions")
    tail.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    settings = load_settings()
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(
                tail(
                    args.bootstrap or settings.bootstrap_servers(),
                    args.topic or settings.topic_turns,
                    as_json=args.json,
                    from_beginning=not args.new,
                    limit=args.limit,
                    options=settings.kafka_options(),
                    dead_letters=settings.topic_dlq if args.dead_letters else None,
                    say_following=sys.stderr.isatty(),
                )
            )
    except TailError as exc:
        print(f"stream-app tail: {exc}", file=sys.stderr)
        return 2
    return 0
