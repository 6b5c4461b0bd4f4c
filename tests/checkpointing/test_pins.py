"""The private names of Faust and aiokafka the project relies on (``checkpointing/pins.py``).

A Faust release that renames ``_new_offset`` leaves the override in place and unused, and
commits go back to Faust's bookkeeping without a single error. These tests fail instead,
naming the pin: when the installed version lacks it, or its signature, its kind or its
value's type differs, or other Faust code starts calling a method the project replaced;
and when ``stream_app/`` uses a private name of those packages that no pin lists.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import faust
import pytest
from faust.types import TP

import stream_app
from stream_app.checkpointing.pins import PINNED_PACKAGES, PINS, Pin, signature

SOURCE = Path(stream_app.__file__).parent
SELF = "stream_app.checkpointing.pins"  # names the pins in strings only


def resolve(path: str) -> Any:
    """The object an import path names: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(path)


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def pinned_package(path: str) -> bool:
    return path.split(".")[0] in PINNED_PACKAGES


@cache
def source_of(klass: type) -> str:
    try:
        return inspect.getsource(klass)
    except (OSError, TypeError):  # built in, or no source installed
        return ""


def defined_by(klass: type, name: str) -> type | None:
    """The class of ``klass``'s MRO that defines ``name``: as a method or class attribute,
    an annotation, or an attribute its code assigns (``self.name = ...``)."""
    assigned = re.compile(rf"self\.{re.escape(name)}\b\s*(:[^=\n]+)?=(?!=)")
    for each in klass.__mro__:
        own = vars(each)
        if name in own or name in own.get("__annotations__", {}):
            return each
        if assigned.search(source_of(each)):
            return each
    return None


# -- The installed versions against the pins -------------------------------------------


def instances() -> dict[str, Callable[[Path], Any]]:
    """An instance of each owner of a pinned value, as Faust builds it (no broker)."""

    def app(tmp_path: Path, store: str = "memory://") -> faust.App:
        return faust.App(
            "test-pins", broker="kafka://127.0.0.1:9", store=store, datadir=str(tmp_path)
        )

    def aiokafka_consumer(tmp_path: Path) -> Any:
        from aiokafka import AIOKafkaConsumer

        async def made() -> Any:
            consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:9")
            await consumer.stop()  # never started: nothing to close but the object
            return consumer

        return asyncio.run(made())

    def aiohttp_server(tmp_path: Path) -> Any:
        from aiohttp import web

        async def handler(request: web.BaseRequest) -> web.StreamResponse:
            return web.Response()

        async def made() -> Any:
            return web.Server(handler, keepalive_timeout=5)

        return asyncio.run(made())

    return {
        "faust.transport.consumer.Consumer": lambda tmp_path: app(tmp_path).consumer,
        "faust.tables.manager.TableManager": lambda tmp_path: app(tmp_path).tables,
        "faust.stores.memory.Store": lambda tmp_path: app(tmp_path).Table("t").data,
        "faust.stores.rocksdb.Store": (
            lambda tmp_path: app(tmp_path, "rocksdb://").Table("t").data
        ),
        "aiokafka.AIOKafkaConsumer": aiokafka_consumer,
        "faust.web.drivers.aiohttp.Web": lambda tmp_path: app(tmp_path).web,
        "aiohttp.web_server.Server": aiohttp_server,
    }


@pytest.mark.parametrize("pin", PINS, ids=[f"{pin.owner}.{pin.name}" for pin in PINS])
def test_a_pinned_name_is_as_the_project_relies_on(pin: Pin, tmp_path: Path) -> None:
    where = f"{pin.owner}.{pin.name}"
    try:
        owner = resolve(pin.owner)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"{where}: the installed version has no {pin.owner} ({exc})")
    assert defined_by(owner, pin.name) is not None, f"{where}: the installed version lacks it"
    if pin.kind == "attribute":
        build = instances().get(pin.owner)
        assert build is not None, f"{where}: no instance to check it on (tests' instances())"
        value = getattr(build(tmp_path), pin.name)
        kind, _, item = pin.shape.partition("[")
        assert type(value).__name__ == kind, f"{where}: a {type(value).__name__}, not {kind}"
        if item:
            got = type(value[TP("t", 0)]).__name__
            assert got == item[:-1], f"{where}: holds {got}, not {item[:-1]}"
    else:
        method = inspect.getattr_static(owner, pin.name)
        assert callable(method), f"{where}: no longer a method"
        coroutine = inspect.iscoroutinefunction(method)
        assert coroutine == (pin.kind == "coroutine"), f"{where}: async is now {coroutine}"
        assert signature(method) == pin.shape, f"{where}: now {signature(method)}"
    if pin.callers is not None:
        callers = references(pin.owner.split(".")[0], pin.name, owner)
        assert callers == set(pin.callers), f"{where}: referred to by {sorted(callers)}"


