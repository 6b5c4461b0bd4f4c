from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from stream_app.broker.embedded import EmbeddedBroker

if TYPE_CHECKING:
    from tests.test_app import Pipeline


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """One tansu broker for the whole run, on a free loopback port."""
    log = tmp_path_factory.mktemp("broker") / "tansu.log"
    with EmbeddedBroker(log=log) as running:
        yield running


@pytest.fixture
def topics() -> dict[str, str]:
    """Topic names and an app id of this test's own, so tests share the broker safely."""
    run = uuid.uuid4().hex[:8]
    return {
        "STREAM_APP_ID": f"app-{run}",
        "STREAM_APP_TOPIC_MESSAGES": f"messages-{run}",
        "STREAM_APP_TOPIC_DECISIONS": f"decisions-{run}",
        "STREAM_APP_TOPIC_TURNS": f"turns-{run}",
        "STREAM_APP_TOPIC_DLQ": f"dlq-{run}",
        "STREAM_APP_TOPIC_FINAL": f"final-{run}",
    }


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def pipeline(broker: EmbeddedBroker, topics: dict[str, str], workdir: Path) -> Iterator[Pipeline]:
    """Topics of this test's own on the broker, with its readers and workers, closed after."""
    from tests.test_app import Pipeline  # a test module's helper: imported when used

    p = Pipeline(broker, topics, workdir)
    yield p
    p.close()


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the group (loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the embedded broker is slow: it starts workers, waits for groups to
    form and for records to travel, so `-m "not slow"` leaves every one of them out.

    The broker tests run one after another in one xdist group (one broker and one test's
    workers at a time), while the other tests run beside them (`-n auto` in pyproject.toml).
    They go first, so that their line, the longer one, starts at once; a `paced` test, whose
    length a clock sets, first of all: the unit tests beside it cost it work done, not time,
    where they would eat into a timed test's margin.
    """
    for item in items:
        uses_broker = "broker" in getattr(item, "fixturenames", ())
        if uses_broker or item.get_closest_marker("broker") is not None:
            item.add_marker(pytest.mark.broker)
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group("broker"))
    items.sort(
        key=lambda item: (
            item.get_closest_marker("broker") is None,
            item.get_closest_marker("paced") is None,
        )
    )
