"""Which submitted pieces look copied: from the engine, from the answer key, or from a classmate.

Each piece (a top-level function or class of a learner's activity file, by the exercise's name)
is fingerprinted in the manner of MOSS (Schleimer, Wilkerson and Aiken, "Winnowing: local
algorithms for document fingerprinting", 2003):

1. tokens: Python's own tokenizer; comments, docstrings and blank lines dropped; every name a
   program could rename (variables, arguments, functions, import aliases) becomes one symbol,
   and so does every number and every string, while keywords, operators, attribute names
   (`.softmax`, `.transpose`) and keyword-argument names (`dim=`) stay as they are;
2. k-grams: a hash of every K consecutive tokens;
3. winnowing: the smallest hash in every window of W consecutive k-grams is kept (the
   rightmost on ties): any run of at least K + W - 1 tokens shared by two pieces is found.

Removed before judging: the code the exercise gives (its signature, a class's given methods:
the exercise file is the base, as MOSS's base file), so that what everyone was handed does not
count; what the engine and the answer key share (two authors writing a piece alike: the obvious
way to write it, which a learner may find too); and, between students only, what more than
COMMON of them share.

similarity(a, b) = shared fingerprints / the fingerprints of the smaller piece, in [0, 1]: a copy
with renamed variables and other spacing scores near 1, a copy with code added around it too,
an independent version of the same formula low. A pair where either side has fewer than
MIN_FINGERPRINTS fingerprints left (a one-line call of a PyTorch op) is too short to tell
copying from writing and is not judged. The report lists pairs at or above a threshold for the
instructor; nothing is ever zeroed because of it.

    report = compare(students={"ana": Path("subs/ana"), ...})        # engine and answer key too
    report.pairs                  # [Pair("attention.softmax", "ana", "engine", 1.0), ...]
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import io
import keyword
import os
import stat
import token
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from .. import pieces
from ..paths import ROOT

K = 5                       # tokens per k-gram (the noise threshold: shorter matches are ignored)
W = 4                       # k-grams per window: any shared run of K + W - 1 = 8 tokens is found
MIN_FINGERPRINTS = 6        # fewer: too short to tell copying from writing
THRESHOLD = 0.8             # pairs at or above it are listed
COMMON = 10                 # between students, a fingerprint more than this many share is not evidence
ENGINE, ANSWER_KEY = "engine", "answer key"
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER, tokenize.TYPE_COMMENT}


def tokens(source: str) -> list[str]:
    """The normalised tokens of Python source (see the module doc); [] where it does not tokenize."""
    out: list[str] = []
    brackets: list[str] = []                        # "def" for a parameter list, else "(": a NAME= is then a keyword argument
    previous = None                                 # the previous significant token
    try:
        raw = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in _SKIP]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    for i, tok in enumerate(raw):
        following = raw[i + 1] if i + 1 < len(raw) else None
        if tok.type == tokenize.STRING and (previous is None or previous.type in (tokenize.NEWLINE, tokenize.INDENT,
                                                                                  tokenize.DEDENT)) \
                and (following is None or following.type == tokenize.NEWLINE):
            previous = following                    # a docstring or a bare string statement: dropped, its line too
            continue
        if previous is not None and tok.type == tokenize.NEWLINE and previous.type == tokenize.NEWLINE:
            continue
        if tok.type == tokenize.OP:
            if tok.string in "([{":
                signature = tok.string == "(" and len(out) >= 2 and out[-2] == "def"
                brackets.append("def" if signature else tok.string)
            elif tok.string in ")]}" and brackets:
                brackets.pop()
            out.append(tok.string)
        elif tok.type == tokenize.NAME:
            if keyword.iskeyword(tok.string):
                out.append(tok.string)
            elif previous is not None and previous.type == tokenize.OP and previous.string == ".":
                out.append(tok.string)              # an attribute: the API, not a choice of name
            elif brackets and brackets[-1] == "(" and following is not None and following.string == "=" \
                    and previous is not None and previous.string in ("(", ","):
                out.append(tok.string + "=")        # a keyword argument's name: the callee's API
            else:
                out.append("<name>")
        elif tok.type == tokenize.NUMBER:
            out.append("<number>")
        elif tok.type == tokenize.STRING:
            out.append("<string>")
        elif tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            out.append(f"<{token.tok_name[tok.type].lower()}>")   # the shape of the blocks, not their spacing
        else:
            out.append(tok.string)
        previous = tok
    return out


def _hash(gram: tuple[str, ...]) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(gram).encode(), digest_size=8).digest(), "big")


def fingerprints(source: str, k: int = K, w: int = W) -> frozenset[int]:
    """The winnowed k-gram hashes of `source` (a short piece: all of them)."""
    toks = tokens(source)
    hashes = [_hash(tuple(toks[i:i + k])) for i in range(len(toks) - k + 1)]
    if len(hashes) <= w:
        return frozenset(hashes)
    chosen, last = set(), None
    for start in range(len(hashes) - w + 1):
        window = hashes[start:start + w]
        low = min(window)
        at = start + max(i for i, h in enumerate(window) if h == low)     # the rightmost minimum
        if at != last:
            chosen.add(hashes[at])
            last = at
    return frozenset(chosen)


def similarity(a: frozenset[int], b: frozenset[int]) -> float:
    """Shared fingerprints over the smaller set's, in [0, 1] (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


