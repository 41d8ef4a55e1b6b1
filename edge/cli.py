"""`edgeroute cache ...` commands (``calibrate`` and ``train-verifier`` are :mod:`router.training.cli`'s,
added to ``cache_app`` where the command line is assembled)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from models import EdgerouteError, default_data_dir

from .config import CacheSettings

if TYPE_CHECKING:
    from .cache.store import CacheStore

cache_app = typer.Typer(help="The edge's SQLite-vector cache.", no_args_is_help=True)

DbOpt = Annotated[Optional[Path], typer.Option("--db", help="the cache file [default: <data_dir>/cache.db]")]
DataDirOpt = Annotated[Optional[Path], typer.Option("--data-dir", help="data directory")]
PairsOpt = Annotated[Path, typer.Option("--pairs", help="QQP JSONL of {a, b, duplicate}", exists=True, dir_okay=False)]


def _db_path(db: Path | None, data_dir: Path | None) -> Path:
    """--db, else EDGEROUTE_CACHE__PATH, else <data dir>/cache.db (same default as the node)."""
    if db is not None:
        return db
    if os.environ.get("EDGEROUTE_CACHE__PATH"):
        return Path(os.environ["EDGEROUTE_CACHE__PATH"])
    return CacheSettings().db_path(_data_dir(data_dir))


def _data_dir(data_dir: Path | None) -> Path:
    """--data-dir, else EDGEROUTE_DATA_DIR, else $XDG_DATA_HOME/edgeroute (the node's default)."""
    if data_dir is not None:
        return data_dir
    env = os.environ.get("EDGEROUTE_DATA_DIR")
    return Path(env) if env else default_data_dir()


def _fail(exc: EdgerouteError) -> typer.Exit:
    typer.echo(f"error: {exc.message}", err=True)
    return typer.Exit(1)


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[CacheStore]:
    """The cache file, closed after; an error of the edge's is the command's failure."""
    from .cache.store import CacheStore

    try:
        with contextlib.closing(CacheStore(path)) as store:
            yield store
    except EdgerouteError as exc:
        raise _fail(exc) from exc


@cache_app.command("stats")
def stats(db: DbOpt = None, data_dir: DataDirOpt = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Entries, tiers, tenants, file size and the persisted hit/miss/refusal counters."""
    with _opened(_db_path(db, data_dir)) as store:
        info = store.stats()
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    typer.echo(f"file       {info['path']} ({info['file_bytes'] / 1e6:.1f} MB)")
    typer.echo(f"entries    {info['entries']} in {info['tenants']} tenant(s); by tier: {info['by_tier']}")
    for name, value in sorted(info["counters"].items()):
        typer.echo(f"  {name:<22} {value}")


@cache_app.command("clear")
def clear(
    db: DbOpt = None,
    data_dir: DataDirOpt = None,
    tenant: Annotated[Optional[str], typer.Option(help="only this tenant's entries")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask")] = False,
) -> None:
    """Delete cached entries (all, or one tenant's)."""
    path = _db_path(db, data_dir)
    if not yes:
        typer.confirm(f"delete {'all' if tenant is None else tenant + chr(39) + 's'} entries in {path}?", abort=True)
    with _opened(path) as store:
        n = store.clear(tenant)
    typer.echo(f"deleted {n} entries")


@cache_app.command("export")
def export(
    db: DbOpt = None,
    data_dir: DataDirOpt = None,
    tenant: Annotated[Optional[str], typer.Option(help="only this tenant's entries")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="JSONL file [default: stdout]")] = None,
) -> None:
    """Write every entry as one JSON line (request, answer, tier, timestamps, hits)."""
    with _opened(_db_path(db, data_dir)) as store, (
        out.open("w", encoding="utf-8") if out else contextlib.nullcontext(sys.stdout)
    ) as fh:
        n = 0
        for record in store.export(tenant):
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            n += 1
    if out:
        typer.echo(f"exported {n} entries to {out}", err=True)


@cache_app.command("warm")
def warm(
    file: Annotated[Path, typer.Argument(help="JSONL of {prompt|messages, answer, [tenant, model, params]}", exists=True)],
    db: DbOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Load prompt/answer pairs into the cache (tier "warmup")."""
    from .cache import EdgeCache

    async def run() -> int:
        from models import Usage

        from .cache.warmup import read_warmup

        cache = EdgeCache(_db_path(db, data_dir), CacheSettings())
        try:
            n = 0
            for item in read_warmup(file):
                stored = await cache.store(item.key, item.answer, "stop", Usage(0, 0), "warmup", opt=True)
                n += stored is not None
            return n
        finally:
            await cache.aclose()

    try:
        n = asyncio.run(run())
    except EdgerouteError as exc:
        raise _fail(exc) from exc
    typer.echo(f"stored {n} entries")
