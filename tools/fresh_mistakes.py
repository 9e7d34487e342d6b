"""Fresh mistakes, graded as check() grades them: does each box name the mistake that was made?

    python tools/fresh_mistakes.py                 # every mistake and variant, a table at the end
    python tools/fresh_mistakes.py --only kernels  # ids or pieces containing a word
    python tools/fresh_mistakes.py --rescore tests/fresh/fresh_mistakes/results.json   # classify again, no run
    python tools/fresh_mistakes.py --set tests/fresh/fresh_mistakes2   # another set: its mistakes.py,
                                                   # verdicts.json and results.json in that folder

For each entry of the set's mistakes.py (--set DIR, default tests/fresh/fresh_mistakes) a learner folder is made: a copy of solutions/
with the entry's patch applied to one piece. The graded tests of that piece run against it the way
check() and the grader run them (grading/pipeline.py: every test of the piece, each in a worker
under the time limit), and the failing tests' boxes are kept.

A mistake is then
    passed  its piece passes: a wrong piece is taken for right;
    named   a box names it: one of the entry's `named` patterns matches the explaining rows of a
            failing test's box (every row but the learner's own line and the numbers);
    wrong   no pattern matches, and a box says what the code did (a "typical mistake" row, or
            any explaining row other than an exception's general reading) that is not this one;
    vague   no pattern matches and no diagnosis is confirmed: a generic box.
A reading by hand (DIR/verdicts.json: id -> verdict, note, digest of the box text
it was made on) replaces the rule while the box text is unchanged; a changed box is classified by
the rules again and marked unreviewed in the table.
To read a changed box by hand: look it up in the results file, then put its id in verdicts.json
with the verdict, a note and the results file's digest for it.
A variant (a correct but unusual piece) must pass.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "fresh" / "fresh_mistakes"
SKIP_LABELS = {"where", "shape", "largest error", "where they differ", "more help", "later", "problem", "hint"}
NONE_FOUND = re.compile(r"none of the typical mistakes|no typical mistake", re.I)
GENERAL_LABELS = {"what it means", ""}


def load_entries(data: Path = DATA):
    if str(ROOT / "tests" / "fresh") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests" / "fresh"))          # the sets import fresh_entries
    spec = importlib.util.spec_from_file_location("fresh_mistakes_data", data / "mistakes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MISTAKES, module.VARIANTS


def make_folder(root: Path, entry, solutions: Path) -> Path:
    """A learner folder: solutions/'s .py files, one of them patched. Raises ValueError when a
    patch's old text does not occur exactly once."""
    folder = root / entry.id
    folder.mkdir(parents=True)
    for f in solutions.glob("*.py"):
        shutil.copy(f, folder / f.name)
    path = folder / f"{entry.piece.split('.')[0]}.py"
    text = path.read_text(encoding="utf-8")
    for old, new in entry.patches:
        n = text.count(old)
        if n != 1:
            raise ValueError(f"{entry.id}: the old text occurs {n} times in {path.name}: {old[:60]!r}")
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    return folder


def boxes(result, folder: Path) -> list[dict]:
    """The failing tests of a CheckResult as plain data: name, status, rows (the temporary
    folder's path written as <learner>, so that the same boxes give the same digest)."""
    def plain(text) -> str:
        return str(text).replace(str(folder), "<learner>")
    if result.error or result.syntax:
        return [{"name": "(check)", "status": "error", "rows": [["problem", plain(result.error or result.syntax)]]}]
    out = []
    for o in result.outcomes:
        if o.status == "passed" or o.status == "skipped":
            continue
        rows = [[str(k), plain(v)] for k, v in (o.rows or [])] or [["problem", plain(o.message or o.status)]]
        out.append({"name": o.name, "status": o.status, "rows": rows})
    return out


def explaining_text(failed: list[dict]) -> str:
    return "\n".join(v for b in failed for k, v in b["rows"] if k not in SKIP_LABELS)


def confirmed_diagnoses(failed: list[dict]) -> list[str]:
    """The rows that say what the learner's code did: every explaining row but the general
    reading of an exception ("what it means") and a "none of the typical mistakes" line."""
    return [v for b in failed for k, v in b["rows"]
            if k not in SKIP_LABELS and k not in GENERAL_LABELS and not NONE_FOUND.search(v)]


def classify(entry, passed: bool, failed: list[dict]) -> str:
    if passed:
        return "passed"
    text = explaining_text(failed)
    if any(re.search(p, text, re.I) for p in entry.named):
        return "named"
    return "wrong" if confirmed_diagnoses(failed) else "vague"


def digest(failed: list[dict]) -> str:
    return hashlib.sha1(json.dumps(failed, sort_keys=True).encode()).hexdigest()[:12]


def run(entries, solutions: Path, upto_own: bool) -> list[dict]:
    from andrea_course.grading.local import run_graded_many
    results = []
    with tempfile.TemporaryDirectory(prefix="fresh-mistakes-") as tmp:
        for entry in entries:
            t0 = time.time()
            try:
                folder = make_folder(Path(tmp), entry, solutions)
            except ValueError as exc:
                results.append({"id": entry.id, "piece": entry.piece, "patch_error": str(exc)})
                print(f"  {entry.id}: PATCH ERROR {exc}", flush=True)
                continue
            upto = entry.piece.split(".")[0] if upto_own else None
            result = run_graded_many([entry.piece], str(folder), upto=upto)[entry.piece]
            failed = boxes(result, folder)
            results.append({"id": entry.id, "piece": entry.piece, "passed": result.passed,
                            "tests": len(result.outcomes), "failed": failed, "digest": digest(failed),
                            "seconds": round(time.time() - t0, 2)})
            print(f"  {entry.id:32s} {'PASSED' if result.passed else f'{len(failed)} fail'}"
                  f" ({time.time() - t0:.1f} s)", flush=True)
    return results


