"""The two kinds of entry of a fresh-mistakes set (tests/fresh/fresh_mistakes*/mistakes.py), defined once.

M(id, piece, patches, truth, named): a mistake in one piece ("activity.piece", the file being
solutions/<activity>.py), made by (old, new) text replacements, each old text occurring exactly
once in the file; truth says in plain words what the mistake is; named holds regular expressions
(case-insensitive): a box names the mistake when one of them matches its text.
V(id, piece, patches, note): an unusual but correct version of a piece; it must pass.
"""
from dataclasses import dataclass, field


@dataclass
class M:
    id: str
    piece: str
    patches: list
    truth: str
    named: list = field(default_factory=list)


@dataclass
class V:
    id: str
    piece: str
    patches: list
    note: str
