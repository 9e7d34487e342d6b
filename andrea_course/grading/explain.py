"""What an error raised in a learner's code means, in the course's words.

    explain(exc) -> str | None
    where(frames, folder) -> "exercises/attention.py, line 12, in softmax\n    return ..."   # or ""
    raised_rows(exc, at, test, when, advice) -> [("problem", ...), ("where", at), ("what it means", ...)]

It is called when a graded test fails because the learner's code raised (grading/records.py,
describe: raised_rows): its words are a row of check()'s box and of the grader's report alike.
Where the learner's code is (learner_path, where, syntax_error_text; syntax_error: a file that does
not compile) is said here too, for those rows, a Mismatch's (expect.py), a stuck run's (pipeline.py)
and check()'s (local.py). It reads the
error's type and message (an error that crossed from the sandboxed worker arrives as
LearnerCodeError("RuntimeError: ...") and is read the same way) and, when it can, the learner's
own line of code, and says what the error means and where such errors usually come from: a view
of a non-contiguous tensor, shapes that do not broadcast (a reduction without keepdim), a matrix
product of mismatched sizes or dtypes, an index out of range, a rank the code was not written
for. None when the error is not one it knows: the runners then show the error as it is.
"""
from __future__ import annotations

import ast
import os
import re
import traceback
from pathlib import Path

from ..paths import ROOT

# Where library frames live: the learner's line is the innermost frame outside them.
_LIBRARY_PARTS = (os.sep + "torch" + os.sep, os.sep + "triton" + os.sep, os.sep + "andrea_course" + os.sep,
                  os.sep + "_pytest" + os.sep, os.sep + "pluggy" + os.sep, "site-packages", "dist-packages")
_STDLIB = os.path.dirname(os.__file__)
_TEST_FOLDERS = ("activity_tests", "hidden_tests")            # the graded tests, in the package or a grader's copy
_FROM_WORKER = re.compile(r"\(\w+\.py, line \d+, in [\w<>]+\)\s*$")   # worker/server.py's "(file.py, line N, in f)"

# reductions that drop the axis they reduce unless keepdim=True
_REDUCTION = re.compile(r"\.(sum|mean|amax|amin|max|min|var|std|norm|logsumexp|prod|argmax|argmin)\(([^()]*)\)"
                        r"|torch\.(sum|mean|amax|amin|max|min|var|std|norm|logsumexp|prod|argmax|argmin)\(([^()]*)\)")
_VECTOR = re.compile(r"torch\.(?:arange|linspace)\([^()]*(?:\([^()]*\)[^()]*)*\)(?!\s*\[|\.(?:view|reshape|unsqueeze))")
_LAST_INDEX = re.compile(r"\[\s*(?:\.\.\.|:)\s*,\s*-1\s*\]")          # x[:, -1] / x[..., -1]


def explain(exc: BaseException, code: str | None = None) -> str | None:
    """What `exc`, raised in the learner's code, means (None when it is not an error this knows).

    code: the learner's line that raised, when the caller has it; otherwise it is read from the
    exception's traceback (in this process) when there is one."""
    if exc is None:
        return None
    kind, text = _kind_and_text(exc)
    if code is None:
        code = _worker_line(exc)
    if code is None and not _FROM_WORKER.search(text):      # a worker's error: this process's frames are the grader's
        code = learner_line(exc)
    said = _kept_between_calls(kind, text, code or "", exc)
    if said:
        return said
    for rule in _RULES:
        said = rule(kind, text, code or "")
        if said:
            return said
    return None


def learner_line(exc: BaseException) -> str | None:
    """The innermost line of the traceback that lies outside PyTorch, Triton, the course's package
    (graded tests included, wherever the grader keeps them) and the standard library: the learner's
    own line, as far as this process can tell."""
    tb = getattr(exc, "__traceback__", None)
    if tb is None:
        return None
    for frame in reversed(traceback.extract_tb(tb)):
        if _is_library(frame):
            continue
        return frame.line.strip()
    return None


def _is_library(frame) -> bool:
    """Whether a traceback frame lies in PyTorch, Triton, the course's package, a graded test, the
    standard library, or has no source line: anywhere but the learner's own code."""
    path = os.path.abspath(frame.filename or "")
    return (any(part in path for part in _LIBRARY_PARTS) or path.startswith(_STDLIB) or not frame.line
            or os.path.basename(os.path.dirname(path)) in _TEST_FOLDERS)


def _worker_line(exc: BaseException) -> str | None:
    """The learner's line an error that came from the grading worker carries (its `frames`:
    (path, line, function, code), or its cause's), else None."""
    frame = _worker_frame(exc)
    code = frame[3] if frame is not None and len(frame) > 3 else None
    return code.strip() if isinstance(code, str) and code.strip() else None


def _worker_frame(exc: BaseException):
    """The learner's innermost frame, (path, line, function, code), that an error from the grading
    worker carries (or its cause's), else None."""
    seen = 0
    while exc is not None and seen < 5:
        frames = getattr(exc, "frames", None)
        if isinstance(frames, list) and frames:
            return tuple(frames[0] if type(exc).__name__ == "LearnerCodeError" else frames[-1])
        exc, seen = exc.__cause__, seen + 1
    return None


def _learner_frame(exc: BaseException):
    """(path, line, function) of the learner's innermost frame: from the grading worker's frames,
    else from this process's traceback (as learner_line finds it); None when neither has one."""
    frame = _worker_frame(exc)
    if frame is not None:
        return (frame[0], frame[1], frame[2]) if len(frame) > 2 else None
    tb = getattr(exc, "__traceback__", None)
    for f in reversed(traceback.extract_tb(tb) if tb is not None else []):
        if _is_library(f):
            continue
        return f.filename, f.lineno, f.name
    return None


def _kind_and_text(exc: BaseException) -> tuple[str, str]:
    """(type name, message) of the learner's error; one that crossed from the grading worker as
    LearnerCodeError('RuntimeError: message (file.py, line N, in f)') is unwrapped."""
    kind, text = type(exc).__name__, str(exc)
    if kind == "InterpreterError" and exc.__cause__ is not None:          # Triton's interpreter wraps it
        return _kind_and_text(exc.__cause__)
    if kind in ("LearnerCodeError", "InterpreterError"):
        found = re.match(r"\s*(\w+(?:Error|Exception)):\s*(.*)", text, re.S)
        if found:
            kind, text = found.group(1), found.group(2)
        found = re.match(r"""\s*(\w+Error)\(["'](.*)["']\)\s*$""", text, re.S)   # InterpreterError's repr
        if found:
            kind, text = found.group(1), found.group(2)
    return kind, text


