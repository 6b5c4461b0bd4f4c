"""The ``stream-app`` command, one module per subcommand (``cli/main.py`` builds it).

``run`` is the console script's entry: it imports the command only once called, so that a
Ctrl-C at any moment, the imports included, ends in one line and exit status 130, never a
traceback (a subcommand with its own word for an interrupt says it first).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def run(argv: Sequence[str] | None = None) -> int:
    try:
        from stream_app.cli.main import main

        return main(argv)
    except KeyboardInterrupt:
        print("stream-app: interrupted", file=sys.stderr)
        return 130
