"""The ``stream-app`` command: one parser, a subparser a subcommand (``cli/<subcommand>.py``).

Every failure a user can cause is one line on stderr and exit status 2, usage errors
included, starting with the command's name (``stream-app publish: ...``) as its summary line
does; a bad setting, which is every command's, with ``stream-app: STREAM_APP_...``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from stream_app import release
from stream_app.cli import dev, export, publish, replay, tail, worker
from stream_app.config import SettingsError

DESCRIPTION = (
    "Turn coding agents' chat messages and developer decisions into Turn records, one per "
    "assistant inference call. Try it with 'stream-app dev --demo' (a broker and a worker on "
    "this machine) or 'stream-app replay FILE' (no broker). Settings are STREAM_APP_* "
    "environment variables."
)


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


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="stream-app", description=DESCRIPTION)
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for subcommand in (replay, worker, dev, tail, publish, export):
        subcommand.register(commands)
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