def raised_rows(exc: BaseException, at: str, test: str, when: str, advice: tuple[list, list]) -> list:
    """The rows of an error the learner's code (or the test after it) raised: `at`, the learner's
    line that raised (where()); `test` and `when`, the test and its phase ("call", "setup",
    "teardown"); `advice`, the hints and typical mistakes the test was written with (expect.advice_in)."""
    hints, mistakes = advice
    kind, said = _kind_and_text(exc)          # a worker's LearnerCodeError: the learner's own error
    first = "\n".join((said.strip() or kind).splitlines()[:4])
    rows = [("problem", f"your code raised {kind}: {first}" if at else f"{kind}: {first}"),
            ("where", at or (f"in the test {test}, after your code returned" if when == "call"
                             else f"in the {when} of the test {test}, outside its body"))]
    meaning = explain(exc, at.split("\n", 1)[1].strip() if "\n" in at else None)
    rows += [("what it means", meaning), *(("hint", h) for h in hints),
             ("this test looks for", "" if meaning else "\n".join(f"• {m}" for m in mistakes[:4]))]
    return [(label, value) for label, value in rows if value]


# ----------------------------------------------------------------------------- where the learner's code is
def learner_path(path: str, folder: Path, base: Path | None = None) -> str | None:
    """`path` when it is the learner's (under `folder`), relative to `base` (default: the course:
    exercises/attention.py; the grader passes its staged copy: attention.py), else None."""
    try:
        p = Path(path).resolve()
        p.relative_to(Path(folder).resolve())
    except (ValueError, OSError):
        return None
    try:
        return str(p.relative_to(Path(base).resolve() if base is not None else ROOT))
    except (ValueError, OSError):
        return str(p)


def syntax_error_text(exc: SyntaxError, folder: Path, base: Path | None = None) -> str:
    """`exercises/attention.py, line 12` then the line and a caret under the column."""
    shown = exc.filename and learner_path(exc.filename, folder, base) or exc.filename or "your file"
    lines = [f"{shown}, line {exc.lineno}"]
    if exc.text:
        code = exc.text.rstrip("\n")
        stripped = code.lstrip()
        lines.append("    " + stripped)
        if exc.offset:
            lines.append("    " + " " * max(0, exc.offset - 1 - (len(code) - len(stripped))) + "^")
    return "\n".join(lines)


def syntax_error(path: Path, folder: Path) -> str | None:
    """The learner's file at `path`, compiled (not run): None, or its SyntaxError and where it does
    not parse (syntax_error_text), or why it cannot be read as Python."""
    try:
        source = path.read_text(encoding="utf-8")
    except Exception:                                # noqa: BLE001 - no such file: the tests say so
        return None
    try:
        compile(source, str(path), "exec")
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg}\n" + syntax_error_text(exc, folder)
    except ValueError as exc:                        # null bytes
        return f"{path.name} cannot be read as Python: {exc}"
    return None


def where(frames, folder: Path, base: Path | None = None) -> str:
    """The innermost line of the learner's own code in (path, line, function, code) frames,
    outermost first, as `file, line N, in f` and the code."""
    for path, lineno, func, code in reversed(frames):
        shown, code = learner_path(path, folder, base), (code or "").strip()
        if shown:
            return f"{shown}, line {lineno}, in {func}" + (f"\n    {code}" if code else "")
    return ""


def frames_of(exc, call=None) -> list:
    """An exception's frames, outermost first: the learner's when it came from the grading worker
    (its `frames`), else its traceback here (pytest's, with its `call`)."""
    frames = getattr(exc, "frames", None)
    if isinstance(frames, list):
        return [tuple(f) for f in frames]
    if call is None:
        return [(f.filename, f.lineno, f.name, f.line or "") for f in traceback.extract_tb(exc.__traceback__)]
    out = []
    for e in call.excinfo.traceback:
        try:
            code = str(e.statement).strip()
        except Exception:                                   # noqa: BLE001 - source may be gone
            code = ""
        out.append((str(e.path), e.lineno + 1, e.name, code))
    return out


# ----------------------------------------------------------------------------- the rules
_DOT_T = re.compile(r"([\w\].)]+)\.T\b")                        # k.T, self.k(x).T
_FIRST_AXES = re.compile(r"\.transpose\(\s*0\s*,\s*1\s*\)|\.transpose\(\s*1\s*,\s*0\s*\)")
_SHAPE_CLASH = re.compile(r"must match the size of tensor b|mat1 and mat2 shapes cannot be multiplied|"
                          r"Expected size for first two dimensions of batch2|size mismatch|does not broadcast|"
                          r"The use of `x\.T` on tensors of dimension other than 2")


def _transpose_all(kind, text, code):
    """`.T` on a tensor of more than two axes reverses them all: the batch axes move too."""
    found = _DOT_T.search(code)
    if not found or not _SHAPE_CLASH.search(text):
        return None
    name = found.group(1)
    sizes = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", text)
    clash = f" (here sizes {sizes.group(1)} and {sizes.group(2)} met)" if sizes else ""
    return (f"On your line, `{name}.T` reverses every axis of {name}, not only the last two: a (B, H, S, K) tensor "
            f"becomes (K, S, H, B), so its batch and head axes no longer line up with the other operand's"
            f"{clash}. Turn only the last two: {name}.transpose(-2, -1) (or {name}.mT).")


def _in_place(kind, text, code):
    """A piece that writes into an argument (inputs.keeps_inputs found it changed after the call)."""
    if kind != "InPlaceError":
        return None
    found = re.search(r"argument '(\w+)' in place(?: \(([^)]*?), line (\d+): (.*)\))?:", text)
    if not found:
        return None
    arg, line = found.group(1), found.group(4)
    fix = ""
    if line and re.match(rf"\s*{arg}\s*([-+*/@]|//|\*\*)=", line):
        op = re.match(rf"\s*{arg}\s*(\S+?)=", line).group(1)
        fix = f" Here `{arg} {op}= ...` adds into the tensor the caller holds; `{arg} = {arg} {op} ...` makes a new one."
    elif line:
        fix = f" Here `{line.strip()}` writes into it; use the operation's out-of-place form (without the trailing _), or work on a copy."
    return (f"An in-place operation (`+=`, a method ending in `_` such as `masked_fill_` or `add_`, "
            f"`{arg}[...] = ...`, `.append()`, `.pop()`) writes into the very {arg} the caller passed, so "
            f"the caller's copy (an embedding table, an optimizer's state, a list of ids) changes behind "
            f"its back; the value you return can be right and the program still wrong.{fix}")


_HEADS_FIRST = re.compile(r"\.view\(\s*\w+\s*,\s*[\w.]*(?:H|heads)\w*\s*,\s*T\b")   # .view(B, H, T, K)


