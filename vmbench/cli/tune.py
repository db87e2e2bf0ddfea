"""``vmbench tune``: (being written)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    sp = subparsers.add_parser("tune", help="(being written)")
    sp.set_defaults(func=lambda args: 0)
    return sp
