"""What the subcommands' parsers share: the broker argument, a fraction, the subparsers' type."""

from __future__ import annotations

import argparse
from typing import TypeAlias

from stream_app.config import broker_hosts

# argparse names no public type for ``add_subparsers``'s result.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
BOOTSTRAP_HELP = "host:port or kafka://host:port (default: STREAM_APP_BROKER_URL)"


def bootstrap_argument(value: str) -> str:
    """A ``--bootstrap`` value in the one broker format (``host:port`` or ``kafka://``)."""
    try:
        return ",".join(broker_hosts(value))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def fraction(value: str) -> float:
    """An ``--eval-fraction``: a number from 0 to 1."""
    try:
        fraction = float(value)
    except ValueError:
        fraction = -1.0
    if not 0.0 <= fraction <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1 (got {value!r})")
    return fraction
