"""ruff and mypy hold for the whole tree, in CI as on a laptop (mypy: the package and
the benchmark, which imports its internals); the package's parts import each other in one
direction and name each class once."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [["ruff", "check", "."], ["ruff", "format", "--check", "."], ["mypy", "stream_app", "bench"]],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_tool_is_clean(command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


PACKAGE = ROOT / "stream_app"


def _modules() -> dict[str, ast.Module]:
    """Every module of the package by dotted name, parsed."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = ast.parse(path.read_text(), str(path))
    return found


def _unit(module: str) -> str:
    """What an import cycle is counted between: a subpackage of ``stream_app`` as a whole,
    or a module at its top."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return module


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """The import nodes under ``if TYPE_CHECKING:``, which never run."""
    skipped: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(ast.walk(child))
    return skipped


def _imports(tree: ast.Module, modules: set[str]) -> set[str]:
    """The package's modules ``tree`` imports at run time, wherever the import statement is
    (a function's own imports count: they run too)."""
    skipped = _type_checking_only(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name in modules}


def test_no_two_packages_import_each_other() -> None:
    """A subpackage (or a module at the top) that imports another which imports it back is
    one unit in two places: neither can be read, tested or changed alone."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, tree in modules.items():
        graph.setdefault(_unit(name), set()).update(
            _unit(target) for target in _imports(tree, set(modules)) if _unit(target) != _unit(name)
        )
    cycles = sorted(
        f"{a} <-> {b}" for a in graph for b in graph[a] if a < b and a in graph.get(b, set())
    )
    assert not cycles, "packages that import each other: " + ", ".join(cycles)


# What each room may import (docs/internals.md's map): rooms below it, never above.
# ``stream_app`` itself (``release()``) is every room's.
ROOMS_IMPORT = {
    "models": set(),
    "core": {"models"},
    "config": {"core"},
    "console": set(),
    "observability": {"core", "models"},
    "runtime": set(),
    "broker": {"config", "runtime"},
    "state": {"core", "models", "observability", "runtime", "broker"},
    "checkpointing": {"core", "observability", "runtime", "state"},
    "ingest": {"core", "models", "config", "broker", "console"},
    "datasets": {"core", "models", "config", "broker", "console"},
    "worker": {
        "core",
        "models",
        "config",
        "observability",
        "runtime",
        "broker",
        "state",
        "checkpointing",
        "ingest",
    },
}
ROOMS_IMPORT["app"] = ROOMS_IMPORT["worker"] | {"worker"}  # the Faust page over the worker


def test_each_room_imports_only_the_rooms_below_it() -> None:
    """The rooms form layers: a room that reaches up (the core into ``state``, ``state``
    into the worker) is a change of design, made here and in internals.md first. ``cli``,
    the top, may import any room."""
    modules = _modules()
    reaching: list[str] = []
    for name, tree in modules.items():
        room = _unit(name).removeprefix("stream_app.")
        if room not in ROOMS_IMPORT:
            assert room in {"stream_app", "cli", "__main__"}, f"{room}: a room not in the map"
            continue
        for target in _imports(tree, set(modules)):
            other = _unit(target).removeprefix("stream_app.")
            if other not in (room, "stream_app") and other not in ROOMS_IMPORT[room]:
                reaching.append(f"{name} imports {target}")
    assert not reaching, "imports against the rooms' layers: " + "; ".join(reaching)


def test_no_duplicate_class_names() -> None:
    """One name, one class: a reader (or a grep) that finds a name finds the class."""
    where: dict[str, list[str]] = {}
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(name)
    duplicates = {name: places for name, places in where.items() if len(places) > 1}
    assert not duplicates, f"class names defined more than once: {duplicates}"


def test_recovery_protocol_matches_the_consumer() -> None:
    """``state/recovery.py`` names the consumer's methods in a protocol instead of
    importing ``checkpointing/``: the consumer must still have them, in the same form."""
    from stream_app.checkpointing.consumer import Consumer
    from stream_app.state.recovery import ResumingConsumer

    for name in ("read_again_from_expected", "read_again", "streams_resumed"):
        wanted, found = getattr(ResumingConsumer, name), getattr(Consumer, name, None)
        assert found is not None, f"Consumer has no {name}"
        assert inspect.iscoroutinefunction(found) == inspect.iscoroutinefunction(wanted), name
        arity = [len(inspect.signature(f).parameters) for f in (wanted, found)]
        assert arity[0] == arity[1], f"Consumer.{name} takes other arguments than recovery's"


def test_the_top_of_the_package_is_its_entry_points() -> None:
    """A module belongs in a room (``ROOMS_IMPORT``); the top keeps the entry points only:
    the package, ``python -m stream_app``, the settings and the Faust page (``faust -A
    stream_app.app worker``)."""
    top = {path.name for path in PACKAGE.glob("*.py")}
    assert top == {"__init__.py", "__main__.py", "config.py", "app.py"}


# Types say what they hold: JSON values are ``models/json_types.Json``,
# and ``Any`` stays at the edges (Faust's, aiohttp's and RocksDB's untyped forwarding). The
# word is counted wherever it is, comments and docstrings too, as a grep counts it.
ANY_LIMIT = 30
DICT_OF_ANY_LIMIT = 5


def test_any_is_kept_to_the_edges() -> None:
    words = dicts = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        words += len(re.findall(r"\bAny\b", text))
        dicts += text.count("dict[str, Any]")
    assert words <= ANY_LIMIT, f"{words} Any in stream_app/"
    assert dicts <= DICT_OF_ANY_LIMIT, f"{dicts} dict[str, Any] in stream_app/"
