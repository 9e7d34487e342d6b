"""Hugging Face interoperability: ANDREA <-> transformers' GPT2LMHeadModel, same weights.

    hf_model = to_hf(model)        # a GPT2LMHeadModel that computes the same logits
    model = from_hf(hf_model)      # and back
    load_gpt2(mine, hf_model)      # GPT-2's weights into a model of the same config: a learner's too

Classic ANDREA is GPT-2's architecture (pre-norm LayerNorm blocks, tanh GELU MLP, learned
positions, biases), so the conversion only renames tensors and transposes the linear weights
(GPT-2 stores them as Conv1D, (in, out); nn.Linear stores (out, in)). The modern switches
(RMSNorm, SwiGLU, grouped key/value heads, no biases, RoPE) have no GPT-2 equivalent and are refused.
Needs the `hf` extra (pip install -e '.[hf]'); nothing is downloaded: the GPT2Config is built here.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .config import ModelConfig

# (ANDREA name, GPT-2 name, transposed?) for block i; "{i}" is the block index.
BLOCK_NAMES = [
    ("blocks.{i}.ln1.weight", "transformer.h.{i}.ln_1.weight", False),
    ("blocks.{i}.ln1.bias", "transformer.h.{i}.ln_1.bias", False),
    ("blocks.{i}.attn.qkv.weight", "transformer.h.{i}.attn.c_attn.weight", True),
    ("blocks.{i}.attn.qkv.bias", "transformer.h.{i}.attn.c_attn.bias", False),
    ("blocks.{i}.attn.proj.weight", "transformer.h.{i}.attn.c_proj.weight", True),
    ("blocks.{i}.attn.proj.bias", "transformer.h.{i}.attn.c_proj.bias", False),
    ("blocks.{i}.ln2.weight", "transformer.h.{i}.ln_2.weight", False),
    ("blocks.{i}.ln2.bias", "transformer.h.{i}.ln_2.bias", False),
    ("blocks.{i}.mlp.fc.weight", "transformer.h.{i}.mlp.c_fc.weight", True),
    ("blocks.{i}.mlp.fc.bias", "transformer.h.{i}.mlp.c_fc.bias", False),
    ("blocks.{i}.mlp.proj.weight", "transformer.h.{i}.mlp.c_proj.weight", True),
    ("blocks.{i}.mlp.proj.bias", "transformer.h.{i}.mlp.c_proj.bias", False),
]
MODEL_NAMES = [
    ("embed.token_table", "transformer.wte.weight", False),
    ("embed.position_table", "transformer.wpe.weight", False),
    ("ln_f.weight", "transformer.ln_f.weight", False),
    ("ln_f.bias", "transformer.ln_f.bias", False),
]
HEAD_NAME = ("head.weight", "lm_head.weight", False)
TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh")       # GPT-2's GELU, in its tanh form


def _transformers():
    try:
        import transformers
    except ImportError as exc:
        raise ImportError("andrea_course.engine.hf needs the transformers package: "
                          "install the `hf` extra with  pip install -e '.[hf]'") from exc
    return transformers


def name_map(cfg: ModelConfig) -> list[tuple[str, str, bool]]:
    """Every (ANDREA name, GPT-2 name, transposed?) for a config."""
    names = list(MODEL_NAMES)
    for i in range(cfg.n_layers):
        names += [(a.format(i=i), h.format(i=i), t) for a, h, t in BLOCK_NAMES]
    if not cfg.tie_embeddings:
        names.append(HEAD_NAME)
    return names


def check_gpt2_compatible(cfg: ModelConfig) -> None:
    """Raise ValueError listing every switch of `cfg` that GPT-2 cannot express."""
    why = []
    if cfg.norm != "layernorm":
        why.append(f"norm={cfg.norm!r} (GPT-2 uses LayerNorm)")
    if cfg.mlp != "gelu":
        why.append(f"mlp={cfg.mlp!r} (GPT-2 uses a GELU MLP)")
    if cfg.kv_heads != cfg.n_heads:
        why.append(f"n_kv_heads={cfg.kv_heads} < n_heads={cfg.n_heads} (GPT-2 has no grouped key/value heads)")
    if not cfg.bias:
        why.append("bias=False (GPT-2 has biases in every linear layer and LayerNorm)")
    if cfg.position != "learned":
        why.append(f"position={cfg.position!r} (GPT-2 adds a learned position table; it has no rotary positions)")
    if why:
        raise ValueError("GPT-2 cannot express this ANDREA config: " + "; ".join(why))


def to_hf(model: nn.Module):
    """A transformers GPT2LMHeadModel with model's weights (copied) and the same logits."""
    transformers = _transformers()
    cfg = model.cfg
    check_gpt2_compatible(cfg)
    hf_cfg = transformers.GPT2Config(
        vocab_size=cfg.vocab_size, n_positions=cfg.context_length, n_embd=cfg.d_model,
        n_layer=cfg.n_layers, n_head=cfg.n_heads, n_inner=cfg.d_ff, activation_function="gelu_new",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        layer_norm_epsilon=cfg.norm_eps, tie_word_embeddings=cfg.tie_embeddings,
        bos_token_id=cfg.vocab_size - 1, eos_token_id=cfg.vocab_size - 1)   # end-of-text is the last id
    ours = model.state_dict()
    p = next(model.parameters())
    hf = transformers.GPT2LMHeadModel(hf_cfg).to(device=p.device, dtype=p.dtype)
    state = {h: (ours[a].t() if t else ours[a]).clone().contiguous() for a, h, t in name_map(cfg)}
    if cfg.tie_embeddings:
        state["lm_head.weight"] = state["transformer.wte.weight"]
    missing, unexpected = hf.load_state_dict(state, strict=False)
    missing = [k for k in missing if not (cfg.tie_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        raise RuntimeError(f"to_hf: GPT-2's tensors do not match ANDREA's; missing {missing}, unexpected {unexpected}")
    if cfg.tie_embeddings:
        hf.tie_weights()
    return hf.train(model.training)


def config_from_hf(hf_config) -> ModelConfig:
    """The ModelConfig of a GPT2Config (refusing what ANDREA does not compute)."""
    c = hf_config
    why = []
    if c.activation_function not in TANH_GELUS:
        why.append(f"activation_function={c.activation_function!r} (ANDREA uses the tanh GELU, {TANH_GELUS})")
    if getattr(c, "scale_attn_by_inverse_layer_idx", False):
        why.append("scale_attn_by_inverse_layer_idx=True")
    if not getattr(c, "scale_attn_weights", True):
        why.append("scale_attn_weights=False (ANDREA always divides by sqrt(K))")
    if getattr(c, "add_cross_attention", False):
        why.append("add_cross_attention=True")
    if why:
        raise ValueError("ANDREA cannot express this GPT-2 config: " + "; ".join(why))
    return ModelConfig(vocab_size=c.vocab_size, context_length=c.n_positions, d_model=c.n_embd,
                       n_layers=c.n_layer, n_heads=c.n_head, d_ff=c.n_inner or 4 * c.n_embd,
                       norm_eps=c.layer_norm_epsilon, tie_embeddings=bool(c.tie_word_embeddings))


def from_hf(hf_model) -> nn.Module:
    """The engine's ANDREA with a GPT2LMHeadModel's weights."""
    from .model import ANDREA

    cfg = config_from_hf(hf_model.config)
    p = next(hf_model.parameters())
    model = ANDREA(cfg, dropout=hf_model.config.resid_pdrop).to(device=p.device, dtype=p.dtype)
    return load_gpt2(model, hf_model).train(hf_model.training)


def load_gpt2(model: nn.Module, hf_model) -> nn.Module:
    """`model` with a GPT2LMHeadModel's weights copied in: the engine's ANDREA, or one built
    from a learner's pieces (its parameters carry the engine's names), of the same config."""
    cfg = config_from_hf(hf_model.config)
    if getattr(model, "cfg", None) != cfg:
        theirs_cfg, ours = cfg.to_dict(), getattr(model, "cfg", cfg).to_dict()
        differ = [f"{k}={ours.get(k)!r} (GPT-2's: {v!r})" for k, v in theirs_cfg.items() if ours.get(k) != v]
        raise ValueError("load_gpt2: the model's config is not the GPT-2 model's: " + ", ".join(differ))
    theirs = hf_model.state_dict()
    absent = [h for _, h, _ in name_map(cfg) if h not in theirs]
    if absent:
        raise ValueError(f"load_gpt2: the GPT-2 model lacks {absent}")
    state = {a: (theirs[h].t() if t else theirs[h]).contiguous() for a, h, t in name_map(cfg)}
    with torch.no_grad():
        model.load_state_dict(state, strict=True)
    return model