def _view(kind, text, code):
    if "view size is not compatible with input tensor's size and stride" not in text:
        return None
    if _HEADS_FIRST.search(code):
        return ("On your line, a tensor is viewed straight as (B, H, T, ...). If it is (B, T, H·K), as a "
                "projection gives it, a view (or reshape) refills the new shape in memory order, so each 'head' "
                "would hold pieces of several positions: view as (B, T, H, K) first, then .transpose(1, 2) to "
                "(B, H, T, K).")
    if not re.search(r"\.(?:transpose|permute|mT|T)\b|\.t\(\)", code):
        return ("`.view()` only relabels memory that is already laid out in the new shape's order. This "
                "tensor is not (it is non-contiguous): a slice of a wider one (a split, chunk or [..., a:b] of "
                "the last axis) or a transpose on an earlier line leaves its rows apart in memory, so no view "
                "can merge or split those axes. Use "
                "`.reshape(...)`, which copies when it must, or `.contiguous().view(...)`.")
    return ("`.view()` only relabels memory that is already laid out in the new shape's order. After "
            "`.transpose()` or `.permute()` the tensor is not (it is non-contiguous: its strides no longer "
            "follow its shape), so no view can merge those axes. Use `.reshape(...)`, which copies when it "
            "must, or `.contiguous().view(...)`.")


def _broadcast(kind, text, code):
    found = re.search(r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at "
                      r"non-singleton dimension (\d+)", text)
    if not found:
        return None
    a, b, dim = found.groups()
    said = (f"Two tensors in one elementwise operation have shapes that do not broadcast: sizes {a} and {b} "
            f"meet at the same axis (axis {dim} of the result). Shapes line up from the right, and only a "
            f"size of 1 stretches to fit. ")
    arange = _ARANGE.search(code)
    if arange and abs(int(a) - int(b)) == 1:
        return said + (f"On your line, `{arange.group(0)}` stops before its end: torch.arange(start, end) "
                       f"gives end - start numbers, start .. end - 1, so one too few here. Count to the end "
                       f"you mean plus one (torch.arange(1, T + 1) gives 1 .. T).")
    reduction = _reduction_without_keepdim(code)
    if reduction:
        return said + (f"On your line, `{reduction}` has no keepdim=True: it drops the axis it reduces, so "
                       f"one value per row no longer lines up with its row. keepdim=True keeps that axis "
                       f"with size 1.")
    vector = _VECTOR.search(code)
    if vector:
        return said + (f"On your line, `{vector.group(0)}` is a 1-D tensor: it lines up with the LAST axis "
                       f"(the features), not the positions. To run down the positions give it an axis of "
                       f"size 1 after it: `{vector.group(0)}[:, None]`, shape (T, 1).")
    if _LAST_INDEX.search(code):
        return said + ("On your line, indexing with -1 (`[:, -1]`) drops that axis; a slice `[:, -1:]` keeps "
                       "it with size 1, so the value lines up with its row.")
    return said + ("Print the two operands' shapes: either one lost an axis (a statistic of each row taken "
                   "without keepdim=True, x.sum(dim=-1), .mean, .amax, or an index [:, -1]; keepdim=True or a "
                   "slice [:, -1:] keeps it as (..., 1)), or its axes are in another order (a .T on more than "
                   "two axes, a transpose missing).")


_ARANGE = re.compile(r"torch\.arange\([^()]*(?:\([^()]*\)[^()]*)*\)")


def _reduction_without_keepdim(code: str) -> str | None:
    for match in _REDUCTION.finditer(code):
        args = match.group(2) if match.group(2) is not None else match.group(4)
        if "keepdim" not in args and ("dim" in args or re.search(r"-?\d", args)):
            return match.group(0)
    return None


def _expand(kind, text, code):
    found = re.search(r"The expanded size of the tensor \((\d+)\) must match the existing size \((\d+)\)", text)
    if found:
        return (f"A tensor was stretched (expand, or an assignment into a slice) to a shape it does not fit: "
                f"an axis of size {found.group(2)} can only stretch when it has size 1, not to {found.group(1)}. "
                f"Check that the shapes line up from the right.")
    found = re.search(r"output with shape \[([\d, ]*)\] doesn't match the broadcast shape \[([\d, ]*)\]", text)
    if found:
        return (f"An in-place operation (+=, .add_, .mul_, ...) would make its result ({found.group(2)}) larger "
                f"than the tensor it writes into ({found.group(1)}). Write it out of place, y = x + ..., or "
                f"make the left-hand side the larger shape.")
    return None


