#!/usr/bin/env bash
# Build the Gradescope autograder zip from the course repository:
#   docs/gradescope/make_zip.sh [HIDDEN_TESTS_DIR] [OUT.zip]
# Gradescope unpacks the zip INTO /autograder/source, so the learner's release of the course
# (andrea-release: the package and its graded tests, no solutions/, no hidden tests) is at the
# zip's root, next to setup.sh and run_autograder; hidden tests go to hidden_tests/ (setup.sh
# makes them readable by root only); a leaderboard.json among them turns the capstone leaderboard on
# (docs/instructors.md, section 7). PYTHON: a Python that imports andrea_course (default python3).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HIDDEN=${1:-}
OUT=$(realpath -m "${2:-autograder.zip}")
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
(cd "$ROOT" && "${PYTHON:-python3}" -m andrea_course.release "$STAGE/course" >/dev/null)
mv "$STAGE/course"/* "$STAGE/course"/.[!.]* "$STAGE/" 2>/dev/null || true
rmdir "$STAGE/course"
cp "$ROOT/docs/gradescope/setup.sh" "$ROOT/docs/gradescope/run_autograder" "$STAGE/"
chmod +x "$STAGE/setup.sh" "$STAGE/run_autograder"
if [ -n "$HIDDEN" ]; then
  [ -d "$HIDDEN" ] || { echo "make_zip.sh: hidden tests folder $HIDDEN does not exist" >&2; exit 2; }
  cp -r "$HIDDEN" "$STAGE/hidden_tests"
fi
rm -f "$OUT"
(cd "$STAGE" && python3 -c '
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for folder, dirs, files in os.walk("."):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            z.write(path, os.path.relpath(path, "."))
' "$OUT")
echo "wrote $OUT"
