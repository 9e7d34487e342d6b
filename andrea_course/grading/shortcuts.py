"""Library shortcuts: a piece written as a call to the library function that *is* the piece.

`torch.softmax` as `attention.softmax`, `F.layer_norm` as `block.layer_norm`, `F.gelu` as
`mlp.gelu_tanh`: the graded tests pass, but nothing of the exercise was written. For each piece,
SHORTCUTS names the library calls that compute the piece itself and what the piece is to be
written from instead. Using the library for what a piece is *not* teaching stays fine (einsum,
torch.special, torch.tril, scaled_dot_product_attention inside a RoPE piece, autograd checking
gelu_grad's slope).

`find(path, piece)` reads the learner's file (never runs it) and lists the shortcuts the piece
uses: in its own body, or in a function or class of the same file that it calls. Names are
resolved through the file's imports (`import torch.nn.functional as F`, `from torch import
softmax as sm`), and a method of the same name on any value counts as the library's
(`scores.softmax(-1)` is `Tensor.softmax`).

POLICIES are what andrea-grade does with them (`--library-shortcuts`): refuse (the piece's tests
score nothing, with the reason in their output: the default for credit), warn (the score stands,
the output says so), allow (nothing). `check()` shows a teaching box whatever the policy.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

POLICIES = ("refuse", "warn", "allow")
MAX_SOURCE = 1 << 20                    # a larger file is not read (student.source_of's limit too)

_F = "torch.nn.functional"
_SOFTMAX = (f"{_F}.softmax", "torch.softmax", "Tensor.softmax", "torch.nn.Softmax", "torch.special.softmax",
            f"{_F}.log_softmax", "torch.log_softmax", "Tensor.log_softmax")
_GELU = (f"{_F}.gelu", "torch.nn.GELU", "torch._C._nn.gelu")
_SDPA = (f"{_F}.scaled_dot_product_attention", "torch.nn.MultiheadAttention", f"{_F}.multi_head_attention_forward")

# piece: (the library calls that are the piece, what to write it from)
SHORTCUTS: dict[str, tuple[tuple[str, ...], str]] = {
    "embeddings.embed_lookup": ((f"{_F}.embedding", "torch.embedding", "torch.nn.Embedding"),
                                "index the table's rows with the ids"),
    "embeddings.embed_onehot": ((f"{_F}.embedding", "torch.embedding", "torch.nn.Embedding"),
                                "a one-hot matrix times the table"),
    "embeddings.cosine_similarity": ((f"{_F}.cosine_similarity", "torch.cosine_similarity",
                                      "torch.nn.CosineSimilarity"),
                                     "a dot product divided by the two lengths"),
    "attention.softmax": (_SOFTMAX, "exp and a sum over the last axis"),
    "attention.attention": (_SDPA, "the scores, the scale, the mask, softmax and the weighted sum"),
    "attention.AttentionHead": (_SDPA, "its projections and the attention steps"),
    "multihead.MultiHeadAttention": (_SDPA, "split_heads, the attention slot and merge_heads"),
    "mlp.gelu_tanh": (_GELU, "tanh, the constant √(2/π) and 0.044715·x³"),
    "mlp.gelu_erf": (_GELU, "erf and x/√2"),
    "block.layer_norm": ((f"{_F}.layer_norm", "torch.layer_norm", "torch.nn.LayerNorm", "torch.native_layer_norm"),
                         "the mean and the variance over the last axis"),
    "block.dropout": ((f"{_F}.dropout", "torch.dropout", "torch.nn.Dropout", "torch.nn.functional.dropout1d"),
                      "a random keep-mask and the 1/(1 - p) scale"),
    "modern.rms_norm": ((f"{_F}.rms_norm", "torch.rms_norm", "torch.nn.RMSNorm"),
                        "the mean of the squares over the last axis and rsqrt"),
    "optim.adamw_step": (("torch.optim.AdamW", "torch.optim.Adam", "torch.optim.adamw.adamw", "torch.optim.adam.adam",
                          "torch._fused_adamw_", "torch._fused_adam_"),
                         "the two moving averages, their bias corrections and the decoupled weight decay"),
    "optim.lr_at": (("torch.optim.lr_scheduler",), "the warm-up line and the cosine"),
}


@dataclass(frozen=True)
class Shortcut:
    piece: str          # "attention.softmax"
    call: str           # what the learner wrote: "torch.softmax", "scores.softmax"
    line: int           # in the learner's file
    instead: str        # what the piece is to be written from

    def teach(self) -> str:
        """The box's line: this call is the exercise."""
        return (f"{self.call} (line {self.line}) is this exercise: write {self.piece} from {self.instead}. "
                f"The graded tests can pass with it, but the piece is the library's, not yours.")


