"""Tenant binding (SPEC §3): one deployment serves one org, compared in normalized form."""

from __future__ import annotations

import unicodedata


def normalize_org(org_id: str) -> str:
    return unicodedata.normalize("NFKC", org_id).strip().lower()
