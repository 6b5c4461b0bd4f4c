"""The test suite's own layout (tests/conftest.py): the broker tests in one xdist group, so
one broker and one test's workers run at a time, whatever pytest and xdist resolve to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFTEST = """
import pytest
from tests.conftest import pytest_collection_modifyitems  # the suite's own rule

@pytest.fixture
def broker():
    return None
"""

TESTS = """
import os, time, pytest

@pytest.mark.parametrize("n", range(6))
def test_with_a_broker(broker, n):
    time.sleep(0.2)
    print("ran-on", os.environ["PYTEST_XDIST_WORKER"])

@pytest.mark.parametrize("n", range(6))
def test_without(n):
    time.sleep(0.2)
"""


def test_the_broker_tests_run_on_one_xdist_worker(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_probe.py").write_text(TESTS)
    xdist = ["-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-rA", "-q"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *xdist, str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    workers = {line.split()[-1] for line in done.stdout.splitlines() if "ran-on" in line}
    assert len(workers) == 1, f"the broker tests ran on {sorted(workers)}"
