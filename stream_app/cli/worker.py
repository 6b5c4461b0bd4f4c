"""``stream-app worker``: a worker on the Kafka cluster, and how its run ends."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from stream_app.cli.arguments import Commands
from stream_app.config import load_settings
from stream_app.observability import logs
from stream_app.runtime.allocator import tune_gc
from stream_app.worker import exits

LOGLEVELS = ("debug", "info", "warning", "error")


def register(commands: Commands) -> None:
    """The ``worker`` subcommand."""
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
    worker.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    """Runs a worker until it stops: 0 and a ``shutdown`` line, or 1 and a ``crash`` line.

    Faust ends every run with ``SystemExit``: 0 after a stop (SIGTERM, SIGINT), 1 when
    start-up failed or a service crashed ("We experienced a crash!"), with the error as the
    exit's context. Its own log shows the traceback; the last line says which it was, and
    a stop or a crash that does not finish in time is cut short (``worker/exits.py``).
    """
    import asyncio

    from stream_app.worker.reachability import wait_for_broker

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
    exits.Watchdog(worker, last_word).start()  # the exit within a bound (worker/exits.py)
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
