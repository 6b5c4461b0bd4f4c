"""``stream-app export``: the final (or turn) topic, or a TURNS file, written as a dataset
(``datasets/``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stream_app.cli.arguments import BOOTSTRAP_HELP, Commands, bootstrap_argument, fraction
from stream_app.config import load_settings

if TYPE_CHECKING:
    from stream_app.datasets.formats import TurnLines


def register(commands: Commands) -> None:
    """The ``export`` subcommand."""
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
    export.add_argument("--bootstrap", type=bootstrap_argument, help=BOOTSTRAP_HELP)
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
        type=fraction,
        metavar="F",
        help="split by session: OUT-stem.train and OUT-stem.eval, F of the sessions in eval",
    )
    export.add_argument(
        "--org-id",
        help="trajectories: the org of sessions without decisions (default: STREAM_APP_ORG_ID)",
    )
    export.set_defaults(run=command)


def command(args: argparse.Namespace) -> int:
    """Exit 0 when every turn up to the topic's end (or of the ``--from`` file) is read and
    the dataset written, else 2 and one line; the files appear only when complete (written
    beside them, then renamed, the manifest last: ``datasets/files.py``)."""
    import asyncio
    import tempfile

    from stream_app.broker.clients import quiet_client_log
    from stream_app.console.progress import progress
    from stream_app.datasets.files import (
        DatasetError,
        is_parquet,
        require_parquet,
        write_dataset,
        written,
    )
    from stream_app.datasets.files import summary as dataset_summary
    from stream_app.datasets.formats import Options, read_turn_lines
    from stream_app.datasets.topic import ExportError, export, summary

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
    from stream_app.console.progress import progress
    from stream_app.datasets.formats import TurnLines

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
