"""Command-line entry points: ``python -m linearnets <command>``."""
from __future__ import annotations

import argparse


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m linearnets",
                                     description="Theory and simulation of deep linear networks.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("verify", help="check the closed forms against independent numerics")
    parser.parse_args(argv)
    raise NotImplementedError("verify is not implemented yet")
