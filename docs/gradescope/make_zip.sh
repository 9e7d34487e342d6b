#!/usr/bin/env bash
# Build the Gradescope autograder zip from the course repository:
#   docs/gradescope/make_zip.sh [HIDDEN_TESTS_DIR] [OUT.zip]
# The zip holds setup.sh, run_autograder and source/ (tracked files, plus hidden tests).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HIDDEN=${1:-}
OUT=$(realpath -m "${2:-autograder.zip}")
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
cp "$ROOT/docs/gradescope/setup.sh" "$ROOT/docs/gradescope/run_autograder" "$STAGE/"
mkdir "$STAGE/source"
git -C "$ROOT" archive HEAD | tar -x -C "$STAGE/source"
if [ -n "$HIDDEN" ]; then cp -r "$HIDDEN" "$STAGE/source/hidden_tests"; fi
rm -f "$OUT"
(cd "$STAGE" && zip -qr "$OUT" .)
echo "wrote $OUT"