@cache
def package_sources(package: str) -> tuple[tuple[str, ast.Module], ...]:
    root = Path(importlib.import_module(package).__file__ or "").parent
    found = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        found.append((module.removesuffix(".__init__"), ast.parse(path.read_text())))
    return tuple(found)


def references(package: str, name: str, owner: type) -> set[str]:
    """The functions of ``package`` that refer to ``.name`` (calls and passings alike) of
    ``owner``: on any object but ``self``, or on ``self`` in a class related to ``owner``
    (a class of its own that happens to use the name is another method)."""
    found: set[str] = set()

    def related(scope: list[str]) -> bool:
        for cut in range(len(scope), 0, -1):  # the innermost class of the scope
            try:
                klass = resolve(".".join(scope[:cut]))
            except (ImportError, AttributeError):
                continue
            if isinstance(klass, type):
                return issubclass(klass, owner) or issubclass(owner, klass)
        return True  # not known to be unrelated

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, [*scope, child.name])
                continue
            if (
                isinstance(child, ast.Attribute)
                and child.attr == name
                and (not on_self(child.value) or related(scope))
            ):
                found.add(".".join(scope))
            visit(child, scope)

    for module, tree in package_sources(package):
        visit(tree, [module])
    return found


# -- stream_app/ against the pins ------------------------------------------------------


@dataclass
class Class:
    module: str
    name: str
    bases: list[str]  # import paths, as far as they resolve
    names: set[str] = field(default_factory=set)  # private names defined or used on self


@dataclass
class Source:
    """What stream_app/ names: its classes, and private names read on other objects."""

    classes: dict[str, Class] = field(default_factory=dict)  # by import path
    elsewhere: list[tuple[str, str]] = field(default_factory=list)  # (module, name)
    imported: list[tuple[str, str]] = field(default_factory=list)  # (module, path)