# ----------------------------------------------------------------------------- pieces of a file
def piece_sources(source: str, activity: str) -> dict[str, str]:
    """{piece name: its source code} for the activity's pieces defined at the top level of `source`
    (the last definition wins, as when Python runs the file)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    names, out, lines = set(pieces.names(activity)), {}, source.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
            out[node.name] = "".join(lines[node.lineno - 1:node.end_lineno])
    return out


def engine_sources() -> dict[str, str]:
    """{"activity.piece": the engine's source of it} (a Triton kernel: its Python function)."""
    from ..authorship import python_function
    out = {}
    for activity in pieces.ACTIVITIES:
        for name in pieces.names(activity):
            try:
                obj = python_function(pieces.get(activity, name))
                out[f"{activity}.{name}"] = inspect.getsource(obj)
            except (ImportError, OSError, TypeError):
                pass                               # Triton missing, or no source
    return out


MAX_FILE = 1 << 20          # bytes: a larger file is not read (as the grader stages submissions)


def _read(path: Path) -> str | None:
    """A submitted file's text: a regular file, never through a link, at most MAX_FILE bytes,
    UTF-8; else None (the grader itself may be root, reading a learner's folder)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def folder_sources(folder: Path) -> dict[str, str]:
    """{"activity.piece": source} of every piece written in a folder shaped like exercises/."""
    out = {}
    for activity in pieces.ACTIVITIES:
        text = _read(Path(folder) / f"{activity}.py")
        if text is not None:
            out.update({f"{activity}.{name}": src for name, src in piece_sources(text, activity).items()})
    return out


# ----------------------------------------------------------------------------- a class
@dataclass(frozen=True)
class Pair:
    exercise: str            # "activity.piece"
    student: str
    other: str               # another student, ENGINE or ANSWER_KEY
    score: float


@dataclass
class Report:
    pairs: list[Pair] = field(default_factory=list)          # at or above the threshold, highest first
    scores: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # student -> exercise -> other -> score
    threshold: float = THRESHOLD

    def for_student(self, student: str) -> list[Pair]:
        return [p for p in self.pairs if student in (p.student, p.other)]

    def note(self, student: str) -> str:
        """One line for the gradebook: "attention.softmax ~ engine 1.00; block.Block ~ bea 0.93"."""
        return "; ".join(f"{p.exercise} ~ {p.other if p.student == student else p.student} {p.score:.2f}"
                         for p in self.for_student(student))


def compare(students: dict[str, Path], *, engine: bool = True, answer_key: Path | None = ROOT / "solutions",
            base: Path | None = ROOT / "exercises", threshold: float = THRESHOLD,
            common: int = COMMON) -> Report:
    """Every student's pieces against the engine's, the answer key's (when that folder exists)
    and each other's. Removed first: the base (the exercise files); what the engine and the
    answer key share (two authors writing a piece alike: the obvious way to write it, which a
    learner may well find too); and, between students only, what more than `common` of them
    share (MOSS's -m)."""
    base_prints = {e: fingerprints(s) for e, s in folder_sources(base).items()} if base and base.is_dir() else {}

    def prints(sources: dict[str, str]) -> dict[str, frozenset[int]]:
        return {e: fingerprints(s) - base_prints.get(e, frozenset()) for e, s in sources.items()}

    references: dict[str, dict[str, frozenset[int]]] = {}
    if engine:
        references[ENGINE] = prints(engine_sources())
    if answer_key is not None and answer_key.is_dir():
        references[ANSWER_KEY] = prints(folder_sources(answer_key))
    canonical: dict[str, frozenset[int]] = {}
    if len(references) == 2:
        ours, key = references[ENGINE], references[ANSWER_KEY]
        canonical = {e: ours[e] & key[e] for e in set(ours) & set(key)}
    for table in references.values():
        for exercise in table:
            table[exercise] = table[exercise] - canonical.get(exercise, frozenset())
    mine = {name: {e: fp - canonical.get(e, frozenset()) for e, fp in prints(folder_sources(Path(folder))).items()}
            for name, folder in students.items()}
    seen: dict[str, dict[int, int]] = {}
    for got in mine.values():
        for exercise, fp in got.items():
            counts = seen.setdefault(exercise, {})
            for h in fp:
                counts[h] = counts.get(h, 0) + 1
    shared_by_many = {e: frozenset(h for h, n in counts.items() if n > common) for e, counts in seen.items()}

    report = Report(threshold=threshold)

    def judge(exercise: str, a: str, fa: frozenset[int], b: str, fb: frozenset[int]) -> None:
        if min(len(fa), len(fb)) < MIN_FINGERPRINTS:
            return                                   # too short to tell copying from writing
        score = similarity(fa, fb)
        report.scores.setdefault(a, {}).setdefault(exercise, {})[b] = score
        if b in students:
            report.scores.setdefault(b, {}).setdefault(exercise, {})[a] = score
        if score >= threshold:
            report.pairs.append(Pair(exercise, a, b, round(score, 3)))

    for name, got in sorted(mine.items()):
        report.scores.setdefault(name, {})
        for exercise, fp in sorted(got.items()):
            for ref, table in references.items():
                judge(exercise, name, fp, ref, table.get(exercise, frozenset()))
    names = sorted(mine)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for exercise in sorted(set(mine[a]) & set(mine[b])):
                many = shared_by_many.get(exercise, frozenset())
                judge(exercise, a, mine[a][exercise] - many, b, mine[b][exercise] - many)
    report.pairs.sort(key=lambda p: (-p.score, p.exercise, p.student, p.other))
    return report
