#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
# The autograder zip holds: setup.sh, run_autograder, and source/ (the course repository,
# with hidden_tests/ inside it if you have private tests).
set -eux
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip
# A system-wide interpreter (not under /root) so that the learner's code can run as `nobody`.
python3 -m venv /opt/andrea
/opt/andrea/bin/pip install --upgrade pip
# CPU torch is enough to grade; on a GPU autograder drop the index URL.
/opt/andrea/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
/opt/andrea/bin/pip install -e '/autograder/source[test,kernels]'
ln -sf /opt/andrea/bin/andrea-grade /usr/local/bin/andrea-grade
chmod -R a+rX /opt/andrea /autograder/source
