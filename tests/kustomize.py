"""The Kubernetes manifests as ``kubectl kustomize`` builds them, for the tests that read a
kustomization's output (skipped where kubectl is not installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

needs_kubectl = pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="kubectl (for kustomize) not installed"
)


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """The documents ``kubectl kustomize directory`` builds; the build must succeed."""
    done = subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return list(yaml.safe_load_all(done.stdout))