def verdicts_of(mistakes, results, reviewed: dict) -> None:
    by_id = {m.id: m for m in mistakes}
    for r in results:
        m = by_id.get(r["id"])
        if m is None or "patch_error" in r:
            continue
        r["truth"] = m.truth
        r["auto"] = classify(m, r["passed"], r["failed"])
        hand = reviewed.get(m.id)
        if hand and hand.get("digest") == r["digest"]:
            r["verdict"], r["note"], r["reviewed"] = hand["verdict"], hand.get("note", ""), True
        else:
            r["verdict"], r["reviewed"] = r["auto"], False


def table(mistake_results, variant_results) -> str:
    lines = []
    by_file = defaultdict(Counter)
    for r in mistake_results:
        if "verdict" in r:
            by_file[r["piece"].split(".")[0]][r["verdict"]] += 1
    kinds = ["named", "vague", "wrong", "passed"]
    lines.append(f"{'file':12s} " + " ".join(f"{k:>7s}" for k in kinds) + f" {'total':>7s}")
    total = Counter()
    for f in sorted(by_file):
        total.update(by_file[f])
        lines.append(f"{f:12s} " + " ".join(f"{by_file[f][k]:7d}" for k in kinds) + f" {sum(by_file[f].values()):7d}")
    n = sum(total.values())
    lines.append(f"{'all':12s} " + " ".join(f"{total[k]:7d}" for k in kinds) + f" {n:7d}")
    if n:
        lines.append(f"named: {total['named']} of {n} ({100 * total['named'] / n:.1f} %); "
                     f"unreviewed verdicts (box text changed since the reading by hand): "
                     f"{sum(1 for r in mistake_results if 'verdict' in r and not r['reviewed'])}")
    bad_variants = [r for r in variant_results if "patch_error" in r or not r["passed"]]
    lines.append(f"variants: {len(variant_results) - len(bad_variants)} of {len(variant_results)} pass")
    for r in bad_variants:
        lines.append(f"  VARIANT FAILS {r['id']} ({r['piece']}): " + short(r))
    errors = [r for r in mistake_results if "patch_error" in r]
    for r in errors:
        lines.append(f"  PATCH ERROR {r['id']}: {r['patch_error']}")
    for kind in ("passed", "wrong", "vague"):
        for r in mistake_results:
            if r.get("verdict") == kind:
                mark = "" if r["reviewed"] else " (unreviewed)"
                lines.append(f"  {kind.upper()}{mark} {r['id']} ({r['piece']}): {r['truth']}")
                if kind != "passed":
                    lines.append("      " + short(r))
    return "\n".join(lines)


def short(r: dict, width: int = 400) -> str:
    if "patch_error" in r:
        return r["patch_error"]
    text = " | ".join(f"{k}: {v}" for b in r["failed"][:2] for k, v in b["rows"]
                      if k not in ("where they differ", "more help", "later"))
    text = re.sub(r"\s+", " ", text)
    return text[:width] + ("..." if len(text) > width else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solutions", default=str(ROOT / "solutions"), help="the correct pieces to patch")
    ap.add_argument("--only", default="", help="run the entries whose id or piece contains this word")
    ap.add_argument("--variants", action="store_true", help="run only the correct variants (each must pass)")
    ap.add_argument("--set", default=str(DATA), metavar="DIR",
                    help="the folder of the set: its mistakes.py, verdicts.json and results.json")
    ap.add_argument("--out", help="where the results go (default DIR/results.json)")
    ap.add_argument("--verdicts", help="the readings by hand (default DIR/verdicts.json)")
    ap.add_argument("--upto-own", action="store_true",
                    help="run only the tests check() runs in the piece's own notebook (default: all, as the grader)")
    ap.add_argument("--rescore", metavar="RESULTS", help="classify the boxes of an earlier results file again "
                                                         "(new rules or readings), without running anything")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    data = Path(args.set)
    args.out = args.out or str(data / "results.json")
    args.verdicts = args.verdicts or str(data / "verdicts.json")
    mistakes, variants = load_entries(data)
    pick = [e for e in (variants if args.variants else mistakes + variants) if args.only in e.id or args.only in e.piece]
    t0 = time.time()
    if args.rescore:
        earlier = json.loads(Path(args.rescore).read_text())
        results = [r for r in earlier["mistakes"] + earlier["variants"] if any(r["id"] == e.id for e in pick)]
    else:
        results = run(pick, Path(args.solutions), args.upto_own)
    reviewed = json.loads(Path(args.verdicts).read_text()) if Path(args.verdicts).exists() else {}
    mistake_ids = {m.id for m in mistakes}
    mres = [r for r in results if r["id"] in mistake_ids]
    vres = [r for r in results if r["id"] not in mistake_ids]
    verdicts_of(mistakes, mres, reviewed)
    Path(args.out).write_text(json.dumps({"mistakes": mres, "variants": vres}, indent=1, ensure_ascii=False))
    print(table(mres, vres))
    print(f"{len(results)} entries in {time.time() - t0:.0f} s; results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
