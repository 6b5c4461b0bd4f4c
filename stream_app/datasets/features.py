"""One schema for JSON lines and Parquet: each format's columns, as a card and as Arrow
declare them."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import orjson

from stream_app.datasets.options import Options, Profile
from stream_app.datasets.record_types import Record
from stream_app.models.json_types import Json, JsonObject

if TYPE_CHECKING:
    import pyarrow as pa

# "string" | "int64" | "bool" | "json" | [item] | {field: feature}
Feature = str | list["Feature"] | dict[str, "Feature"]
_TOOL: Feature = {"type": "string", "function": {"name": "string", "parameters": "json"}}


def _message(options: Options, profile: Profile, weight: bool) -> dict[str, Feature]:
    arguments = "string" if profile == "openai" else "json"
    call: Feature = {
        "id": "string",
        "type": "string",
        "function": {"name": "string", "arguments": arguments},
    }
    fields: dict[str, Feature] = {"role": "string", "content": "string"}
    if options.reasoning:
        fields["reasoning_content"] = "string"
    fields |= {"tool_calls": [call], "tool_call_id": "string"}
    if weight:
        fields["weight"] = "int64"
    return fields


def features(options: Options) -> dict[str, Feature]:
    """The columns of a format and profile, for both encodings."""
    profile = options.chosen_profile
    if options.format == "turns":
        return {"key": "string", "value": "json"}
    if options.format == "trajectories":
        return {"session_id": "string", "org_id": "string", "turns": ["json"]}
    if options.format == "chat":
        message = _message(options, profile, profile == "openai")
        return {"messages": [message], "tools": [_TOOL]}
    message = _message(options, profile, False)
    if options.format == "kto":
        return {"prompt": [message], "completion": [message], "label": "bool"}
    if profile == "trl":
        return {"prompt": [message], "chosen": [message], "rejected": [message]}
    return {
        "input": {"messages": [message], "tools": [_TOOL]},
        "preferred_output": [message],
        "non_preferred_output": [message],
    }


def yaml_features(tree: dict[str, Feature]) -> list[JsonObject]:
    """``dataset_info.features`` of a card, as HF writes them."""

    def spec(feature: Feature) -> JsonObject:
        if isinstance(feature, str):
            return {"dtype": feature}
        if isinstance(feature, list):
            inner = spec(feature[0])
            return {"list": inner.get("dtype", inner.get("struct"))}
        return {"struct": [{"name": n, **spec(f)} for n, f in feature.items()]}

    return [{"name": name, **spec(feature)} for name, feature in tree.items()]


def hf_features(tree: dict[str, Feature]) -> JsonObject:
    """The features as HF's ``Features.to_dict`` spells them (Parquet schema metadata)."""

    def spec(feature: Feature) -> Json:
        if feature == "json":
            return {"_type": "Json"}
        if isinstance(feature, str):
            return {"dtype": feature, "_type": "Value"}
        if isinstance(feature, list):
            return {"feature": spec(feature[0]), "_type": "List"}
        return {n: spec(f) for n, f in feature.items()}

    return {name: spec(feature) for name, feature in tree.items()}


def parquet_schema(options: Options) -> pa.Schema:
    """The Arrow schema of :func:`features`: free-form JSON as its text, HF's ``Json``."""
    import pyarrow as pa

    def arrow(feature: Feature) -> pa.DataType:
        if isinstance(feature, str):
            return {"json": pa.string(), "string": pa.string(), "bool": pa.bool_()}.get(
                feature, pa.int64() if feature == "int64" else pa.float64()
            )
        if isinstance(feature, list):
            return pa.list_(arrow(feature[0]))
        return pa.struct([(n, arrow(f)) for n, f in feature.items()])

    tree = features(options)
    meta = {"huggingface": orjson.dumps({"info": {"features": hf_features(tree)}})}
    return pa.schema([(n, arrow(f)) for n, f in tree.items()], metadata=meta)


def _column(feature: Feature, value: Json) -> Json:
    if value is None:
        return None
    if feature == "json":
        return orjson.dumps(value).decode()
    if isinstance(feature, list) and isinstance(value, list):
        return [_column(feature[0], v) for v in value]
    if isinstance(feature, dict) and isinstance(value, dict):
        return {n: _column(f, value.get(n)) for n, f in feature.items()}
    return value


def parquet_row(tree: dict[str, Feature], record: Record) -> JsonObject:
    """A record as a row of the columns of ``tree``: absent fields null, JSON as text."""
    fields = cast(JsonObject, record)
    return {n: _column(f, fields.get(n)) for n, f in tree.items()}
