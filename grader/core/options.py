"""The commands' option parser: a mistake is one line on stderr and exit status 2, never argparse's usage
block or a traceback (a word for a number, a missing option, an unknown one)."""

from __future__ import annotations

import argparse
import sys


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):
        print(f"{self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)
