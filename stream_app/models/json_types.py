"""JSON value types with JSON Schema's meaning rather than Python's.

JSON Schema calls ``2.0`` an integer and ``true`` not one; pydantic's strict ``int`` says the
opposite of the first. Inputs are checked with these so that the models accept exactly what
the published schemas accept.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from stream_app.models.timestamps import check_datetime


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[int, BeforeValidator(_integral)]
DateTimeStr = Annotated[str, AfterValidator(check_datetime)]
