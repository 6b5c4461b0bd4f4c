"""The ``stream-app`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from stream_app.config import SettingsError, load_settings


def _replay(args: argparse.Namespace) -> int:
    from stream_app.replay import replay, summary

    settings = load_settings()
    if args.org_id is not None:
        settings = settings.model_copy(update={"org_id": args.org_id})
    try:
        source = Path(args.input).open("rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        print(f"stream-app replay: cannot read {args.input}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        with source, open(args.out, "wb") as turns, open(args.dlq, "wb") as dlq:
            counts = replay(source, settings, turns, dlq)
    except OSError as exc:
        print(f"stream-app replay: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    print(summary(counts), file=sys.stderr)
    return 0


def _worker(args: argparse.Namespace) -> int:
    load_settings()  # a bad setting is a one-line error before Faust starts
    from stream_app.app import app

    app.Worker(loglevel=args.loglevel).execute_from_commandline()
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stream-app", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    replay = commands.add_parser("replay", help="run the pipeline over a JSON-lines file")
    replay.add_argument("input", help="input records, one JSON object per line")
    replay.add_argument("--out", required=True, help="where to write turn revisions")
    replay.add_argument("--dlq", required=True, help="where to write dead letters")
    replay.add_argument("--org-id", help="the deployment's org id (default: STREAM_APP_ORG_ID)")
    replay.set_defaults(run=_replay)

    worker = commands.add_parser("worker", help="run a worker on the Kafka cluster")
    worker.add_argument("--loglevel", default="info", help="debug, info, warning or error")
    worker.set_defaults(run=_worker)
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
