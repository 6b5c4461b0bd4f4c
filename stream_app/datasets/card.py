"""The dataset card of a folder: YAML configs and features, then what the set is."""

from __future__ import annotations

import hashlib
import shlex

import orjson

from stream_app.datasets.features import features, yaml_features
from stream_app.datasets.layout import SPLIT_NAMES
from stream_app.datasets.manifest import Manifest
from stream_app.datasets.options import Options, Split
from stream_app.datasets.preferences import MAX_PAIRS
from stream_app.datasets.writers import SplitFiles


def data_sha256(manifest: Manifest) -> str:
    """The SHA-256 of the data files' ``sha256sum`` lines, by name: what ``cd DIR &&
    sha256sum data/* | sha256sum`` prints. Any change of a row changes it."""
    data = sorted((f["name"], f["sha256"]) for f in manifest["files"] if f["role"] == "data")
    listing = "".join(f"{sha}  {name}\n" for name, sha in data)
    return hashlib.sha256(listing.encode()).hexdigest()


def card(manifest: Manifest, options: Options, ext: str, outs: dict[Split, SplitFiles]) -> str:
    """The dataset card: YAML ``configs`` naming the splits written and ``dataset_info``
    features (JSON is YAML), then what the set is, where it came from and how it was split.

    HF ``datasets`` keys its cache of a local folder by a hash of this YAML (the configs, their
    ``data_files`` as patterns, and ``dataset_info``), never by the files: so the YAML says
    what the data is, each split's rows (``dataset_info.splits``, which HF checks once it has
    read them), the data's bytes (``download_size``) and the data files' SHA-256 (the
    config's ``description``). A folder exported again with other rows, or the same counts
    drawn otherwise, is read anew; the same data again is HF's cache of it."""
    written = [t for t in outs.values() if t.writer is not None]
    files = [
        {"split": SPLIT_NAMES[t.split], "path": f"data/{SPLIT_NAMES[t.split]}-*.{ext}"}
        for t in written
    ]
    digest = data_sha256(manifest)
    configs = [
        {
            "config_name": "default",
            "data_files": files,
            "description": f"stream-app {manifest['format']} dataset; data files' SHA-256 "
            f"(sha256sum data/* | sha256sum): {digest}",
        }
    ]
    info = {
        "features": yaml_features(features(options)),
        "splits": [{"name": SPLIT_NAMES[t.split], "num_examples": t.records} for t in written],
        "download_size": sum(f["bytes"] for f in manifest["files"] if f["role"] == "data"),
    }
    front = (
        "---\nconfigs: "
        + orjson.dumps(configs).decode()
        + "\ndataset_info: "
        + orjson.dumps(info).decode()
        + "\n---\n"
    )
    profile = manifest["profile"]
    encoding = {
        "openai": "tool arguments are JSON text (OpenAI's encoding); tool results are text",
        "trl": "tool arguments are JSON objects (TRL's encoding); tool results are text",
        None: "a Turn is a JSON object (HF `Json`)",
    }[profile]
    prov = manifest["provenance"]
    lines = [
        f"# stream-app {manifest['format']} dataset",
        "",
        f"- Format: `{manifest['format']}`"
        + (f", profile `{profile}`" if profile else "")
        + f"; {encoding}.",
        f"- Input: {manifest['source']} ({orjson.dumps(prov['input']).decode()}).",
        f"- Made by stream-app {prov['stream_app_version']}: `{shlex.join(prov['command'])}`.",
        f"- Split by {manifest['split']['by']}: {manifest['split']['rule']} (eval_fraction "
        f"{manifest['split']['eval_fraction']}); "
        + (f"salt `{salt}`" if (salt := manifest["split"]["salt"]) else "no salt")
        + " (`--split-salt` draws another split).",
        "- Records: "
        + ", ".join(f"{k} {v}" for k, v in manifest["split"]["records"].items())
        + "."
        + "".join(
            f" The {k} split is empty and not written: {v}."
            for k, v in manifest["split"]["empty"].items()
        ),
        f"- Prompts in both splits: {manifest['shared_prompts']}.",
        f"- Credentials redacted: {manifest['redacted']}"
        + (" (redaction off: --keep-credentials)." if options.keep_credentials else "."),
        "- Turns skipped: "
        + (", ".join(f"{k} {v}" for k, v in manifest["skipped"].items() if v) or "none")
        + ".",
    ]
    if options.format == "dpo":
        lines.append(f"- At most {MAX_PAIRS} pairs a prompt.")
    if options.format in ("chat", "kto", "dpo"):
        lines.append(
            "- `metadata/` holds one line per row of `data/`, in the same order (session, "
            "turn, decisions counted explicit and implicit apart, retention score)."
        )
    lines.append(
        f"- Data files' SHA-256 (`sha256sum data/* | sha256sum`): `{digest}`; in the YAML with "
        "each split's rows, so `load_dataset` reads a folder exported again anew rather than "
        "from the cache of the old data."
    )
    lines.append("- `manifest.json`: every file with its SHA-256.")
    return front + "\n".join(lines) + "\n"
