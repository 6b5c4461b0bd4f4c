"""JSON value types with JSON Schema's meaning rather than Python's.

JSON Schema calls ``2.0`` an integer and ``true`` not one; pydantic's strict ``int`` says the
opposite of the first. Inputs are checked with these so that the models accept exactly what
the published schemas accept.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, JsonValue, SkipValidation

from stream_app.models.timestamps import check_datetime


def _integral(value: object) -> object:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_integral)]
DateTimeStr = Annotated[str, AfterValidator(check_datetime)]

# A JSON value whose shape is the producer's (a decision's ``raw``, tool arguments and
# results): pydantic's recursive alias, which mypy and pydantic both read.
Json = JsonValue
JsonObject = dict[str, Json]
# ``Json`` in a model field: the value was parsed from JSON, so it can hold nothing else,
# and walking it to check would cost time in proportion to its size for no answer.
ParsedJson = Annotated[Json, SkipValidation]
