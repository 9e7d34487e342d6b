"""Named settings, in one place: the model presets (what ModelConfig.preset builds) and the
training presets (what `andrea-train --config NAME` runs).

The JSON files in configs/ are the user-facing form of the training presets: configs/NAME.json
resolves to exactly the TrainConfig of the preset NAME (tests/train/test_train.py checks each).
A training preset names its model preset under "model"; every other key is a TrainConfig field
(andrea_course.train.trainer), and a field not given keeps TrainConfig's default.
"""
from __future__ import annotations

# ModelConfig fields (andrea_course.engine.config); a field not given keeps ModelConfig's default.
PRESETS: dict[str, dict] = {
    # The course's model: GPT-2 small's trunk with an 8,449-token vocabulary and an untied head.
    "andrea-120m": dict(),
    # The same architecture, small enough to train on a laptop CPU in minutes.
    "andrea-tiny": dict(context_length=256, d_model=128, n_layers=4, n_heads=4, d_ff=512),
    # The modern variant (activity 7): RMSNorm, SwiGLU at the classic MLP's budget
    # (F = 8D/3 rounded up: solutions/modern.py's swiglu_hidden_dim, checked in tests/engine/test_budget.py),
    # tied embeddings, grouped key/value heads.
    "andrea-120m-modern": dict(norm="rmsnorm", mlp="swiglu", d_ff=2048,
                               tie_embeddings=True, n_kv_heads=4, bias=False),
    "andrea-tiny-modern": dict(context_length=256, d_model=128, n_layers=4, n_heads=4,
                               d_ff=384, norm="rmsnorm", mlp="swiglu",
                               tie_embeddings=True, n_kv_heads=2, bias=False),
}

# 2,048 tokens a step: on two laptop cores about a second; the loss is below 3 within 200 steps.
_TINY = dict(batch_size=8, seq_len=256, max_steps=800, lr=2e-3, warmup_steps=30)
# GPT-2 small's recipe: 0.5M tokens a step (gradient accumulation fills it on 1 to 8 GPUs),
# 6e-4 peak, 700 steps of warm-up, torch.compile.
_120M = dict(batch_size=16, seq_len=1024, total_batch_tokens=524288, max_steps=10000, lr=6e-4,
             min_lr=6e-5, warmup_steps=700, eval_every=250, eval_batches=20, sample_every=500,
             checkpoint_every=500, compile=True)

TRAIN_PRESETS: dict[str, dict] = {
    "andrea-tiny": dict(model="andrea-tiny", **_TINY),
    "andrea-tiny-modern": dict(model="andrea-tiny-modern", **_TINY),
    "andrea-120m": dict(model="andrea-120m", **_120M),
    "andrea-120m-modern": dict(model="andrea-120m-modern", **_120M),
    # 50 steps of ANDREA-120M: checks a fresh GPU machine end to end in a few minutes.
    "andrea-120m-smoke": dict(_120M, model="andrea-120m", max_steps=50, warmup_steps=10, eval_every=25,
                              eval_batches=4, sample_every=50, checkpoint_every=50),
}
