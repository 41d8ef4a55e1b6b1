"""`edgeroute cloud ...` commands."""

from __future__ import annotations

import typer

cloud_app = typer.Typer(help="The cloud GPU pool and its member server.", no_args_is_help=True)
