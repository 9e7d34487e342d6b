import os

# Triton reads this when a kernel is defined: without a GPU, run kernels in its interpreter.
if "TRITON_INTERPRET" not in os.environ:
    try:
        import torch
        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    except ImportError:
        pass

# Tests use small tensors; on 2 cores, two pytest-xdist workers with one torch thread each
# are several times faster than threads fighting over the cores.
try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    pass

# The `student` fixture and the graded markers: pyproject.toml loads andrea_course.grading.plugin.
