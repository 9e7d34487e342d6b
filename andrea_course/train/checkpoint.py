"""Checkpoints that survive a preempted machine: atomic, verified, complete.

    RUN_DIR/checkpoints/step_0000200/
        model.safetensors     the weights, with the ModelConfig inside (andrea_course.weights)
        state.pt              optimizer, scheduler, grad scaler, data position, step, train config
        rng_rank0.pt ...      torch (CPU and CUDA), numpy and python RNG states, one file per rank
        manifest.json         step, world size and the SHA-256 of every file above (written last)
    RUN_DIR/checkpoints/latest   the name of the newest complete checkpoint

Writing: everything goes into step_N.tmp/, each file is fsynced, manifest.json last, then the
folder is renamed to step_N and `latest` is replaced (write, fsync, rename). A crash at any
moment leaves either the old checkpoint or the new one, never half of one. Only then are
checkpoints beyond `keep` deleted, so the last good one is always there.

Reading: every file's hash is checked against the manifest, and the config against the run's;
a truncated, altered or mismatched checkpoint is refused with a CheckpointError that says what
is wrong and which good checkpoint remains.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch

MANIFEST = "manifest.json"
LATEST = "latest"


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, corrupt or does not fit this run."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def rng_state() -> dict:
    """This process's RNG states (JSON-able lists for numpy and python, tensors for torch)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    version, state, gauss_next = random.getstate()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(gauss)],
            "python": [version, list(state), gauss_next]}


def set_rng_state(s: dict) -> None:
    torch.set_rng_state(s["torch"])
    if s["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])
    kind, keys, pos, has_gauss, gauss = s["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, state, gauss_next = s["python"]
    random.setstate((version, tuple(state), gauss_next))


def checkpoints_dir(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / "checkpoints"


def step_name(step: int) -> str:
    return f"step_{step:07d}"


def save(run_dir, step: int, model_state_writer, state: dict, rank: int, world: int,
         barrier=lambda: None, keep: int = 2) -> Path | None:
    """Write checkpoint `step` from all ranks (each rank calls this).

    model_state_writer(path): writes model.safetensors (rank 0 only is asked to).
    state: optimizer/scheduler/scaler/data/train-config dict (rank 0 writes it).
    Every rank writes its own RNG file. Returns the checkpoint's folder on rank 0.
    """
    root = checkpoints_dir(run_dir)
    final = root / step_name(step)
    tmp = root / (step_name(step) + ".tmp")
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    barrier()
    torch.save(rng_state(), tmp / f"rng_rank{rank}.pt")
    _fsync(tmp / f"rng_rank{rank}.pt")
    if rank == 0:
        model_state_writer(tmp / "model.safetensors")
        _fsync(tmp / "model.safetensors")
        torch.save(state, tmp / "state.pt")
        _fsync(tmp / "state.pt")
    barrier()
    if rank != 0:
        barrier()
        return None
    files = sorted(p.name for p in tmp.iterdir())
    manifest = {"step": step, "world_size": world, "files": {f: _sha256(tmp / f) for f in files}}
    _write_atomic(tmp / MANIFEST, json.dumps(manifest, indent=1))
    if final.exists():                               # a re-save of the same step
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync(root)
    _write_atomic(root / LATEST, final.name + "\n")
    for old in sorted(p for p in root.glob("step_*") if p.is_dir() and not p.name.endswith(".tmp"))[:-keep or None]:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def verify(folder: Path) -> dict:
    """The manifest of a complete, unaltered checkpoint; CheckpointError otherwise."""
    folder = Path(folder)
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise CheckpointError(f"{folder} has no {MANIFEST}: an incomplete checkpoint")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        files = manifest["files"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{manifest_path} is corrupt: {exc}") from exc
    for name, digest in files.items():
        path = folder / name
        if not path.is_file():
            raise CheckpointError(f"{path} is missing")
        if _sha256(path) != digest:
            raise CheckpointError(f"{path} is corrupt (truncated or altered): its SHA-256 does not match "
                                  f"the manifest written with it")
    return manifest


def good_checkpoints(run_dir) -> list[Path]:
    """Complete, verified checkpoints of a run, newest first."""
    out = []
    for folder in sorted(checkpoints_dir(run_dir).glob("step_*"), reverse=True):
        if folder.is_dir() and not folder.name.endswith(".tmp"):
            try:
                verify(folder)
                out.append(folder)
            except CheckpointError:
                pass
    return out


def find(run_dir_or_ckpt) -> Path:
    """The checkpoint to resume from: a step folder itself, or a run's `latest`."""
    path = Path(run_dir_or_ckpt)
    if (path / MANIFEST).exists() or path.name.startswith("step_"):
        return path
    root = checkpoints_dir(path)
    latest = root / LATEST
    if not latest.is_file():
        raise CheckpointError(f"no checkpoint to resume from in {path} (no {latest})")
    return root / latest.read_text(encoding="utf-8").strip()


def load(folder: Path, rank: int, world: int) -> tuple[dict, dict]:
    """(state, rng) of a verified checkpoint for this rank."""
    try:
        manifest = verify(folder)
    except CheckpointError as exc:
        good = [g for g in good_checkpoints(folder.parent.parent) if g != folder]
        advice = (f"the last good checkpoint, {good[0]}, is kept: resume from it with --resume {good[0]}"
                  if good else "no good checkpoint remains in this run")
        raise CheckpointError(f"refusing to resume: {exc}; {advice}") from exc
    if manifest["world_size"] != world:
        raise CheckpointError(f"{folder} was written by {manifest['world_size']} process(es), this run has {world}: "
                              f"resume with the same number of processes")
    state = torch.load(folder / "state.pt", map_location="cpu", weights_only=True)
    rng = torch.load(folder / f"rng_rank{rank}.pt", map_location="cpu", weights_only=True)
    return state, rng