def find(path: str | Path, piece: str) -> list[Shortcut]:
    """The shortcuts `piece` ("activity.name") uses in the learner's file at `path`: none for a
    piece without a table row, a missing file, or one that does not parse."""
    calls, instead = SHORTCUTS.get(piece, ((), ""))
    if not calls:
        return []
    try:
        path = Path(path)
        if path.stat().st_size > MAX_SOURCE:
            return []
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return []
    top = {node.name: node for node in tree.body
           if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    name = piece.split(".", 1)[1]
    if name not in top:
        return []
    aliases = _aliases(tree)
    found, seen = [], set()
    for node in _reached(top[name], top):
        for text, resolved, line in _references(node, aliases):
            if _matches(resolved, calls) and (text, line) not in seen:
                seen.add((text, line))
                found.append(Shortcut(piece, text, line, instead))
    return sorted(found, key=lambda s: s.line)


def _aliases(tree: ast.Module) -> dict[str, str]:
    """{a name in the file: the module or object it stands for}, from every import in it."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _reached(start: ast.AST, top: dict) -> list[ast.AST]:
    """`start` and every top-level function or class of the file it names, transitively."""
    todo, out = [start], []
    while todo:
        node = todo.pop()
        if node in out:
            continue
        out.append(node)
        todo += [top[n.id] for n in ast.walk(node)
                 if isinstance(n, ast.Name) and n.id in top and top[n.id] is not node]
    return out


def _references(node: ast.AST, aliases: dict) -> list[tuple[str, str, int]]:
    """(as written, resolved dotted name, line) for each name or attribute chain in `node`;
    an attribute on a value that is not an imported name resolves as Tensor.<attribute>."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            parts, base = [n.attr], n.value
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            dotted = ".".join(reversed(parts))
            if isinstance(base, ast.Name) and base.id in aliases:
                out.append((f"{base.id}.{dotted}", f"{aliases[base.id]}.{dotted}", n.lineno))
            elif len(parts) == 1:
                written = ast.unparse(n)
                out.append((written if len(written) <= 40 else f"….{n.attr}", f"Tensor.{n.attr}", n.lineno))
        elif isinstance(n, ast.Name) and n.id in aliases and "." in aliases[n.id]:
            out.append((n.id, aliases[n.id], n.lineno))
    return out


def _matches(resolved: str, calls: tuple[str, ...]) -> bool:
    resolved = resolved.replace("torch.nn.modules.activation.", "torch.nn.")
    return any(resolved == c or resolved.startswith(c + ".") for c in calls)


def apply(results, folder: Path, policy: str) -> list[Shortcut]:
    """Applies `policy` to `results` (gradescope.Results) for the learner's files in `folder`:
    every test of a piece that uses a shortcut gets the reason in its output, and under
    "refuse" no points. Returns the shortcuts found."""
    if policy not in POLICIES:
        raise ValueError(f"--library-shortcuts must be one of {', '.join(POLICIES)}, not {policy!r}")
    if policy == "allow":
        return []
    found: dict[str, list[Shortcut]] = {}
    for test in results.tests:
        if test.exercise not in found:
            activity = test.exercise.split(".", 1)[0]
            found[test.exercise] = find(Path(folder) / f"{activity}.py", test.exercise)
        uses = found[test.exercise]
        if not uses or test.skipped:
            continue
        why = " ".join(s.teach() for s in uses)
        if policy == "refuse":
            test.passed, test.fraction = False, 0.0
            why += " This course's policy gives the tests of such a piece no points."
        test.output = f"{why}\n{test.output}" if test.output else why
    return [s for uses in found.values() for s in uses]
