#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu 22.04 or
# newer: 18.04's Python is too old). The zip's contents are in /autograder/source: the course
# repository at its root, and hidden_tests/ if you have private tests.
#
# Installs Python, bubblewrap (the learner's sandbox), CPU torch and the course with every
# extra its graded tests need (test: pytest; kernels: Triton; train: tokenizers, for the BPE
# tests) into a venv every user can read, as the sandbox needs; hidden_tests/ stays root's.
#
# Knobs (for the course's CI, which runs these steps into a temp "/autograder"):
#   AUTOGRADER (/autograder)  ANDREA_VENV (/opt/andrea)  ANDREA_SKIP_APT (0)
#   ANDREA_REUSE_VENV (0: create the venv)  ANDREA_PIP_OPTS (extra pip options)
#   ANDREA_BIN (/usr/local/bin: where andrea-grade is linked; empty: no link)
set -eux
AUTOGRADER=${AUTOGRADER:-/autograder}
SOURCE=$AUTOGRADER/source
VENV=${ANDREA_VENV:-/opt/andrea}
PIP_OPTS=${ANDREA_PIP_OPTS:-}
BIN=${ANDREA_BIN-/usr/local/bin}
if [ "${ANDREA_SKIP_APT:-0}" != 1 ]; then
  apt-get update
  apt-get install -y --no-install-recommends python3 python3-venv python3-pip bubblewrap
fi
if [ "${ANDREA_REUSE_VENV:-0}" != 1 ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --upgrade pip
fi
# CPU torch is enough to grade; on a GPU autograder drop the index URL.
"$VENV/bin/python" -m pip install $PIP_OPTS torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
"$VENV/bin/python" -m pip install $PIP_OPTS -e "$SOURCE[test,kernels,train]"
if [ -n "$BIN" ]; then ln -sf "$VENV/bin/andrea-grade" "$BIN/andrea-grade"; fi
# The sandbox's unprivileged user reads Python and the course; never the hidden tests.
chmod -R a+rX "$VENV" "$SOURCE"
chmod a+rx "$AUTOGRADER"
if [ -d "$SOURCE/hidden_tests" ] && [ "$(id -u)" = 0 ]; then
  chown -R 0:0 "$SOURCE/hidden_tests"
  chmod -R go-rwx "$SOURCE/hidden_tests"
fi
