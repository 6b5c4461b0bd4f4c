"""``stream-app export``: the final (or turn) topic, or a TURNS file, written as a dataset
(``datasets/``)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from stream_app.cli.arguments import BOOTSTRAP_HELP, Commands, bootstrap_argument, fraction
from stream_app.config import load_settings

MAX_EXAMPLE_BYTES = 16 * 1024 * 1024  # datasets.options.MAX_EXAMPLE_BYTES, not imported at start
SHARD_BYTES = 500 * 1000 * 1000  # datasets.options.SHARD_BYTES

if TYPE_CHECKING:
    from stream_app.datasets.manifest import Manifest
    from stream_app.datasets.options import Options
    from stream_app.datasets.turn_lines import TurnLines
    from stream_app.models.json_types import JsonObject


def register(commands: Commands) -> None:
    """The ``export`` subcommand."""
    export = commands.add_parser(
        "export",
        help="write the final turns as a dataset: turn lines, chat, trajectories, kto, dpo",
        description="Read the final topic (STREAM_APP_TOPIC_FINAL: each turn once, when "
        'nothing can revise it any more) to its end and write every turn as {"key", "value"} '
        "lines; --include-open reads the turn topic instead and writes the latest revision of "
        "every turn, final or not. Exit status 0 "
        "when written; 2, with one line, when the broker cannot be read or the file cannot be "
        "written. --from reads a TURNS or FINAL file of 'stream-app replay' instead (no "
        "broker). --format chat writes supervised examples (each assistant message a target "
        "once), trajectories one line per session, kto and dpo preference rows from the "
        "developers' verdicts; --eval-fraction splits them; an --out ending in .parquet "
        "writes Parquet; an --out ending in / writes a Hugging Face dataset folder (data/, "
        "README.md card, manifest.json) swapped in whole. A manifest (counts, SHA-256 of each "
        "file, provenance, turns skipped by reason) is written beside them.",
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
        choices=("turns", "chat", "trajectories", "kto", "dpo"),
        default="turns",
        help="turns: the turns' lines (default); chat: supervised examples; trajectories: "
        "one line per session; kto: a row per turn with a verdict; dpo: accepted/rejected "
        "pairs of one prompt",
    )
    export.add_argument(
        "--profile",
        choices=("openai", "trl"),
        help="chat, dpo: OpenAI's fine-tuning lines or TRL's rows (default: openai for chat, "
        "trl for kto and dpo; kto is TRL's only)",
    )
    export.add_argument(
        "--reasoning", action="store_true", help="chat: keep reasoning, as reasoning_content"
    )
    export.add_argument(
        "--only-accepted",
        action="store_true",
        help="chat: targets only turns with an explicit accept and no reject",
    )
    export.add_argument(
        "--include-implicit",
        action="store_true",
        help="kto, dpo: implicit decisions are verdicts too (when a turn has no explicit one)",
    )
    export.add_argument(
        "--keep-credentials",
        action="store_true",
        help="write content as it is (default: credentials redacted as the worker does)",
    )
    export.add_argument(
        "--max-example-bytes",
        type=_positive,
        default=MAX_EXAMPLE_BYTES,
        metavar="N",
        help="skip a line or example larger than N bytes as too_large (default 16 MiB)",
    )
    export.add_argument(
        "--shard-bytes",
        type=_positive,
        default=SHARD_BYTES,
        metavar="N",
        help="a folder: a split's next shard past N bytes of JSON lines (default 500 MB)",
    )
    export.add_argument(
        "--eval-fraction",
        type=fraction,
        metavar="F",
        help="split (by session; kto, dpo: by prompt): F in eval (a folder: validation)",
    )
    export.add_argument(
        "--split-salt",
        default="",
        metavar="SALT",
        help="draw another split, deterministically (default: none)",
    )
    export.add_argument(
        "--parquet",
        action="store_true",
        help="Parquet (a file: as an --out ending in .parquet; a folder: Parquet shards)",
    )
    export.add_argument(
        "--org-id",
        help="trajectories: the org of sessions without decisions (default: STREAM_APP_ORG_ID)",
    )
    export.set_defaults(run=command)


class Terminated(Exception):
    """SIGTERM, raised where the export is, so that what it staged is removed."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def command(args: argparse.Namespace) -> int:
    """Exit 0 when every turn up to the topic's end (or of the ``--from`` file) is read and
    the dataset written (or when there was no turn: nothing written, the old set kept), 2
    and one line when the input or an option is wrong, 130 on SIGINT and 143 on SIGTERM,
    one line each; the old set stays whole unless the new one replaced it whole."""
    import signal

    if (usage := _export_usage(args)) is not None:
        print(f"stream-app export: {usage}; see stream-app export --help", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _command(args)
    except KeyboardInterrupt:
        print("stream-app export: interrupted (SIGINT); nothing written", file=sys.stderr)
        return 130
    except Terminated:
        print("stream-app export: terminated (SIGTERM); nothing written", file=sys.stderr)
        return 143
    finally:
        signal.signal(signal.SIGTERM, previous)


def _command(args: argparse.Namespace) -> int:
    import asyncio

    from stream_app.broker.clients import quiet_client_log
    from stream_app.console.progress import progress
    from stream_app.datasets.files import check_replaceable
    from stream_app.datasets.layout import is_folder, is_parquet
    from stream_app.datasets.manifest import summary as dataset_summary
    from stream_app.datasets.manifest import written
    from stream_app.datasets.options import Options
    from stream_app.datasets.topic import ExportError, spool_turns, summary
    from stream_app.datasets.writers import DatasetError, require_parquet

    settings = load_settings()
    folder = is_folder(args.out)
    out = Path(args.out)
    if folder and out.name in ("", ".."):  # ".", "/": the folder by its own name
        out = Path(os.path.abspath(out))
    parquet = args.parquet or (is_parquet(out) and not folder)
    options = Options(
        format=args.format,
        reasoning=args.reasoning,
        only_accepted=args.only_accepted,
        eval_fraction=args.eval_fraction,
        org_id=args.org_id or settings.org_id,
        profile=args.profile,
        include_implicit=args.include_implicit,
        keep_credentials=args.keep_credentials,
        max_example_bytes=args.max_example_bytes,
        split_salt=args.split_salt,
        shard_bytes=args.shard_bytes,
    )
    said: list[str] = []
    try:
        if parquet:
            require_parquet()  # before a long read, not after it
        if folder:
            check_replaceable(out)  # before a long read too
        with contextlib.ExitStack() as held:  # the file read, or the topic's spool, till written
            if args.from_file is not None:
                read, sha = _read_turns_file(held, Path(args.from_file), args.max_example_bytes)
                source = args.from_file
                given: JsonObject = {"path": args.from_file, "sha256": sha}
            else:
                quiet_client_log()
                spool = held.enter_context(tempfile.TemporaryFile(prefix="stream-app-export-"))
                offsets: dict[int, tuple[int, int]] = {}
                with progress("exporting", in_bytes=False) as bar:
                    counts, read = asyncio.run(
                        spool_turns(
                            settings,
                            spool,
                            bootstrap=args.bootstrap,
                            topic=args.topic,
                            include_open=args.include_open,
                            progress=bar.update,
                            offsets=offsets,
                            max_bytes=args.max_example_bytes,
                        )
                    )
                held.callback(read.close)
                default = settings.topic_turns if args.include_open else settings.topic_final
                topic = args.topic or default
                said.append(summary(counts, args.include_open, topic))
                source = f"topic {topic}"
                given = {
                    "topic": topic,
                    "partitions": [
                        {"partition": p, "start": start, "end": end}
                        for p, (start, end) in sorted(offsets.items())
                    ],
                }
            manifest = _write(args, read, options, out, source, given, folder, parquet, said)
            if manifest is None:
                return 2 if read.records and args.from_file is not None else 0
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


def _write(
    args: argparse.Namespace,
    read: TurnLines,
    options: Options,
    out: Path,
    source: str,
    given: JsonObject,
    folder: bool,
    parquet: bool,
    said: list[str],
) -> Manifest | None:
    """The dataset of ``read`` written, or None (and its line said) when it holds no turn."""
    from stream_app import release
    from stream_app.console.progress import progress
    from stream_app.datasets.files import write_dataset
    from stream_app.datasets.manifest import Provenance

    if read.turns == 0:
        if read.records and args.from_file is not None:
            print(
                f"stream-app export: {args.from_file}:{read.first_bad}: not a turn line "
                '({"key": "[session_id, inference_call_id]", "value": Turn}: the output of '
                "stream-app replay, not its input); nothing written",
                file=sys.stderr,
            )
            return None
        kept = f", {out} kept" if out.exists() else ""
        said.append(f"stream-app export: no turn in {source}: nothing written{kept}")
        print("\n".join(said), file=sys.stderr)
        return None
    provenance: Provenance = {
        "input": given,
        "stream_app_version": release(),
        "command": ["stream-app", *sys.argv[1:]] if sys.argv[1:2] == ["export"] else [],
    }
    with progress("writing", in_bytes=False) as bar:
        return write_dataset(
            read,
            options,
            out,
            source,
            progress=bar.update,
            provenance=provenance,
            folder=folder,
            parquet=parquet,
        )


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of bytes, 1 or more (got {value!r})"
        )
    return number


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
    if args.format not in ("chat", "kto", "dpo") and args.reasoning:
        return "--reasoning and --only-accepted apply to --format chat (--reasoning: kto, dpo too)"
    if args.format != "chat" and args.only_accepted:
        return "--reasoning and --only-accepted apply to --format chat"
    if args.format not in ("kto", "dpo") and args.include_implicit:
        return "--include-implicit applies to --format kto and dpo"
    if args.profile is not None and args.format not in ("chat", "kto", "dpo"):
        return "--profile applies to --format chat, kto and dpo"
    if args.format == "kto" and args.profile == "openai":
        return "--format kto has no OpenAI profile: OpenAI takes preferences as dpo pairs"
    return None


def _read_turns_file(
    held: contextlib.ExitStack, path: Path, max_bytes: int
) -> tuple[TurnLines, str]:
    """The index of the latest revision of every turn of a TURNS or FINAL file, with a
    progress bar, and the SHA-256 of the file's bytes. The file stays open in ``held``: the
    dataset reads its lines again by position."""
    import hashlib

    from stream_app.console.progress import progress
    from stream_app.datasets.turn_lines import read_turns_file

    try:
        source = held.enter_context(path.open("rb"))
        size = path.stat().st_size
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, f"cannot read {path}") from None
    digest = hashlib.sha256()
    with progress("reading", in_bytes=True) as bar:
        read = read_turns_file(
            source, max_bytes, digest.update, lambda done: bar.update(done, size)
        )
    held.callback(read.close)
    return read, digest.hexdigest()
