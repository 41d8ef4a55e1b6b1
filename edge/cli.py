"""`edgeroute cache ...` commands."""

from __future__ import annotations

import typer

cache_app = typer.Typer(help="The edge's SQLite-vector cache.", no_args_is_help=True)
