"""What an export is asked for: the format, the profile, the split, the limits (SPEC §9)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Format = Literal["turns", "chat", "trajectories", "kto", "dpo"]
FORMATS: tuple[Format, ...] = ("turns", "chat", "trajectories", "kto", "dpo")
Profile = Literal["openai", "trl"]
PROFILES: tuple[Profile, ...] = ("openai", "trl")
Split = Literal["all", "train", "eval"]
MAX_EXAMPLE_BYTES = 16 * 1024 * 1024  # --max-example-bytes' default
# --shard-bytes' default: a folder's split gets another shard past this many bytes of JSON
# lines (HF's own push_to_hub shards at 500 MB)
SHARD_BYTES = 500 * 1000 * 1000


@dataclass(frozen=True, slots=True)
class Options:
    format: Format = "turns"
    reasoning: bool = False  # chat: keep reasoning parts as reasoning_content
    only_accepted: bool = False  # chat: only turns a developer explicitly accepted
    eval_fraction: float | None = None  # None: one file, no split
    org_id: str = "default"  # trajectories of sessions whose turns carry no decision
    profile: Profile | None = None  # None: openai for chat, trl for kto and dpo
    include_implicit: bool = False  # kto, dpo: implicit decisions as verdicts too
    keep_credentials: bool = False  # False: content redacted as the worker redacts
    max_example_bytes: int = MAX_EXAMPLE_BYTES
    split_salt: str = ""  # "": the split of SPEC §9 (a hash of the key alone)
    shard_bytes: int = SHARD_BYTES  # a folder: a new shard of a split past this many bytes

    @property
    def chosen_profile(self) -> Profile:
        if self.profile is not None:
            return self.profile
        return "openai" if self.format == "chat" else "trl"
