"""`python -m edgeroute ...`: the same command as the `edgeroute` script."""

from .cli import app

if __name__ == "__main__":
    app(prog_name="edgeroute")