def _matmul_shapes(kind, text, code):
    turned = _FIRST_AXES.search(code)
    if turned and re.search(r"\.transpose\(\s*-2\s*,\s*-1\s*\)|\.mT\b", code) and "mat1 and mat2" in text:
        return (f"On your line the tensor is turned twice, `{turned.group(0)}` and then .transpose(-2, -1): on a "
                f"matrix both swap the same two axes, so the second undoes the first (and with more axes "
                f"{turned.group(0)} swaps batch axes instead). Turn it once, .transpose(-2, -1).")
    found = re.search(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", text)
    if found:
        r1, c1, r2, c2 = found.groups()
        said = (f"A matrix product needs the inner sizes to agree: ({r1}×{c1}) @ ({r2}×{c2}) would need "
                f"{c1} = {r2}. ")
        if "merge_heads(" in code:
            return said + (f"On your line, merge_heads gave rows of {c1} features where the layer takes {r2}: the "
                           f"tensor it merged was not (B, H, T, K) (its heads on another axis, as a stack of the "
                           f"heads on dim=2 gives (B, T, H, K), or a transpose too many): merge_heads reads axis 1 "
                           f"as the heads.")
        return said + ("Check which axis each factor should contract: a missing .T or .transpose(-2, -1), "
                       "swapped factors, or a width that is not the one you meant.")
    if re.search(r"batch1 must be a 3D tensor|batch2 must be a 3D tensor", text) and "bmm" in code:
        return ("torch.bmm multiplies batches of matrices of exactly 3 axes, (N, T, S) @ (N, S, K); these "
                "tensors have another number. The @ operator (torch.matmul) takes any number of leading axes: "
                "(..., T, S) @ (..., S, K).")
    if turned and re.search(r"Expected size for first two dimensions of batch2 tensor|size mismatch", text):
        return (f"On your line, `{turned.group(0)}` swaps the first two axes; with more than two axes those are "
                f"batch (or head) axes, so the last two, the matrices themselves, are not turned. Swap the last "
                f"two: .transpose(-2, -1).")
    if re.search(r"Expected size for first two dimensions of batch2 tensor|batch1 must be a 3D tensor|"
                 r"both arguments to matmul need to be at least 1D|size mismatch, got input", text):
        return ("A batched matrix product met operands whose sizes do not chain: (..., T, K) @ (..., K, S) "
                "needs the last axis of the first to equal the second-to-last of the second. Check which "
                "axes you transposed (k.transpose(-2, -1) turns only the last two).")
    found = re.search(r"einsum\(\): subscript (\w) has size (\d+) for operand (\d+) which does not broadcast "
                      r"with previously seen size (\d+)", text)
    if found:
        letter, size, operand, before = found.groups()
        return (f"In your einsum, the letter {letter} stands for an axis of size {before} in one operand and "
                f"{size} in operand {operand}: one letter must name axes of one size. Check the order of the "
                f"letters against each tensor's shape.")
    found = re.search(r"inconsistent tensor size, expected tensor \[(\d+)\] and src \[(\d+)\]", text)
    if found:
        return (f"torch.dot multiplies two vectors of the same length; these have {found.group(1)} and "
                f"{found.group(2)}.")
    return None


def _dtypes(kind, text, code):
    found = (re.search(r"expected m1 and m2 to have the same dtype, but got: ([\w:]+) != ([\w:]+)", text)
             or re.search(r"mat1 and mat2 must have the same dtype, but got (\w+) and (\w+)", text)
             or re.search(r"expected both vectors to have same dtype, but found (\w+) and (\w+)", text)
             or re.search(r"expected scalar type (\w+) but found (\w+)", text))
    if not found:
        return None
    a, b = (_dtype_name(x) for x in found.groups())
    if "int64" in (a, b):
        return (f"An operation met an integer tensor (int64) where it needs a {a if a != 'int64' else b} one: "
                f"ids and counts are integers, values are floats. Convert with .to(x.dtype), or create the "
                f"tensor with the dtype it needs.")
    return (f"A matrix product (or a linear layer) needs both factors in one dtype; here {a} meets {b}. A "
            f"tensor made without dtype= is float32, PyTorch's default: make it in the other factor's dtype "
            f"(dtype=x.dtype, or .to(x.dtype)).")


def _dtype_name(name: str) -> str:
    name = name.replace("c10::", "")
    return {"float": "float32", "double": "float64", "Float": "float32", "Double": "float64", "Half": "float16",
            "BFloat16": "bfloat16", "Long": "int64", "Int": "int32"}.get(name, name)


def _index(kind, text, code):
    found = re.search(r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)", text)
    if found:
        i, dim, size = found.groups()
        return (f"An index reached past the end of an axis: axis {dim} has size {size}, so its indices run "
                f"from 0 to {int(size) - 1} (or -{size} to -1), and {i} is outside. Look for a shift by one "
                f"(+1, or counting positions from 1) or an index into the wrong axis.")
    if text.strip() in ("list index out of range", "tuple index out of range") and not _NEXT_INDEX.search(code):
        return (f"An index reached past the end of a {text.split()[0]}: with n items its indices run from 0 to "
                f"n - 1 (or -n to -1). Look for an index counted from 1 (1-based positions, enumerate(..., "
                f"start=1)) or one step too far (i + 1 at the last item).")
    if "index out of range in self" in text:
        return ("An id given to an embedding lookup (or index_select) is not a row of the table: with V rows "
                "the ids must lie in 0 .. V - 1. Look for a shift by one, or ids taken from the wrong tensor.")
    if "selected index k out of range" in text:
        return ("torch.topk(x, k) needs k no larger than the size of the axis it searches: asked for more "
                "entries than there are (a top_k larger than the vocabulary V?). Use min(k, x.shape[-1]).")
    width = re.search(r"num_classes\s*=\s*([\w.]+)\.shape\[(1|-1)\]", code)
    if "Class values must be smaller than num_classes" in text and width:
        return (f"F.one_hot(ids, num_classes) met an id >= num_classes: on your line num_classes is "
                f"{width.group(1)}.shape[{width.group(2)}], the table's width D; the number of classes is its number "
                f"of rows, V = {width.group(1)}.shape[0].")
    if "Class values must be smaller than num_classes" in text:
        return ("F.one_hot(ids, num_classes) met an id >= num_classes: with V classes the ids must lie in "
                "0 .. V - 1.")
    found = re.search(r"start \((-?\d+)\) \+ length \((\d+)\) exceeds dimension size \((\d+)\)", text)
    if found:
        start, length, size = (int(g) for g in found.groups())
        return (f"narrow(dim, start, length) (or a slice made with it) reads past the end of an axis: start {start} + "
                f"length {length} = {start + length}, and the axis has {size} entries. Where does each number come "
                f"from? An offset applied twice (a tensor already sliced from start, then narrowed from start "
                f"again), or a length longer than what is left after start?")
    found = re.search(r"too many indices for tensor of dimension (\d+)", text)
    if found:
        return (f"Your code indexes more axes than the tensor has (it has {found.group(1)}): it was written for "
                f"a tensor of another rank. Index from the end (x[..., i]) so that the same line serves a 1-D "
                f"and a batched input.")
    return None


def _rank(kind, text, code):
    found = re.search(r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\], but got (-?\d+)\)",
                      text)
    if found:
        low, high, got = found.groups()
        rank = int(high) + 1
        return (f"Your code asks for axis {got} of a tensor that has only {rank} ax{'is' if rank == 1 else 'es'}: "
                f"it was written for inputs of another rank (a batch axis more or less). Count axes from the end "
                f"(dim=-1, -2) so that the same code serves (T, D) and (B, T, D).")
    found = re.search(r"(not enough|too many) values to unpack \(expected (\d+)(?:, got (\d+))?\)", text)
    if found and (".shape" in code or ".size(" in code or not code):
        want, got = found.group(2), found.group(3)
        return (f"Unpacking a tensor's shape into a fixed number of names (as in B, T, D = x.shape) assumes a "
                f"rank: the code expected {want} sizes{f' and the tensor has {got} axes' if got else ''}. Take only "
                f"the sizes you need, from the end (T, D = x.shape[-2:]), so that 1-D and batched inputs both work.")
    found = re.search(r"number of dimensions in the tensor input does not match the length of the desired "
                      r"ordering of dimensions i\.e\. input\.dim\(\) = (\d+) is not equal to len\(dims\) = (\d+)", text)
    if found:
        return (f"permute() needs one entry per axis: the tensor has {found.group(1)}, the call names "
                f"{found.group(2)}. To swap two axes whatever the rank, use transpose(a, b) with axes counted "
                f"from the end.")
    found = re.search(r"Tensors must have same number of dimensions: got (\d+) and (\d+)", text)
    if found:
        return (f"torch.cat joins tensors of one rank; these have {found.group(1)} and {found.group(2)} axes. "
                f"Add the missing axis (x[None], x.unsqueeze(...)) or use torch.stack for a new one.")
    found = re.search(r"Sizes of tensors must match except in dimension (\d+)\. Expected size (\d+) but got size (\d+)",
                      text)
    if found:
        bare = " (a torch.cat without dim= joins along axis 0)" if _cat_without_dim(code) else ""
        return (f"torch.cat along axis {found.group(1)}{bare} needs every other axis to agree; one tensor has "
                f"{found.group(2)} where another has {found.group(3)}. Check the axis you join along.")
    return None


