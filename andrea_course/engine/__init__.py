"""The engine: the model the package runs, complete without any learner code and without the
answer key (docs/architecture.md). `config` (ModelConfig), `ops` (the PyTorch function of each
slot), `backends` (which function fills each slot, per back-end), `model` (ANDREA), `params`
(parameter counts), `weights` (safetensors files), `hf` (Hugging Face's GPT-2) and `kernels/`
(the Triton kernels). It imports nothing of the package above it but the leaves (paths,
lessons, contracts, presets, gpus, links); nothing is imported here, so `import
andrea_course.engine` loads no torch.
"""
