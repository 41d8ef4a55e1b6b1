"""`python -m cloud.member [OPTIONS]`: the same as `edgeroute cloud serve` (used for child processes)."""

import sys

from .cli import cloud_app

if __name__ == "__main__":
    cloud_app(args=["serve", *sys.argv[1:]], prog_name="edgeroute cloud")