def _reshape(kind, text, code):
    found = re.search(r"shape '\[([-\d, ]*)\]' is invalid for input of size (\d+)", text)
    if found:
        return (f"view/reshape to [{found.group(1)}] asks for a different number of elements than the tensor "
                f"holds ({found.group(2)}). Check the sizes and which axis should absorb which (one -1 lets "
                f"PyTorch work out that size).")
    found = re.search(r"split_with_sizes expects split_sizes to sum exactly to (\d+)", text)
    if found:
        return (f"The sizes given to split must add up to the size of the axis split ({found.group(1)}): with "
                f"grouped heads the queries take H·K and the keys and values G·K each.")
    return None


def _cat_without_dim(code: str) -> bool:
    """Whether the line calls torch.cat (or .cat) with its tensors alone: no dim, by keyword or position."""
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("cat", "concat")
               and len(n.args) == 1 and not any(k.arg == "dim" for k in n.keywords) for n in ast.walk(tree))


def _sampling(kind, text, code):
    if "probability tensor contains either" in text:
        return ("torch.multinomial was given something that is not a probability distribution: a NaN, an "
                "infinity or a negative number. Draw from softmax probabilities, never from raw logits; a "
                "division by a temperature of 0 makes the logits infinite (temperature 0 is the argmax).")
    if "invalid multinomial distribution" in text:
        return ("torch.multinomial was given a row whose probabilities sum to 0: every entry was zeroed or "
                "masked. Keep at least one token (top-k keeps the k largest) and softmax before drawing.")
    return None


def _booleans(kind, text, code):
    optional = re.search(r"\bif\s+(not\s+)?([A-Za-z_]\w*)\s*(?::|else\b|$)", code)
    if "Boolean value of Tensor with more than one value is ambiguous" in text and optional:
        name = optional.group(2)
        return (f"`if {optional.group(1) or ''}{name}` asks Python for the truth of a whole tensor of values, which "
                f"it cannot give. To ask whether {name} was given at all, write `if {name} is not None` "
                f"(`is None` for the other case).")
    builtin = re.search(r"(?<![\w.])(max|min|sorted|sum)\(", code)
    if "Boolean value of Tensor with more than one value is ambiguous" in text and builtin:
        name = builtin.group(1)
        return (f"On your line, Python's built-in {name}(...) compares tensors with < and >, which needs one True "
                f"or False, and a tensor of many values gives many. Use the torch function that works per "
                f"element: torch.clamp_min(t, eps) (or t.clamp_min(eps)), torch.maximum(a, b), torch.minimum(a, b), "
                f"t.sum().")
    if "Boolean value of Tensor with more than one value is ambiguous" in text:
        return ("An `if`, `and`, `or`, `not` or `while` met a tensor of many values, but Python needs one "
                "True or False. For a choice per element use torch.where or masked_fill; for one answer "
                "about the whole tensor, .any() or .all().")
    if re.search(r"masked_fill_? only supports boolean masks", text):
        return ("masked_fill takes a mask of booleans (True where to fill): build it with a comparison "
                "(j > i) or .bool(), not with ones and zeros of a float dtype.")
    return None


def _ids(kind, text, code):
    if re.search(r"Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int",
                 text) or "one_hot is only applicable to index tensor" in text:
        return ("Token ids must be integers (torch.long): a lookup or F.one_hot cannot use float ids. Keep the "
                "ids as they come, or convert with .long().")
    if "could not infer output dtype. Input dtype must be either a floating point" in text:
        return ("mean() of an integer tensor (a count, a mask of 0/1 as int64) has no dtype to give: convert to "
                "a float first (.float(), or .to(x.dtype)).")
    if re.search(r"result type \w+ can't be cast to the desired output type \w+", text):
        return ("An in-place operation would store a float result in an integer tensor (x /= 2 on int64, say). "
                "Make the tensor a float one first (.float(), or dtype= when you create it), or write the "
                "operation out of place.")
    return None


def _autograd(kind, text, code):
    if "a leaf Variable that requires grad is being used in an in-place operation" in text:
        return ("Your code changes a parameter (a tensor that requires grad) in place. Compute a new tensor "
                "(y = w * 2) instead, or do the update under torch.no_grad().")
    if "one of the variables needed for gradient computation has been modified by an inplace operation" in text:
        return ("An in-place operation (x *= mask, x.add_(...)) overwrote a value autograd needs for the "
                "backward pass: write it out of place, y = x * mask.")
    if "Can't call numpy() on Tensor that requires grad" in text:
        return ("A NumPy function (np.exp, np.sqrt, np.tanh, ...) was given a tensor that requires grad: NumPy "
                "cannot carry gradients, so nothing could train through this line (the message's .detach() "
                "would only hide that). Use the torch function instead: torch.exp, torch.sqrt, torch.tanh.")
    return None


def _state_dict(kind, text, code):
    if "Error(s) in loading state_dict" not in text:
        return None
    owner = re.search(r"loading state_dict for (\w+)", text)
    missing = re.findall(r'"([^"]+)"', _section(text, "Missing key(s) in state_dict:"))
    extra = re.findall(r'"([^"]+)"', _section(text, "Unexpected key(s) in state_dict:"))
    sizes = re.findall(r"size mismatch for ([\w.]+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) from "
                       r"checkpoint, the shape in current model is torch\.Size\(\[([\d, ]*)\]\)", text)
    who = owner.group(1) if owner else "your module"
    # "Missing" are the learner's names the reference lacks; "Unexpected" the reference's names the learner's lacks
    parts = []
    if extra:
        parts.append(f"your {who} lacks {keys(extra, 'parameters')}")
    if missing:
        parts.append(f"it has {keys(missing, 'parameters')} that the reference does not")
    for name, want, got in sizes[:2]:
        parts.append(f"{name} has shape ({got}) where the reference's has ({want})")
    said = "The reference's weights do not fit your module: " + "; ".join(parts) + "."
    groups = {k.split(".")[0] for k in extra}
    if extra and len(groups) == 1 and all(re.match(r"\w+\.\d+\.", k) for k in extra):
        group, indices = next(iter(groups)), {int(k.split(".")[1]) for k in extra}
        if 0 in indices:
            said += (f" Every one it lacks is under {group}.<i>: modules kept in a plain Python list "
                     f"(or dict) are invisible to PyTorch; nn.ModuleList registers them.")
        else:
            said += (f" What it lacks starts at {group}.{min(indices)}: your {group} holds {min(indices)} where the "
                     f"reference holds {max(indices) + 1}; build one per layer (range(cfg.n_layers)).")
    else:
        said += " Keep the exercise's attribute names and the layer sizes its docstring gives."
    return said


