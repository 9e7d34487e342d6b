"""Save and load ANDREA's weights: one safetensors file with the config inside.

    save_weights(model, "runs/tiny/model.safetensors")
    model = load_weights("runs/tiny/model.safetensors")            # builds the model from the file's config
    load_weights("runs/tiny/model.safetensors", model=model)       # fills an existing model (checked)
    (a model wrapped by torch.compile or DistributedDataParallel is unwrapped first)
    cfg = read_config("runs/tiny/model.safetensors")

The file is plain safetensors: every tensor by its state_dict name, and in the header's
metadata the ModelConfig as JSON (key "andrea_config"), so a file always says what it holds.
A tied table is stored once. Saving writes a temporary file and renames it, so a crash
mid-save never leaves a half-written file under the real name.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.nn as nn

from .config import RUN_SWITCHES, ConfigError, ModelConfig

FORMAT = "andrea-weights/1"
CONFIG_KEY = "andrea_config"
TIED_KEY = "andrea_tied"          # JSON {dropped name: kept name} for tensors stored once


class WeightsError(ValueError):
    """A weights file that cannot be read, or that does not fit the model it is loaded into."""


def save_weights(model: nn.Module, path: str | os.PathLike, metadata: dict[str, str] | None = None) -> Path:
    """Write model's parameters and config to `path` (safetensors). Returns the path.

    metadata: extra str -> str entries for the header (e.g. {"step": "1000"}); read them
    back with read_metadata.
    """
    from safetensors.torch import save_file

    model = unwrap(model)
    cfg = _config_of(model)
    path = Path(path)
    tensors, tied, seen = {}, {}, {}
    for name, t in model.state_dict(keep_vars=False).items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))
        if t.numel() and key in seen:            # the same tensor under a second name (tying)
            tied[name] = seen[key]
            continue
        seen[key] = name
        tensors[name] = t.detach().contiguous().cpu()
    meta = {"format": FORMAT, CONFIG_KEY: json.dumps(cfg.to_dict(), sort_keys=True)}
    if tied:
        meta[TIED_KEY] = json.dumps(tied, sort_keys=True)
    for k, v in (metadata or {}).items():
        if k in meta or not isinstance(k, str) or not isinstance(v, str):
            raise WeightsError(f"metadata must map str to str and not use the reserved keys "
                               f"{sorted(meta)}; got {k!r}: {v!r}")
        meta[k] = v
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata=meta)
    os.replace(tmp, path)
    return path


def read_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The header metadata of a weights file (the config as JSON under "andrea_config")."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no weights file at {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except Exception as exc:                     # safetensors raises its own error types
        raise WeightsError(f"{path} is not a readable safetensors file (truncated or corrupt?): "
                           f"{type(exc).__name__}: {exc}") from exc
    if CONFIG_KEY not in meta:
        raise WeightsError(f"{path} holds no ANDREA config (metadata key {CONFIG_KEY!r}); "
                           f"was it written by andrea_course.engine.weights.save_weights?")
    return dict(meta)


def read_config(path: str | os.PathLike) -> ModelConfig:
    """The ModelConfig stored in a weights file."""
    meta = read_metadata(path)
    try:
        return ModelConfig.from_dict(json.loads(meta[CONFIG_KEY]))
    except (json.JSONDecodeError, TypeError, ConfigError) as exc:
        raise WeightsError(f"{path}: the stored config is invalid: {exc}") from exc


def load_weights(path: str | os.PathLike, *, model: nn.Module | None = None,
                 device: str | torch.device = "cpu", **run) -> nn.Module:
    """Load a weights file.

    Without `model`: build the engine's ANDREA from the file's config and fill it. With `model`
    (the engine's, or a learner's from overlay.build): check that its config and every tensor's
    name and shape match the file, say what differs if not, and fill it in place (its train/eval
    mode unchanged).
    Returns the model; one built here is in eval mode.
    run: how a model built here runs (config.RUN_SWITCHES: kernels, dropout, init_std), e.g.
    kernels="triton"; the file fixes the rest.
    """
    from safetensors.torch import load_file

    path = Path(path)
    meta = read_metadata(path)
    cfg = read_config(path)
    bad = sorted(set(run) - set(RUN_SWITCHES))
    if bad:
        raise WeightsError(f"load_weights can choose only how the model runs {RUN_SWITCHES}, not {bad}: "
                           f"{path} fixes the model's shape")
    built = model is None
    if built:
        from .model import ANDREA
        model = ANDREA(cfg, **run).to(device).eval()
    elif run:
        raise WeightsError(f"load_weights(model=...) fills an existing model; set its {sorted(run)} on the model")
    else:
        model = unwrap(model)
        _check_config(cfg, _config_of(model), path)
    try:
        tensors = load_file(str(path), device=str(device) if built else "cpu")
    except Exception as exc:
        raise WeightsError(f"{path} could not be read (truncated or corrupt?): "
                           f"{type(exc).__name__}: {exc}") from exc
    for dropped, kept in json.loads(meta.get(TIED_KEY, "{}")).items():
        if kept in tensors:
            tensors[dropped] = tensors[kept]
    _check_tensors(tensors, model.state_dict(), path)
    model.load_state_dict(tensors, strict=True)
    return model


def unwrap(model: nn.Module) -> nn.Module:
    """The ANDREA inside torch.compile's or DistributedDataParallel's wrapper (or the model itself)."""
    while not isinstance(getattr(model, "cfg", None), ModelConfig):
        inner = getattr(model, "_orig_mod", None) or getattr(model, "module", None)
        if not isinstance(inner, nn.Module):
            break
        model = inner
    return model


# ----- checks -----
def _config_of(model: nn.Module) -> ModelConfig:
    cfg = getattr(model, "cfg", None)
    if not isinstance(cfg, ModelConfig):
        raise WeightsError(f"{type(model).__name__} has no .cfg ModelConfig: save_weights and "
                           f"load_weights work with ANDREA models")
    return cfg


def _check_config(file_cfg: ModelConfig, model_cfg: ModelConfig, path) -> None:
    if file_cfg == model_cfg:             # the one rule for "the same model" (config.py)
        return
    a, b = file_cfg.to_dict(), model_cfg.to_dict()
    diff = [f"{k}: file {a[k]!r}, model {b[k]!r}" for k in a if a[k] != b[k]]
    if diff:
        raise WeightsError(f"{path} was saved from a different config than the model's; "
                           f"differences: " + "; ".join(diff))


def _check_tensors(tensors: dict, expected: dict, path) -> None:
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    shapes = [f"{k}: file {tuple(tensors[k].shape)}, model {tuple(expected[k].shape)}"
              for k in expected if k in tensors and tensors[k].shape != expected[k].shape]
    problems = []
    if missing:
        problems.append(f"missing from the file: {', '.join(missing)}")
    if unexpected:
        problems.append(f"in the file but not in the model: {', '.join(unexpected)}")
    if shapes:
        problems.append(f"shapes differ: {'; '.join(shapes)}")
    if problems:
        raise WeightsError(f"{path} does not fit the model: " + " | ".join(problems))