def stream_app_modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(SOURCE.rglob("*.py")):
        module = ".".join(path.relative_to(SOURCE.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        if module != SELF:
            yield module, ast.parse(path.read_text())


def on_self(node: ast.expr) -> bool:
    """``self.x``, ``cls.x`` or ``super().x``."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (node.func.id == "super")
    )


def read_source(modules: Iterable[tuple[str, ast.Module]]) -> Source:
    source = Source()
    for module, tree in modules:
        read_module(source, module, tree)
    return source


def read_module(source: Source, module: str, tree: ast.Module) -> None:
    imports: dict[str, str] = {}  # a name in the module -> the import path it stands for
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                imports[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                imports[alias.asname or alias.name] = f"{base}.{alias.name}"
                if private(alias.name) and pinned_package(base):
                    source.imported.append((module, f"{base}.{alias.name}"))
    local = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}

    def path_of(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Subscript):  # Table[bytes, bytes]
            return path_of(expr.value)
        if isinstance(expr, ast.Name):
            return f"{module}.{expr.id}" if expr.id in local else imports.get(expr.id)
        if isinstance(expr, ast.Attribute):
            head = path_of(expr.value)
            return None if head is None else f"{head}.{expr.attr}"
        return None

    on_classes: set[int] = set()  # the attributes read on self, by node
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        found = Class(module, node.name, [p for b in node.bases if (p := path_of(b))])
        source.classes[f"{module}.{node.name}"] = found
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                targets = [item.name]
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                targets = [item.target.id]
            elif isinstance(item, ast.Assign):
                targets = [t.id for t in item.targets if isinstance(t, ast.Name)]
            else:
                targets = []
            found.names.update(t for t in targets if private(t))
        for inner in ast.walk(node):
            if isinstance(inner, ast.Attribute) and private(inner.attr) and on_self(inner.value):
                found.names.add(inner.attr)
                on_classes.add(id(inner))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and private(node.attr)
            and id(node) not in on_classes
            and not on_self(node.value)
        ):
            source.elsewhere.append((module, node.attr))


def third_party_bases(source: Source, klass: Class) -> list[type]:
    """The classes of the pinned packages ``klass`` derives from, through its own."""
    found: list[type] = []
    for base in klass.bases:
        if base in source.classes:
            found += third_party_bases(source, source.classes[base])
        elif pinned_package(base):
            found.append(resolve(base))
    return found


def lineage(source: Source, klass: Class) -> Iterator[Class]:
    """``klass`` and the classes of stream_app it derives from (mixins included)."""
    yield klass
    for base in klass.bases:
        if base in source.classes:
            yield from lineage(source, source.classes[base])


@dataclass
class Uses:
    of: dict[Pin, set[str]] = field(default_factory=lambda: defaultdict(set))  # -> modules
    unpinned: list[str] = field(default_factory=list)


@cache
def uses() -> Uses:
    source = read_source(stream_app_modules())
    found = Uses()
    own: set[str] = set()  # private names of stream_app's own (none of Faust's)
    for klass in source.classes.values():
        bases = third_party_bases(source, klass)
        for each in lineage(source, klass):
            for name in sorted(each.names):
                definers = [d for base in bases if (d := defined_by(base, name)) is not None]
                if not definers:
                    own.add(name)
                    continue
                pins = [
                    pin
                    for pin in PINS
                    if pin.name == name and any(issubclass(b, resolve(pin.owner)) for b in bases)
                ]
                for pin in pins:
                    found.of[pin].add(each.module)
                if not pins:
                    owner = definers[0]
                    found.unpinned.append(
                        f"{each.module}.{klass.name} uses {name} of "
                        f"{owner.__module__}.{owner.__qualname__}"
                    )
    for module, name in source.elsewhere:
        pins = [pin for pin in PINS if pin.name == name]
        for pin in pins:
            found.of[pin].add(module)
        if not pins and name not in own:
            found.unpinned.append(f"{module} reads .{name} of an object not its own")
    for module, path in source.imported:
        found.unpinned.append(f"{module} imports {path}")
    return found


def test_every_private_name_of_faust_or_aiokafka_in_stream_app_is_pinned() -> None:
    assert uses().unpinned == [], "add a Pin to stream_app/checkpointing/pins.py for each"


@pytest.mark.parametrize("pin", PINS, ids=[f"{pin.owner}.{pin.name}" for pin in PINS])
def test_a_pin_names_the_modules_that_use_it(pin: Pin) -> None:
    # A pin nobody uses any more is a check of nothing; a new module using it is a new
    # place for the reader of that pin to look.
    assert sorted(uses().of.get(pin, set())) == sorted(pin.where)


def test_the_scan_sees_an_unpinned_override_and_a_read_of_faust_internals() -> None:
    # The check above passes if it finds nothing; it must find what a new use looks like.
    tree = ast.parse(
        "from faust.transport.drivers import aiokafka as fa\n"
        "class C(fa.Consumer):\n"
        "    def _on_message_in(self, tp, offset, message): ...\n"
        "    def _mine(self): return self._waiting_for_ack\n"
        "def f(consumer): return consumer._commit_fut\n"
    )
    source = read_source([("stream_app.example", tree)])
    klass = source.classes["stream_app.example.C"]
    assert klass.names == {"_on_message_in", "_mine", "_waiting_for_ack"}
    bases = third_party_bases(source, klass)
    assert [n for n in sorted(klass.names) if any(defined_by(b, n) for b in bases)] == [
        "_on_message_in",
        "_waiting_for_ack",
    ]
    assert source.elsewhere == [("stream_app.example", "_commit_fut")]