def _section(text: str, title: str) -> str:
    if title not in text:
        return ""
    rest = text.split(title, 1)[1]
    return re.split(r"\n\s*\w[\w ]*key\(s\) in state_dict:|\n\s*size mismatch", rest)[0]


def keys(names: list[str], noun: str = "entries", shown: int = 3) -> str:
    """A list of names in a few words: '24 parameters under blocks. (blocks.0.ln1.weight, ...)', or
    the names themselves when they are few."""
    names = list(names)
    if len(names) <= shown:
        return ", ".join(names)
    top = {n.split(".")[0] for n in names}
    under = f" under {next(iter(top))}." if len(top) == 1 and "." in names[0] else ""
    return f"{len(names)} {noun}{under} ({', '.join(names[:shown])}, …)"


def _python(kind, text, code):
    found = re.search(r"got an unexpected keyword argument '(\w+)'", text)
    if found:
        return (f"The test calls your function with the keyword argument {found.group(1)}=, the name the "
                f"exercise's signature gives it: keep the exercise's parameter names and defaults.")
    found = re.search(r"missing (\d+) required positional argument", text)
    if found:
        return ("The test calls your function as the exercise's signature says, and your version asks for "
                "more arguments: keep the exercise's parameters and their defaults.")
    found = re.search(r"takes (\d+) positional arguments? but (\d+) (?:were|was) given", text)
    if found:
        return ("The test calls your function with the arguments of the exercise's signature: keep its "
                "parameters (and their order).")
    found = re.search(r"'NoneType' object has no attribute '(\w+)'", text)
    holder = re.search(rf"([\w.]+(?:\(\))?)\.{found.group(1)}\b", code) if found else None
    if holder:
        return (f"On your line, `{holder.group(1)}` is None, so it has no `{found.group(1)}`. Look at where it "
                f"comes from: an optional part that this configuration leaves out is None (check `is None` and "
                f"take the other way), and a function that ends without `return` gives None.")
    called = _called_on(code) if "'NoneType' object is not callable" in text else []
    if called:
        which = f"`{called[0]}`" if len(called) == 1 else "one of " + ", ".join(f"`{c}`" for c in called)
        head = any(c.endswith("head") for c in called)
        return (f"Your line calls something that is None: {which}. An optional part that this configuration "
                f"leaves out is None" + (" (a model with tied embeddings has no head of its own: its output "
                                         "weight is the token table, model.output_weight())" if head else "")
                + ", so check `is None` and take the other way; or a name was never given a function.")
    if re.search(r"'NoneType' object (?:has no attribute|is not subscriptable|is not iterable)|"
                 r"unsupported operand type\(s\) for .*'NoneType'|NoneType' object is not callable", text):
        return ("A value is None where a tensor was expected. A function that ends without `return` gives "
                "None: check that every path of yours returns its result.")
    if kind == "ZeroDivisionError":
        return ("A division by a Python 0: a parameter at its edge (p = 1 makes 1 - p = 0; a temperature "
                "of 0) needs its own case before you divide.")
    return None


def _argument_types(kind, text, code):
    """torch's own refusal of an argument of the wrong type, read back as the function's signature."""
    found = re.search(r"(\w+)\(\): argument '(\w+)' \(position (\d+)\) must be ([\w.]+), not ([\w.]+)", text)
    if not found:
        return None
    fn, name, position, want, given = found.groups()
    given = given.rsplit(".", 1)[-1]
    if name == "input" and want == "Tensor" and given in ("int", "float"):
        root = " (or ** 0.5)" if fn == "sqrt" else ""
        return (f"torch.{fn} works on tensors only, and it was given a Python {given}. For a plain number use "
                f"math.{fn}{root}; torch.{fn} is for a tensor of values.")
    return (f"{fn}()'s argument in position {position} is `{name}`, which takes a {want}; your call puts a {given} "
            f"there. Check the function's signature (its parameters and their order) and pass the others by "
            f"keyword ({name}=...).")


def _gather(kind, text, code):
    """torch.gather taken for a lookup of rows (tf.gather, np.take)."""
    if "Index tensor must have the same number of dimensions as input tensor" not in text or "gather(" not in code:
        return None
    return ("torch.gather(input, dim, index) is not a lookup of rows: it picks one element per entry of index "
            "(out[i][j] = input[index[i][j]][j] along dim 0), so index must have input's number of axes. To take "
            "whole rows by id, index the table: table[ids] (or torch.index_select, F.embedding).")


def _slice_bounds(kind, text, code):
    if "slice indices must be integers" not in text:
        return None
    return ("A bound of a slice on your line is not an integer: a float, most often from `/`, which always gives "
            "a float in Python 3 (8 / 2 is 4.0). Use `//` for a whole number (K // 2), or int(...).")


def _called_on(code: str | None) -> list[str]:
    """The names and attributes a line calls that could hold a value (not builtins, not torch's or
    F's functions, not methods of an expression's result)."""
    if not code:
        return []
    found = re.findall(r"(?<![\w.)\]])([A-Za-z_][\w.]*)\s*\(", code)
    skip = ("torch.", "F.", "nn.", "math.", "np.", "tl.", "triton.")
    return list(dict.fromkeys(n for n in found if not n.startswith(skip) and n not in dir(__builtins__)
                              and n not in ("super", "self")))


_NEXT_INDEX = re.compile(r"(\w+)\[\s*(\w+)\s*\+\s*1\s*\]")          # word[i + 1]


def _copied_layer(kind, text, code):
    """A shape clash on a line that applies the same layer twice."""
    twice = sorted(name for name in set(re.findall(r"self\.(\w+)\(", code)) if code.count(f"self.{name}(") > 1)
    if twice and _SHAPE_CLASH.search(text) and "x.T" not in text:
        return (f"Your line applies self.{twice[0]} twice, and the second use gets a tensor of another width than "
                f"the layer takes: is one of them meant to be another layer (a line copied and left unchanged)?")
    return None


