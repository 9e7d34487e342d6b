"""Hidden and after-the-due-date graded tests of activity kernels: the instructor's, never
shipped to learners (andrea-grade --hidden-tests instructor/hidden_tests)."""
from andrea_course.activity_tests.test_kernels import (  # the activity's helpers
    check_gelu,
    gelu_inputs,
    graded,
    torch)


@graded("kernels.gelu_kernel", points=1, visibility="after_due_date")
def test_gelu_kernel_exact_block_multiple(student):
    """4,096 values: four full blocks, no ragged tail."""
    check_gelu(student, [(gelu_inputs(4096, torch.float32), "gelu(x) for x of 4,096 values"),
                         (gelu_inputs(2048, torch.float32, seed=3), "gelu(x) for x of 2,048 values")])
