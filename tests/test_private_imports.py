"""No module of the project reaches into another distribution's internals: no import of a private
module or name (a dotted path with a part starting with ``_``, or a package its authors keep
internal), and no subclass of a third-party class overriding one of its underscored methods.
Such code breaks on the dependency's next release without a word in its changelog."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OWN = ("models", "edge", "cloud", "router", "dashboard", "loadtest", "edgeroute", "bench", "data", "tests")
SCANNED = OWN[:-1]
# Public-named packages that their distribution documents as internal: uvicorn's API is
# ``uvicorn.run``, ``Config`` and ``Server``.
INTERNAL = ("uvicorn.protocols", "uvicorn.lifespan", "uvicorn.loops", "uvicorn.middleware", "uvicorn.supervisors")
# Known and kept, each for a behaviour the dependency's public API cannot give (issue 46), as
# "where: what" lines exactly as ``findings`` writes them:
KNOWN: list[str] = []


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.endswith("__") for part in dotted.split(".")) or any(
        dotted == p or dotted.startswith(p + ".") for p in INTERNAL
    )


def _third_party(dotted: str) -> bool:
    return dotted.split(".")[0] not in OWN


def _resolve(dotted: str) -> Any:
    """The object a dotted path names, or None when it cannot be imported here."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def findings(source: str, where: str) -> list[str]:
    """What in one module's source reaches into another distribution's internals."""
    tree = ast.parse(source)
    found: list[str] = []
    origin: dict[str, str] = {}  # a name bound by an import -> the third-party path it names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _third_party(alias.name):
                    continue
                if _private(alias.name):
                    found.append(f"{where}: imports {alias.name}")
                origin[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _third_party(node.module):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _private(full):
                    found.append(f"{where}: imports {node.module if _private(node.module) else full}")
                origin[alias.asname or alias.name] = full
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            dotted = ast.unparse(base.value if isinstance(base, ast.Subscript) else base)
            head, _, rest = dotted.partition(".")
            if head not in origin:
                continue
            path = origin[head] + ("." + rest if rest else "")
            methods = [
                item.name for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name.startswith("_") and not item.name.endswith("__")
            ]
            cls = _resolve(path) if methods else None
            for name in methods:
                if cls is None or hasattr(cls, name):
                    found.append(f"{where}: {node.name} overrides {path}.{name}")
    return sorted(set(found))


def test_no_module_reaches_into_another_distributions_internals() -> None:
    found = []
    for package in SCANNED:
        for path in sorted((REPO / package).rglob("*.py")):
            where = path.relative_to(REPO).as_posix()
            found += findings(path.read_text(encoding="utf-8"), where)
    assert sorted(found) == sorted(KNOWN)


def test_the_check_finds_a_planted_import_and_override() -> None:
    planted = '''
import uvicorn.protocols.http.h11_impl
from llama_cpp import _internals
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as P
import threading as th
from pydantic import BaseModel, field_validator
from edge._runtime import Runtime
from ._private import x


class Guarded(P):
    def _arm(self) -> None: ...  # a name of its own: not an override


class Worker(th.Thread):
    def _bootstrap(self) -> None: ...


class Body(BaseModel):
    @field_validator("x")
    def _check(cls, v): ...  # pydantic's way: a validator of its own, not an override
'''
    assert findings(planted, "x.py") == [
        "x.py: Worker overrides threading.Thread._bootstrap",
        "x.py: imports llama_cpp._internals",
        "x.py: imports uvicorn.protocols.http.h11_impl",
        "x.py: imports uvicorn.protocols.http.httptools_impl",
    ]
