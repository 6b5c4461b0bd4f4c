"""``stream-app publish``: replay-format lines checked by the worker's intake and sent
(``ingest/publish.py``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stream_app.cli.arguments import BOOTSTRAP_HELP, Commands, bootstrap_argument
from stream_app.config import load_settings
from stream_app.core.inputs import INPUTS


def register(commands: Commands) -> None:
    """The ``publish`` subcommand."""
    publish = commands.add_parser(
        "publish",
        help="check replay-format records and send them to the input topics",
        description="Check each line of a replay-format file as the worker's intake would, and "
        f"send it to {' or '.join(kind.variable for kind in INPUTS.values())} keyed by its "
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
    publish.add_argument("--bootstrap", type=bootstrap_argument, help=BOOTSTRAP_HELP)
    publish.add_argument("--org-id", help="the deployment's org id (default: STREAM_APP_ORG_ID)")
    publish.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    """Exit 0 when the file was sent (rejected lines skipped and reported), 2 when it was
    refused (``--strict``), sent nothing (every line rejected), unreadable, or the broker
    failed; one line says why."""
    import asyncio

    from stream_app.broker.clients import quiet_client_log
    from stream_app.console.progress import progress
    from stream_app.console.wording import unclosed_warning
    from stream_app.ingest.publish import PublishError, Rejected, publish, summary

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
