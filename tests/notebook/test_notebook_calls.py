"""No green box the notebook can break: every call a notebook makes to a learner's piece (its
tensors' ranks, dtypes and layout, its keywords, the options of a config) is one a graded test of
that piece makes too (tests/piece_calls.py records both).

Here: the recorder itself, and the notebooks that run in a few seconds, run in this process with
the answer key's pieces (a submission that passes every graded test). Every notebook, the slow ones
included, is checked in nbval's own run of the notebooks with the answer key (`make test`, which
loads tests/piece_calls.py as a pytest plugin); test_the_nbval_run_checks_the_calls shows that
check at work on a small notebook.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import piece_calls
from andrea_course import ModelConfig
from andrea_course.paths import ROOT

QUICK = ["01_embeddings.ipynb", "03_multihead.ipynb", "04_mlp.ipynb", "08_kernels.ipynb"]   # seconds each, here


@pytest.fixture(scope="module")
def graded():
    return piece_calls.record_graded()


def test_a_signature_holds_ranks_dtypes_layout_and_keywords():
    x = torch.zeros(2, 3, 4)
    assert piece_calls.signature((x, x.transpose(1, 2), 5, None), {"causal": True, "kernel": object()}) == \
        "(tensor3d:float32, tensor3d:float32:strided, int, None, causal=bool)"
    assert piece_calls.signature((torch.zeros(5, dtype=torch.long),), {}) == "(tensor1d:int64)"
    modern = ModelConfig.preset("andrea-tiny-modern")
    assert piece_calls.describe(modern, "block.Block") == "config(rmsnorm,swiglu,bias=False,G<H)"
    assert piece_calls.describe(modern, "embeddings.Embeddings") == "config(learned)"     # its only option


def test_a_strided_tensor_in_a_test_covers_a_contiguous_one_not_the_reverse():
    assert piece_calls.covers("(tensor4d:float32:strided, int)", "(tensor4d:float32, int)")
    assert not piece_calls.covers("(tensor4d:float32, int)", "(tensor4d:float32:strided, int)")
    assert not piece_calls.covers("(tensor4d:float64:strided, int)", "(tensor4d:float32, int)")


def test_recorded_classes_stay_classes_and_record_what_the_learner_writes():
    recorder = piece_calls.Recorder()
    Block = piece_calls.recording(piece_calls.InProcessStudent("solutions").piece("block", "Block"), "block.Block", recorder)
    cfg = ModelConfig(vocab_size=16, context_length=8, d_model=16, n_layers=1, n_heads=4, d_ff=32)
    block = Block(cfg)
    assert isinstance(block, torch.nn.Module)
    block(torch.zeros(1, 3, 16), None)
    assert set(recorder.calls) == {"block.Block", "block.Block.forward"}
    assert list(recorder.calls["block.Block.forward"]) == ["(tensor3d:float32, None)"]


def test_a_call_no_graded_test_makes_is_reported():
    notebook, graded = piece_calls.Recorder(), piece_calls.Recorder()
    notebook.where = "cell 40"
    notebook.note("embeddings.embed_lookup", (torch.zeros(5, 3), torch.zeros(4, dtype=torch.long)), {})
    graded.note("embeddings.embed_lookup", (torch.zeros(5, 3), torch.zeros(2, 4, dtype=torch.long)), {})
    (gap,) = piece_calls.gaps(notebook, graded)
    assert gap.startswith("cell 40: embeddings.embed_lookup(tensor2d:float32, tensor1d:int64)")
    assert "(tensor2d:float32, tensor2d:int64)" in gap


def test_the_graded_tests_look_up_one_sequence_as_notebook_01_does(graded):
    """The call that broke notebook 01 (cell 40): embed_lookup of 1-D ids."""
    assert "(tensor2d:float32, tensor1d:int64)" in graded.calls["embeddings.embed_lookup"]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("notebook", QUICK)
def test_every_call_of_the_notebook_is_made_by_a_graded_test(notebook, graded):
    recorder = piece_calls.Recorder()
    piece_calls.run_notebook(ROOT / "notebooks" / notebook, recorder)
    assert recorder.calls, f"{notebook} made no call to a learner's piece"
    missing = piece_calls.gaps(recorder, graded)
    assert not missing, "\n".join(missing)


NOTEBOOK = {  # a small notebook: one call a graded test makes, one no graded test makes (ids of rank 3)
    "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": [
        "import torch\n",
        "from andrea_course.notebook import use\n",
        "lookup = use('embeddings', 'embed_lookup')\n",
        "table = torch.randn(11, 6)\n",
        "x = lookup(table, torch.tensor([[1, 2], [3, 4]]))\n",
        "y = lookup(table, torch.zeros(2, 2, 2, dtype=torch.long))\n"]}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.nightly
def test_the_nbval_run_checks_the_calls(tmp_path):
    """nbval with the plugin (as `make test` runs the notebooks): the kernel records the calls and
    the session fails, naming the one call no graded test makes. Nightly (a minute: the plugin runs
    the graded suite once); `make test` runs the plugin on every notebook, and the tests above
    check the same recorder finds a gap."""
    pytest.importorskip("nbval")
    path = tmp_path / "calls.ipynb"
    path.write_text(json.dumps(NOTEBOOK), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_", piece_calls.RECORD_ENV))}
    env.update(ANDREA_IMPL="solutions", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(Path(__file__).parents[1])]))   # tests/: piece_calls
    env.pop("IPYTHONDIR", None)
    xdist = ["-n", "1"] if importlib.util.find_spec("xdist") else []          # as make test runs it: in a worker
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "piece_calls", "-p", "no:cacheprovider", *xdist,
                          "--nbval-lax", "--nbval-current-env", str(path)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-3000:]
    assert "piece_calls: 1 of the 2 calls" in out, out[-3000:]
    assert "embeddings.embed_lookup(tensor2d:float32, tensor3d:int64)" in out, out[-3000:]
