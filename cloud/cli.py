"""`edgeroute cloud ...` commands (today only the member server's `serve`)."""

from .member.cli import cloud_app

__all__ = ["cloud_app"]
