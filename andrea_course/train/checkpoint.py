"""Checkpoints that survive a preempted machine: atomic, verified, complete, any world size.

    RUN_DIR/checkpoints/step_0000200/
        model.safetensors     the weights, with the ModelConfig inside (andrea_course.engine.weights)
        state.pt              optimizer (by parameter name), data position, step, configs, data identity
        rng_rank0.pt ...      torch (CPU and CUDA), numpy and python RNG states, one file per rank
        manifest.json         step, world size, loss and the SHA-256 of every file above (written last)
    RUN_DIR/checkpoints/latest   the name of the newest complete checkpoint

The weights and the optimizer state are saved whole, keyed by parameter name (gathered from the
processes with torch.distributed.checkpoint's state-dict API, which also handles FSDP shards), so
a checkpoint written by N processes resumes on M: DDP, FSDP or one process, any M.

Writing: everything goes into step_N.tmp/, each file is fsynced, manifest.json last, then the
folder is renamed to step_N and `latest` is replaced (write, fsync, rename). A crash at any
moment leaves either the old checkpoint or the new one, never half of one. Only then are
checkpoints beyond `keep` deleted, so the last good one is always there. The trainer writes no
checkpoint of weights or a loss that are not finite, so rotation never removes the last finite one.

Reading: every file's hash is checked against the manifest; a truncated, altered, incomplete or
mismatched checkpoint is refused with a CheckpointError, one line saying what is wrong and which
good checkpoint remains.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch

from . import files

MANIFEST = "manifest.json"
LATEST = "latest"
STEP_NAME = re.compile(r"step_\d{7}")


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, corrupt or does not fit this run."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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
        torch.cuda.set_rng_state_all(s["cuda"][:torch.cuda.device_count()])
    kind, keys, pos, has_gauss, gauss = s["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    version, state, gauss_next = s["python"]
    random.setstate((version, tuple(state), gauss_next))


def checkpoints_dir(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / "checkpoints"


def step_name(step: int) -> str:
    return f"step_{step:07d}"


def _complete(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("step_*") if p.is_dir() and STEP_NAME.fullmatch(p.name))


def save(run_dir, step: int, model_state_writer, state: dict, rank: int, world: int,
         barrier=lambda: None, keep: int = 2, loss: float | None = None) -> Path | None:
    """Write checkpoint `step` from all ranks (each rank calls this).

    model_state_writer(path): writes model.safetensors (rank 0 only is asked to).
    state: optimizer/data/config dict (rank 0 writes it).
    Every rank writes its own RNG file. Returns the checkpoint's folder on rank 0.
    A failed write (a full disk) removes the partial folder and raises CheckpointError naming
    the file, the cause and the last good checkpoint, which is untouched.
    """
    root = checkpoints_dir(run_dir)
    final = root / step_name(step)
    tmp = root / (step_name(step) + ".tmp")
    failed = None
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    barrier()
    try:
        torch.save(rng_state(), tmp / f"rng_rank{rank}.pt")
        files.fsync(tmp / f"rng_rank{rank}.pt")
        if rank == 0:
            model_state_writer(tmp / "model.safetensors")
            files.fsync(tmp / "model.safetensors")
            torch.save(state, tmp / "state.pt")
            files.fsync(tmp / "state.pt")
    except (OSError, RuntimeError) as exc:
        failed = exc
    barrier()
    if rank != 0:
        barrier()
        if failed:
            raise CheckpointError(f"could not write checkpoint {final}: {files.describe(failed)}")
        return None
    try:
        if failed:
            raise failed
        names = sorted(p.name for p in tmp.iterdir())
        manifest = {"step": step, "world_size": world, "loss": loss,
                    "files": {f: _sha256(tmp / f) for f in names}}
        files.write_text(tmp / MANIFEST, json.dumps(manifest, indent=1))
        if final.exists():                               # a re-save of the same step
            shutil.rmtree(final)
        os.replace(tmp, final)
        files.fsync(root)
        files.write_text(root / LATEST, final.name + "\n")
    except (OSError, RuntimeError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        barrier()
        cause = "no space left on device" if files.is_disk_full(exc) else files.describe(exc)
        raise CheckpointError(f"could not write checkpoint {final}: {cause}; "
                              f"{_advice(run_dir, final)}") from exc
    for old in _complete(root)[:-keep or None]:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def verify(folder: Path, only: tuple[str, ...] | None = None) -> dict:
    """The manifest of a complete, unaltered checkpoint; CheckpointError otherwise.
    only: check just these files' hashes (sampling needs only the weights)."""
    folder = Path(folder)
    manifest_path = folder / MANIFEST
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not a checkpoint folder")
    if not manifest_path.is_file():
        raise CheckpointError(f"{folder} has no {MANIFEST}: an incomplete checkpoint")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        listed = manifest["files"]
        int(manifest["step"])
        if not isinstance(listed, dict):
            raise TypeError("files is not an object")
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{manifest_path} is corrupt ({type(exc).__name__}: {exc})") from exc
    needed = {"model.safetensors", "state.pt", "rng_rank0.pt"} if only is None else set(only)
    for name in sorted(needed - set(listed)):
        raise CheckpointError(f"{manifest_path} lists no {name}: an incomplete checkpoint")
    for name, digest in listed.items():
        if only is not None and name not in only:
            continue
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
    for folder in reversed(_complete(checkpoints_dir(run_dir))):
        try:
            verify(folder)
            out.append(folder)
        except CheckpointError:
            pass
    return out