def _sequences(kind, text, code):
    """Python's own sequences and loops: an index one past the end, pieces of unequal size
    stacked, a split into another number of parts than the names it is unpacked into."""
    found = _NEXT_INDEX.search(code)
    if kind == "IndexError" and "index out of range" in text and found:
        seq, i = found.groups()
        return (f"{seq}[{i} + 1] was read when {i} was the last position, one past the end of {seq}: look at "
                f"the next item only while {i} + 1 < len({seq}) (check it first, in the same condition).")
    found = re.search(r"stack expects each tensor to be equal size, but got \[([\d, ]*)\] at entry (\d+) and "
                      r"\[([\d, ]*)\] at entry (\d+)", text)
    if found:
        a, i, b, j = found.groups()
        sa, sb = [int(n) for n in a.split(",") if n.strip()], [int(n) for n in b.split(",") if n.strip()]
        if sa == sb[:len(sa)] and len(sa) < len(sb) or sb == sa[:len(sb)] and len(sb) < len(sa):
            short, full = (i, j) if len(sa) < len(sb) else (j, i)
            return (f"The tensors stacked are not all of one shape: entry {short} has the leading axes of entry "
                    f"{full} but not its last ones, so it is another kind of value (ids where vectors were meant, a "
                    f"module's input where its output was meant, say): check what entry {short} recorded.")
        if len(sa) == len(sb) and sum(x != y for x, y in zip(sa, sb)) > 1:
            return (f"The tensors stacked are not all of one shape: entry {i} is [{a}], entry {j} is [{b}], which "
                    f"differ in more than one size, as values of different inputs (or of different kinds) do, not "
                    f"one value recorded at successive steps: check where each entry of the list comes from (print "
                    f"the shapes as they are added).")
        reduced = _REDUCTION.search(code)
        which = (f" Your line reduces with {reduced.group(0).lstrip('.')}: the axis it removes is not the "
                 f"one you sliced, so the sliced axis (which grows with the loop) survives; reduce over the "
                 f"sliced axis." if reduced else "")
        return (f"The tensors stacked are not all of one shape: entry {i} is [{a}], entry {j} is [{b}]. A size "
                f"that grows from one entry to the next is an axis sliced by the loop (x[..., :i + 1, :]) and "
                f"not reduced away.{which}")
    if kind == "KeyError":
        return (f"A dict was asked for a key it does not hold ({text.split(':', 1)[-1].strip()[:60]}): look a key up "
                f"only when it is there (`if key in d`, or d.get(key)), or build the dict with every key first.")
    found = re.search(r"not enough values to unpack \(expected (\d+), got (\d+)\)|too many values to unpack "
                      r"\(expected (\d+)\)", text)
    if found and ".split(" in code:
        return ("Your .split(...) gave another number of parts than the names you unpack them into: "
                "split(n, dim) cuts pieces of n each, as many as fit. When the parts differ in width (queries "
                "H·K, keys and values G·K each with grouped heads), give the list of widths: "
                "split([H * K, G * K, G * K], dim=-1).")
    return None


def _unicode(kind, text, code):
    if kind.startswith("Unicode") and "can't decode" in text:
        return ("These bytes end in the middle of a UTF-8 character (a token may hold part of one): decoding "
                "them strictly fails. decode(\"utf-8\", errors=\"replace\") puts U+FFFD there instead, which is what "
                "a tokenizer's decode returns.")
    return None


def _devices(kind, text, code):
    if "Expected all tensors to be on the same device" in text:
        return ("Two tensors on different devices met in one operation: create new tensors on the input's "
                "device (device=x.device, or torch.zeros_like(x)).")
    return None


def _triton(kind, text, code):
    found = re.search(r"Expected dtype \[([^\]]*)\] but got (\w+)", text)
    if found:
        return (f"Triton's math functions (tl.exp, tl.log, tl.sqrt, ...) take only {found.group(1)}; this value "
                f"is {found.group(2)}. Convert what you load to fp32 right away, "
                f"tl.load(...).to(tl.float32), compute in fp32, and convert back when you store.")
    return None


def _slips(kind, text, code):
    """Python and PyTorch spellings that mean something else than they read."""
    found = re.search(r"'torch\.return_types\.(\w+)'", text)
    if found:
        name = found.group(1)
        return (f"x.{name}(dim=...) gives a pair, (values, indices), not a tensor: take its .values "
                f"(x.{name}(dim=-1, keepdim=True).values)" + (", or use x.amax(dim=-1, keepdim=True), which gives the values alone."
                                                              if name in ("max", "min") else "."))
    if re.search(r"must be tuple of ints,\s*but got float|received an invalid combination of arguments.*float", text) \
            and re.search(r"[^/]/[^/=]", code):
        return ("A size here is a float: `/` always divides to a float in Python (12 / 3 is 4.0). Sizes and "
                "indices need integers: divide with `//` (12 // 3 is 4).")
    if "bitwise_xor" in text or ("^" in code and "unsupported operand type(s) for ^" in text):
        return ("`^` is bitwise XOR in Python and PyTorch, not a power: x ^ 3 flips bits of integers. The power "
                "is `**`: x ** 3.")
    if "self must be a matrix" in text:
        return ("torch.mm multiplies two 2-D matrices only; a batch (B, T, ...) has more axes. Use @ "
                "(torch.matmul), which multiplies the last two axes and broadcasts the ones before.")
    if re.search(r"1D tensors expected, but got \d+D and \d+D", text):
        return ("torch.dot takes two 1-D vectors only. For the dot products of a batch of vector pairs, "
                "multiply and sum over the last axis: (u * v).sum(dim=-1).")
    if "only one element tensors can be converted to Python scalars" in text:
        return ("A function for one Python number (math.erf, math.exp, math.sqrt, float(), int()) was given a "
                "tensor of several elements. Use the torch function, which works on every element: torch.erf, "
                "torch.exp, torch.sqrt.")
    if re.search(r"(too many|not enough) values to unpack", text) and re.search(r"\bfor\b.+,.+\bin\b", code) \
            and ".items()" not in code:
        return ("A for loop that unpacks each item into two names needs items that are pairs; iterating a dict "
                "gives its keys alone. Use .items() for (key, value) pairs: for word, n in counts.items().")
    if "bytes must be in range(0, 256)" in text:
        call = re.search(r"bytes\(\[[^\[\]]*\]\)", code)
        shown = f"On your line, `{call.group(0)}`" if call else "bytes([...])"
        return (f"{shown} makes ONE byte of each number in the list, its value the number itself, and a byte "
                f"holds 0 to 255: a number past 255 (a token id) is no byte. If the numbers are tokens, join the "
                f"byte strings they stand for instead (b1 + b2).")
    if "Index is supposed to be a vector" in text:
        return ("torch.index_select takes a 1-D index, one position per entry, and the ids here have more axes. "
                "Index the table with the ids as they are, table[ids], which keeps their shape and adds D.")
    found = re.search(r"einsum\(\): the number of subscripts in the equation \((\d+)\) does not match the number of "
                      r"dimensions \((\d+)\)", text)
    if found:
        return (f"Your einsum equation names {found.group(1)} axes for an operand that has {found.group(2)}: write "
                f"'...' for the leading axes (batch, heads), as in '...ts,...sk->...tk', so that any number of "
                f"them is carried through.")
    if "changed size during iteration" in text or "keys changed during iteration" in text:
        return ("A dict (or set) was changed while a for loop was running over it. Build the new entries in "
                "a new dict inside the loop, then replace the old one after it (words = merged).")
    return None


# ----------------------------------------------------------------------------- a list that outlives the call
_JOINED = re.compile(r"torch\.(?:stack|cat|concat|concatenate|vstack|hstack)\(\s*(self\.)?(\w+)\b(?!\s*[(\[.])")
_UNEQUAL = re.compile(r"stack expects each tensor to be equal size|Sizes of tensors must match except in dimension")


