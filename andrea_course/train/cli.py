"""What andrea-train, andrea-sample and andrea-prepare share: --version, help that shows every
default, and one line for every refusal.

Exit status: 0 done; 1 the work failed (a corrupt checkpoint, bad data, a full disk, a diverged
run); 2 a bad argument or setting (argparse's own convention); 130 stopped by Ctrl-C.
Set ANDREA_TRACEBACK=1 to see the traceback behind a one-line message.
"""
from __future__ import annotations

import argparse
import os
import sys

USAGE, FAILED, INTERRUPTED = 2, 1, 130
# The largest seed: torch's generators take 64-bit seeds, and a run adds its step (or a sample
# its number) to the seed, so the seed itself stays below 2**63.
MAX_SEED = 2**63 - 1


class UsageError(ValueError):
    """A bad argument: exit 2."""


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version as dist_version
    try:
        return dist_version("andrea-course")
    except PackageNotFoundError:
        return "unknown (not installed)"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default, unless the help already says it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" in text or action.default is argparse.SUPPRESS or not action.option_strings
                or action.required):
            return text
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            return text + " (default: off)" if action.default in (False, None) else text + " (default: on)"
        return text + " (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    def __init__(self, prog: str, doc: str, **kw):
        super().__init__(prog=prog, description=doc, formatter_class=HelpFormatter, **kw)
        self.add_argument("--version", action="version", version=f"%(prog)s {version()}",
                          help="print the version and exit")

    def error(self, message):
        """One line (argparse prints the whole usage first), exit 2."""
        self.exit(USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _usage_errors() -> tuple:
    from ..engine.config import ConfigError
    from .files import NotAFolderError
    return UsageError, ConfigError, NotAFolderError


def _failures() -> tuple:
    from ..engine.weights import WeightsError
    from .checkpoint import CheckpointError
    from .data import DataError
    from .runlog import LogError
    from .tokenizer import TokenizerError
    return CheckpointError, DataError, WeightsError, TokenizerError, LogError, OSError, RuntimeError, ValueError, ImportError


def one_line(exc: BaseException) -> str:
    from .files import describe
    text = describe(exc) if isinstance(exc, OSError) else str(exc)
    return " ".join(text.split()) or type(exc).__name__


def run(prog: str, main, argv=None) -> int:
    """main(argv) -> exit status, with every refusal one line on stderr and no traceback."""
    try:
        return main(argv)
    except BaseException as exc:
        if isinstance(exc, _usage_errors()):
            line, code = f"{prog}: error: {one_line(exc)}", USAGE
        elif isinstance(exc, KeyboardInterrupt):
            line, code = f"{prog}: interrupted", INTERRUPTED
        elif isinstance(exc, _failures()):
            line, code = f"{prog}: {one_line(exc)}", FAILED
        else:
            raise
        if os.environ.get("ANDREA_TRACEBACK"):
            raise
        print(line, file=sys.stderr)
        return code


# ----- argument types: a bad value is argparse's one-line usage error (exit 2) -----
def _number(kind, text: str, ok, rule: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{rule}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"{rule}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    return _number(int, text, lambda v: v >= 1, "must be a whole number >= 1")


def natural_int(text: str) -> int:
    return _number(int, text, lambda v: v >= 0, "must be a whole number >= 0")


def natural_float(text: str) -> float:
    import math
    return _number(float, text, lambda v: math.isfinite(v) and v >= 0, "must be a finite number >= 0")


def seed_int(text: str) -> int:
    return _number(int, text, lambda v: 0 <= v <= MAX_SEED, f"must be a whole number from 0 to {MAX_SEED} (2**63 - 1)")
