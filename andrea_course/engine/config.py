"""ModelConfig: what ANDREA's weights fix (every size and architectural switch), with named presets.

How a model runs (kernels, dropout, the initialisation's scale, dtype, compilation) is not
here: those are arguments of ANDREA(...) and fields of the trainer's TrainConfig, and may
change between runs of the same weights. Two models are "the same model" exactly when their
ModelConfigs are equal (weights files, checkpoints and --resume all use this one rule).

Notation (used in code, comments and prose alike):
    B batch, L blocks, T positions, S key/value positions attended (T without a cache),
    V vocabulary, D model width, H query heads, G key/value head groups, K head width,
    F MLP width, N parameters.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..presets import PRESETS

NORMS = ("layernorm", "rmsnorm")
MLPS = ("gelu", "swiglu")
POSITIONS = ("learned", "rope")
ROPE_THETA = 10000.0
# How a built model runs, never what its weights are: ANDREA's keyword arguments, the one list of
# the model's run-time switches. Weights files and checkpoints never store them (from_dict drops
# them from older files that did), load_weights lets its caller choose them, and the trainer's
# TrainConfig has one setting for each, free to change when a run resumes (train/settings.py).
RUN_SWITCHES = ("kernels", "dropout", "init_std")


class ConfigError(ValueError):
    """A configuration that cannot work; the message names the field and the rule."""


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 8449          # V: 256 bytes + 8,192 merges + 1 end-of-text
    context_length: int = 1024      # T: longest sequence the model reads
    d_model: int = 768              # D: width of the residual stream
    n_layers: int = 12              # L: transformer blocks
    n_heads: int = 12               # H: query heads; K = D / H
    d_ff: int = 3072                # F: MLP hidden width (4·D for GELU)
    n_kv_heads: int | None = None   # G: key/value heads (None: G = H, plain multi-head)
    norm: str = "layernorm"         # "layernorm" | "rmsnorm"
    mlp: str = "gelu"               # "gelu" (tanh form) | "swiglu"
    tie_embeddings: bool = False    # share the token table with the output head
    bias: bool = True               # biases in linear layers and LayerNorm
    norm_eps: float = 1e-5
    position: str = "learned"       # "learned" (a (T, D) table added to x) | "rope" (q and k rotated)
    rope_theta: float = ROPE_THETA  # RoPE's base: pair i turns by position·theta^(-2i/K)

    # ----- derived sizes, named as in the notation -----
    @property
    def d_head(self) -> int:
        """K, the width of one head."""
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """G, the number of key/value heads actually used."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for name in ("vocab_size", "context_length", "d_model", "n_layers", "n_heads", "d_ff"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"d_model (D={self.d_model}) must be divisible by n_heads (H={self.n_heads}): "
                f"each head gets K = D/H dimensions")
        if self.n_kv_heads is not None:
            if not isinstance(self.n_kv_heads, int) or isinstance(self.n_kv_heads, bool) or self.n_kv_heads <= 0:
                raise ConfigError(f"n_kv_heads must be a positive integer or None, got {self.n_kv_heads!r}")
            if self.n_heads % self.n_kv_heads:
                raise ConfigError(
                    f"n_heads (H={self.n_heads}) must be divisible by n_kv_heads (G={self.n_kv_heads}): "
                    f"each key/value head serves H/G query heads")
        if self.norm not in NORMS:
            raise ConfigError(f"norm must be one of {NORMS}, got {self.norm!r}")
        if self.mlp not in MLPS:
            raise ConfigError(f"mlp must be one of {MLPS}, got {self.mlp!r}")
        if self.norm_eps <= 0:
            raise ConfigError(f"norm_eps must be positive, got {self.norm_eps!r}")
        if self.position not in POSITIONS:
            raise ConfigError(f"position must be one of {POSITIONS}, got {self.position!r}")
        theta = self.rope_theta
        if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not 1 < theta < float("inf"):
            raise ConfigError(f"rope_theta must be a finite number above 1 (RoPE's base, usually 10000), got {theta!r}")
        if self.position == "learned" and theta != ROPE_THETA:
            raise ConfigError(f"rope_theta={theta!r} is RoPE's base and does nothing with position='learned': "
                              f"set position='rope' or leave rope_theta at {ROPE_THETA:g}")
        if self.position == "rope" and self.d_head % 2:
            raise ConfigError(f"position='rope' turns the features of each head in pairs: the head width "
                              f"K = d_model/n_heads = {self.d_head} must be even")

    # ----- presets -----
    @classmethod
    def preset(cls, name: str, **overrides) -> "ModelConfig":
        """A named configuration, e.g. ModelConfig.preset("andrea-120m", context_length=256)."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}")
        fields = dict(PRESETS[name])
        fields.update(overrides)
        return cls(**fields)

    def replace(self, **changes) -> "ModelConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        """The config of a dict of fields; run-time switches stored by older files are dropped."""
        d = {k: v for k, v in d.items() if k not in RUN_SWITCHES}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown config fields {sorted(unknown)}; known: {sorted(known)}")
        return cls(**d)

