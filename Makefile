# Two commands matter:  `make lab`  (set up, then open the course)  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch is pinned here (not in pyproject.toml) so that CI is reproducible. Which build pip
# takes depends on the index: on Linux PyPI's torch==2.13.0 is the CUDA build (several GB);
# for the CPU build set TORCH_INDEX=https://download.pytorch.org/whl/cpu, for a GPU e.g.
#   TORCH_INDEX=https://download.pytorch.org/whl/cu128
TORCH     ?= torch==2.13.0
TORCH_INDEX ?=
PIP       := $(BIN)/python -m pip install -q --disable-pip-version-check
LAB_STAMP := $(VENV)/.lab-installed
ALL_STAMP := $(VENV)/.installed

.PHONY: lab test test-nightly grade setup exercises train bench gpu clean
setup: $(ALL_STAMP)

# One pip call per set (one resolution; torch first where it comes from its own index), then
# the venv's bytecode compiled on every core: pip's own compiling, one file after another, took
# longer than the install itself. Skipped (NOT_IMPORTED): what neither the notebooks, the tools
# nor the tests import, measured from which .pyc files a whole `make test` read: pip, the 400
# transformers models other than GPT-2, sympy's physics, torch's inductor and testing, and
# pandas and pyarrow if `datasets` is there: a fifth of the files and a third of the
# compiling (39 s on 2 cores became 27 s). (Python compiles a skipped module when it is first imported.)
# The course's own package too: installed editable, its bytecode lives beside its source, and a
# process that may not write it (PYTHONDONTWRITEBYTECODE set, the grader's read-only sandbox)
# compiled it again at every start: a quarter of a second for each worker, kernel and tool.
NOT_IMPORTED := /site-packages/(pip|pandas|pyarrow|sympy/physics|torch/(_inductor|testing)|transformers/models/(?!(auto|gpt2|encoder_decoder)/))/
# $(call install,EXTRAS): the venv, torch, the course (editable) with EXTRAS, and its kernel.
# The kernelspec is named python3, the name the notebooks carry (Colab, Binder and VS Code know
# it), shown as "ANDREA course".
define install
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH_INDEX),$(PIP) --no-compile $(TORCH) --index-url $(TORCH_INDEX))
	$(PIP) --no-compile $(TORCH) -e '.[$(1)]'
	@$(BIN)/python -m compileall -q -j 0 -x '$(NOT_IMPORTED)' $(VENV)/lib andrea_course >/dev/null 2>&1 || true   # (some packages ship files that do not compile, on purpose)
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "ANDREA course"
endef

# What a learner needs: torch, the course with JupyterLab, widgets, plots, pytest for check()
# and Triton for notebook 08.
$(LAB_STAMP): pyproject.toml
	$(call install,notebooks)
	@touch $@

# Everything: the learner's set plus training, Hugging Face, the test suite and the browser test.
$(ALL_STAMP): pyproject.toml
	$(call install,all)
	@touch $@ $(LAB_STAMP)

# As root (containers, cloud machines) JupyterLab wants --allow-root.
lab: $(LAB_STAMP)
	cd notebooks && ../$(BIN)/jupyter-lab $(if $(filter 0,$(shell id -u)),--allow-root)

# The whole suite: unit and graded tests; every notebook under nbval with the reference solutions
# (tests/piece_calls.py then checks that a graded test makes every call the notebooks make to a
# learner's piece; tests/plot_outputs.py that every cell meant to show a plot shows one); then
# the learner's release (andrea-release: no solutions/, no hidden tests, the untouched
# exercises), whose every notebook must still run: in a real JupyterLab in headless
# Chromium (tests/notebook/test_browser.py: two JupyterLabs and browsers side by side), or under nbval where
# Chromium is absent. Each stage prints its time. Tests marked `nightly` (fresh virtual
# environments for each extra, the larger memory profiles: minutes each) run with
# `make test-nightly`, not here. A learner's release (no solutions/) has its own `make test`, below.
# Two workers (test processes or notebook kernels) on two cores, one torch thread each:
# threads fighting over the cores made small-tensor training cells 5-20x slower.
# The unit tests end with their 15 slowest: a slow CI run shows where its time went. They keep
# the order tests/conftest.py gives them, the longest scopes first (--no-loadscope-reorder: by
# default pytest-xdist orders scopes by their number of tests, which left one-test scopes of a
# minute or two to the end).
PYTEST := OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 --dist loadscope
NOKEY  := $(abspath build/release)
CHROMIUM ?= $(or $(shell command -v chromium 2>/dev/null),$(shell command -v chromium-browser 2>/dev/null))
# $(call stage,NAME,COMMAND): run COMMAND, then say how long it took (and stop make if it failed)
stage = @start=$$(date +%s); echo "== stage $(1)"; $(2); rc=$$?; \
	echo "== stage $(1): $$(( $$(date +%s) - start )) s$$( [ $$rc = 0 ] || echo ", FAILED (exit $$rc)")"; exit $$rc