def _kept_between_calls(kind, text, code, exc):
    """Tensors of unequal shapes joined from a list that the learner's function does not create: a
    list made at module level, a default argument's list, or one kept on self. Read from the
    learner's own source (the function around the line that raised), so said only where the list
    is there to see."""
    joined = _JOINED.search(code)
    if not joined or not _UNEQUAL.search(text):
        return None
    frame = _learner_frame(exc)
    if frame is None:
        return None
    try:
        origin = _list_origin(frame, joined.group(2), bool(joined.group(1)))
    except Exception:                                   # noqa: BLE001 - source unreadable or odd: say nothing
        return None
    if origin is None:
        return None
    origin, fix = origin
    name = ("self." if joined.group(1) else "") + joined.group(2)
    shapes = re.search(r"got \[([\d, ]*)\] at entry (\d+) and \[([\d, ]*)\] at entry (\d+)", text)
    seen = (f" (entry {shapes.group(2)} is [{shapes.group(1)}], entry {shapes.group(4)} is [{shapes.group(3)}]: "
            f"tensors of two different calls)" if shapes else "")
    fix = fix or f"create the list inside the function, `{joined.group(2)} = []`, so that every call starts from an empty one"
    return (f"The tensors joined are not all of one shape{seen}. `{name}`, the list your line joins, is not "
            f"created inside {frame[2]}: {origin}. So it outlives each call and still holds the tensors an earlier "
            f"call put in it, and this call's tensors are added after them: {fix}.")


def _list_origin(frame, name: str, on_self: bool) -> tuple[str, str | None] | None:
    """(where the list `name` (self.name when on_self) that the function of `frame` joins comes
    from, the fix when it is not the usual one), in words, when that is not the function itself;
    None when the function creates it (or the source does not show)."""
    path, line, func = frame[0], int(frame[1]), frame[2]
    with open(path, encoding="utf-8", errors="replace") as f:
        tree = ast.parse(f.read())
    around = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == func
              and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not around:
        return None
    fn = max(around, key=lambda n: n.lineno)              # the innermost
    if on_self:
        if any(_fresh(v) for v in _bound(fn, name, on_self=True)) or _emptied(fn, name, on_self=True):
            return None
        owner = next((c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and fn in c.body), None)
        if owner is None:
            return None
        made = next((m.name for m in owner.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m is not fn
                     and any(_fresh(v) for v in _bound(m, name, on_self=True))), None)
        if made is not None:
            return (f"it is made once, in {made}, and kept on the object, which every call of {func} shares",
                    f"start every call with a new list (`self.{name} = []`), or record into a local list")
        if any(_fresh(v) for v in _bound_at_top(owner.body, name)):
            return "it is a class attribute, made once when the class is defined and shared by every call", None
        return None
    return _origin_of_name(tree, fn, name, alias_of=None)


def _origin_of_name(tree, fn, name: str, alias_of: str | None) -> tuple[str, str | None] | None:
    said = f"it is `{name}` under another name, and `{name}`" if alias_of else "it"
    values = _bound(fn, name, on_self=False)
    if any(_fresh(v) for v in values) or _emptied(fn, name, on_self=False):
        return None
    default = _default_of(fn, name)
    if default is not None:
        return ((f"{said} is the default argument `{name}={ast.unparse(default)}`, a list Python makes once, when "
                 f"the def runs, and shares between every call that leaves the argument out",
                 f"default to None and create the list in the body, `if {name} is None: {name} = []`")
                if _fresh(default) else None)
    if name in _parameters(fn):                         # the caller's list: nothing here says where it was made
        return None
    if values:
        if alias_of is None and len(values) == 1 and isinstance(values[0], ast.Name):
            return _origin_of_name(tree, fn, values[0].id, alias_of=name)
        return None
    made = [v for v in _bound_at_top(tree.body, name)]
    if made and all(_fresh(v) for v in made):
        return f"{said} is made at module level (`{name} = {ast.unparse(made[0])}`), once, when the file is loaded", None
    return None


def _scope(fn):
    """The nodes of fn's own scope: nested functions, lambdas and classes have their own."""
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _is_target(target, name: str, on_self: bool) -> bool:
    if on_self:
        return (isinstance(target, ast.Attribute) and target.attr == name and isinstance(target.value, ast.Name)
                and target.value.id == "self")
    return isinstance(target, ast.Name) and target.id == name


def _bound(fn, name: str, on_self: bool) -> list:
    """The values fn's own scope binds `name` (or self.name) to; a binding whose value does not show
    (a for loop's target, a with's, an unpacking) is there as None."""
    out = []
    for node in _scope(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if _is_target(t, name, on_self):
                    out.append(node.value)
                elif isinstance(t, (ast.Tuple, ast.List)) and any(_is_target(e, name, on_self) for e in t.elts):
                    out.append(None)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and _is_target(node.target, name, on_self):
            out.append(getattr(node, "value", None))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.withitem)):
            target = node.target if isinstance(node, (ast.For, ast.AsyncFor)) else node.optional_vars
            if target is not None and any(_is_target(t, name, on_self) for t in ast.walk(target)):
                out.append(None)
    return out


def _emptied(fn, name: str, on_self: bool) -> bool:
    """Whether fn's own scope empties the list: name.clear(), name[:] = [], del name[:]."""
    for node in _scope(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "clear" \
                and _is_target(node.func.value, name, on_self):
            return True
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else []
        if any(isinstance(t, ast.Subscript) and _is_target(t.value, name, on_self) for t in targets):
            return True
    return False


def _parameters(fn) -> set:
    args = fn.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a is not None}


def _bound_at_top(body, name: str) -> list:
    """The values a module's (or a class's) own statements bind `name` to."""
    out = []
    for node in body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            out.append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            out.append(node.value)
    return out


def _default_of(fn, name: str):
    """The default value of fn's parameter `name` (None when it is no parameter with a default)."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        if a.arg == name:
            return d
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        if a.arg == name and d is not None:
            return d
    return None


def _fresh(value) -> bool:
    """Whether evaluating `value` makes a new list (or other container): [], [...], list(), a comprehension."""
    if isinstance(value, (ast.List, ast.ListComp, ast.Dict, ast.DictComp, ast.Set, ast.SetComp)):
        return True
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id in ("list", "dict", "set", "deque", "defaultdict", "OrderedDict"))


_RULES = (_in_place, _slips, _argument_types, _slice_bounds, _gather, _view, _copied_layer, _transpose_all, _broadcast, _expand, _matmul_shapes, _dtypes, _index, _rank, _reshape, _sampling, _booleans,
          _ids, _autograd, _state_dict, _sequences, _unicode, _python, _devices, _triton)
