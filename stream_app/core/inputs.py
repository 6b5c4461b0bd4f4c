"""The input kinds: what the worker reads, listed once.

Every part of the app that deals with inputs by kind reads this registry and names no kind
of its own: the worker's topics and routing (``app.py``, ``worker.Routing``), intake's
dispatch (``core/intake.decode``), a replay line's ``topic`` (``ingest/lines.py``), what
``publish`` and ``replay`` count and say, the topics ``dev`` creates and shows.

An entry is:

- ``name``: the kind as a replay or publish line names it (its ``"topic"``) and as
  ``SourceRecord.kind`` carries it;
- ``setting``: the field of ``Settings`` that names its topic (``STREAM_APP_<SETTING>``);
- ``decode``: its record's JSON to the core's session input (``core/decoders.py``), which
  carries its dead-letter origin: the record as a later dead letter writes it, redacted as
  the kind requires (``records.Origin``). A record refused at intake carries its bytes as
  they came; ``decode`` raises (``decoders.InputRejected``, a model's ``ValidationError``,
  ``limits.LimitExceeded``) for that;
- ``noun``: one record of it in a summary line (``3 messages``), and ``read``, the count of
  its records read (replay's, ``records:<name>``).

A third input is one entry here, its decoder, and its topic's field in ``config.Settings``
(a setting is declared with its default and its documentation there). The order here is
the order of every list of topics and counts the app shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from stream_app.core import decoders
from stream_app.core.counts import Count
from stream_app.core.policy import Policy
from stream_app.core.records import SessionInput, SourceRecord
from stream_app.models.json_types import Json

# A record's value as parsed, the record, the step's counts, the deployment's knobs.
Decoder = Callable[[Json, SourceRecord, Counter[Count], Policy], SessionInput]


@dataclass(frozen=True, slots=True)
class InputKind:
    name: str
    setting: str
    decode: Decoder
    noun: str
    read: str = field(init=False)  # replay's count of its records read

    def __post_init__(self) -> None:
        object.__setattr__(self, "read", f"records:{self.name}")

    @property
    def variable(self) -> str:
        """The environment variable of its topic."""
        return f"STREAM_APP_{self.setting.upper()}"


MESSAGES = InputKind("messages", "topic_messages", decoders.decode_message, "message")
DECISIONS = InputKind("decisions", "topic_decisions", decoders.decode_decision, "decision")

# By name, in order. A part of the app that must name one kind (a record it makes of that
# kind: telemetry translated into decisions) takes its constant above, never its name.
INPUTS: dict[str, InputKind] = {kind.name: kind for kind in (MESSAGES, DECISIONS)}


def names() -> str:
    """The kinds' names as a line may give them: ``"messages"|"decisions"``."""
    return "|".join(f'"{name}"' for name in INPUTS)
