"""`edgeroute router ...` commands."""

from __future__ import annotations

import typer

router_app = typer.Typer(help="The routing policy: train, calibrate, evaluate, replay.", no_args_is_help=True)
