"""Field names a producer got wrong, named with the field they most likely meant.

A decision with a field outside the contract is a ``schema`` dead letter; its error names
the unknown field first, since a misspelt field also makes the right one "missing". A message
event may carry fields the contract does not know (they are ignored, SPEC §2), but one that is
a near miss of a contract field (``finsihReason``) silently changes what the message does: no
turn is closed. Those are warnings for the tools a person runs (publish, replay).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from pydantic import ValidationError

from stream_app.models.json_types import Json

# The chat API's Message fields (SPEC §2, the seed's Message page) and the event around it.
MESSAGE_FIELDS = (
    "role",
    "content",
    "toolCalls",
    "name",
    "timestamp",
    "messageId",
    "annotations",
    "sequence",
    "generatedBy",
    "usage",
    "model",
    "generationContext",
    "clientContext",
    "feedback",
    "sourceUserMessageId",
    "finishReason",
)
EVENT_FIELDS = ("eventId", "conversationId", "orgId", "publishedAt", "message")

# The contract's names for the models' own (the error speaks to a producer).
_CONTRACT_NAMES = {"DecisionPayload": "DeveloperDecision"}
_CUTOFF = 0.75  # difflib's ratio: a swapped or dropped letter in a name of 8+ letters passes


def unknown(name: str, where: str, candidates: Iterable[str]) -> str:
    """``name is not a field of WHERE``, with the closest candidate when one is close."""
    said = f"{name} is not a field of {where}"
    by_case = {c.lower(): c for c in candidates}
    match = by_case.get(name.lower()) or next(
        iter(difflib.get_close_matches(name, list(by_case.values()), n=1, cutoff=_CUTOFF)), None
    )
    return f"{said}; did you mean {match}?" if match else said


def describe(exc: ValidationError) -> str:
    """The first problem, with the path of the field it is about; an unknown field first,
    suggesting the missing field of the same object it most likely stands for."""
    errors = exc.errors(include_url=False)
    extra = [e for e in errors if e["type"] == "extra_forbidden"]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    if extra:
        loc = extra[0]["loc"]
        parent = loc[:-1]
        missing = [
            str(e["loc"][-1]) for e in errors if e["type"] == "missing" and e["loc"][:-1] == parent
        ]
        owner = ".".join(str(p) for p in parent) or _CONTRACT_NAMES.get(exc.title, exc.title)
        return unknown(str(loc[-1]), owner, missing) + more
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "(record)"
    return f"{where}: {first['msg']}{more}"


def near_misses(doc: Json) -> list[str]:
    """Warnings for a message event's fields that are not the contract's but are close to
    one of its fields (exact unknown names that resemble nothing are ignored, as SPEC §2 says)."""
    if not isinstance(doc, dict):
        return []
    found = _near(doc, EVENT_FIELDS, "LLMMessagePublishedEvent")
    message = doc.get("message")
    if isinstance(message, dict):
        found += _near(message, MESSAGE_FIELDS, "Message")
    return found


def _near(fields: dict[str, Json], known: Sequence[str], where: str) -> list[str]:
    found = []
    for name in fields.keys() - set(known):
        said = unknown(name, where, known)
        if "did you mean" in said:
            found.append(said)
    return sorted(found)