def _advice(run_dir, bad: Path | None) -> str:
    good = [g for g in good_checkpoints(run_dir) if g != bad]
    if good:
        return f"the last good checkpoint is {good[0]}: resume from it with --resume {good[0]}"
    return "no good checkpoint remains in this run"


def run_of(folder: Path) -> Path:
    """The run folder a checkpoint folder belongs to."""
    return folder.parent.parent


def find(run_dir_or_ckpt) -> Path:
    """The checkpoint to resume from: a step folder itself, or a run's `latest`."""
    path = Path(run_dir_or_ckpt)
    if not path.exists():
        raise CheckpointError(f"no checkpoint to resume from: {path} does not exist")
    if not path.is_dir():
        raise CheckpointError(f"{path} is a file: give a run folder or a checkpoint folder (step_...)")
    if (path / MANIFEST).exists() or (STEP_NAME.fullmatch(path.name) and path.parent.name == "checkpoints"):
        return path
    root = checkpoints_dir(path)
    latest = root / LATEST
    if not root.is_dir():
        raise CheckpointError(f"no checkpoint to resume from in {path}: it is not a run folder (no {root.name}/)")
    if not latest.is_file():
        raise CheckpointError(f"no checkpoint to resume from in {path} (no {latest}); {_advice(path, None)}")
    name = latest.read_bytes().decode("utf-8", errors="replace").strip()
    if not STEP_NAME.fullmatch(name):
        raise CheckpointError(f"{latest} is corrupt (it holds {name[:40]!r}, not a checkpoint's name); "
                              f"{_advice(path, None)}")
    if not (root / name).is_dir():
        raise CheckpointError(f"{latest} names {name}, which is missing; {_advice(path, None)}")
    return root / name


def load(folder: Path, rank: int) -> tuple[dict, dict]:
    """(state, rng) of a verified checkpoint for this rank. A checkpoint written by fewer
    processes gives a new rank the RNG of rank 0 (every rank is seeded alike)."""
    try:
        manifest = verify(folder)
        state = torch.load(folder / "state.pt", map_location="cpu", weights_only=True)
        rng_file = folder / f"rng_rank{rank}.pt"
        if f"rng_rank{rank}.pt" not in manifest["files"]:
            rng_file = folder / "rng_rank0.pt"
        rng = torch.load(rng_file, map_location="cpu", weights_only=True)
    except CheckpointError as exc:
        raise CheckpointError(f"refusing to resume: {exc}; {_advice(run_of(folder), folder)}") from exc
    except Exception as exc:       # torch.load's many errors of a file that hashes right but does not load
        raise CheckpointError(f"refusing to resume: {folder} cannot be read ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0] if str(exc) else ''}); "
                              f"{_advice(run_of(folder), folder)}") from exc
    return state, rng