# (the browser test without loadscope: each notebook is a test of its own, shared out one by one)
release_in_browser = CHROMIUM=$(CHROMIUM) ANDREA_RELEASE=$(NOKEY) OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 -m browser tests/notebook/test_browser.py
release_in_nbval = cd $(NOKEY) && ANDREA_IMPL=exercises PYTHONPATH=$(NOKEY):$(abspath tests) OMP_NUM_THREADS=1 \
	$(abspath $(BIN))/python -m pytest -n 2 --dist loadscope -p no:cacheprovider -p plot_outputs --nbval-lax --nbval-current-env notebooks
ifneq ($(wildcard solutions),)
test: $(ALL_STAMP)
	$(call stage,unit and graded tests,ANDREA_IMPL=solutions $(PYTEST) --no-loadscope-reorder -m "not browser and not nightly" --durations=15 tests andrea_course/activity_tests instructor/hidden_tests)
	$(call stage,notebooks with the answer key,ANDREA_IMPL=solutions PYTHONPATH=tests $(PYTEST) -p piece_calls -p plot_outputs --nbval-lax --nbval-current-env notebooks)
	$(call stage,the learner's release: every notebook $(if $(CHROMIUM),in JupyterLab in Chromium,under nbval (no Chromium)),$(BIN)/andrea-release --force $(NOKEY) >/dev/null && $(if $(CHROMIUM),$(release_in_browser),$(release_in_nbval)))
else
# In a learner's copy (no solutions/): what a learner needs, with the set `make lab` installs: your
# grade (`make grade`), then every notebook run top to bottom on your exercises/, their outputs
# written to build/notebooks/ (your notebooks are left as they are).
test: $(LAB_STAMP)
	$(call stage,your grade,$(BIN)/andrea-grade exercises --own-work)
	$(call stage,every notebook on your exercises,ANDREA_IMPL=exercises OMP_NUM_THREADS=1 $(BIN)/jupyter nbconvert \
		--to notebook --execute --ExecutePreprocessor.timeout=1800 --output-dir build/notebooks notebooks/*.ipynb)
endif

# Minutes each: every extra in its own fresh virtual environment (the simulated Colab among them),
# and the memory profiles of bf16, activation checkpointing, the modern block and ANDREA-120M.
test-nightly: $(ALL_STAMP)
	$(call stage,nightly tests,ANDREA_IMPL=solutions $(PYTEST) -m nightly --durations=15 tests)

# Your exercises/ graded as the autograder grades them (the same tests, the same worker, no
# sandbox: your own work): a score table, one line per failing test, no tracebacks; exit 0 once
# graded, whatever the score.
grade: $(LAB_STAMP)
	$(BIN)/andrea-grade exercises --own-work

exercises: $(LAB_STAMP)
	$(BIN)/andrea-make-exercises

train: $(ALL_STAMP)
	$(BIN)/andrea-train --config andrea-tiny --out runs/tiny

bench: $(ALL_STAMP)
	$(BIN)/python bench/model.py

# A GPU day: every GPU check in 8 minutes, one report (runs/gpu-day/report.json and .md; see
# bench/gpu_day.py). Without a GPU: make gpu GPU_DAY=--dry-run (make's own --dry-run only prints).
gpu: $(ALL_STAMP)
	$(BIN)/python bench/gpu_day.py $(GPU_DAY)

clean:
	rm -rf $(VENV)
