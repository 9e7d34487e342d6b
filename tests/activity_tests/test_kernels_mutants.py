"""Mutation tests of andrea_course/activity_tests/test_kernels.py: every typical mistake, written as a small
wrong piece (a mutant), must make its graded test fail with a Mismatch that names it.

MUTANTS: (graded file, graded test, {(activity, piece): mutant}, words its failure must name).
The tests over each table are written once, in mutant_checks.py (README.md)."""
import importlib
import math

from mutant_checks import the_graded_test_names_the_mistake


# ----- the mutants: what a learner typically writes instead -----

def _softmax_kernel(**switches):
    """The exercise's softmax(x) launching a softmax kernel with one typical mistake (tests/softmax_kernels.py,
    imported on first use: it needs Triton)."""
    return lambda x: importlib.import_module("softmax_kernels").softmax_with(**switches)(x)


class _kernel:
    """A kernel of tests/softmax_kernels.py (or of another module of tests/: tests/learner_kernels.py),
    imported on first use (it needs Triton); its source is the kernel's."""

    def __init__(self, name, module="softmax_kernels"):
        self.name, self.module = name, module

    @property
    def fn(self):
        return getattr(importlib.import_module(self.module), self.name).fn

    def __getitem__(self, grid):
        return getattr(importlib.import_module(self.module), self.name)[grid]


def _launching(name):
    """The exercise's softmax(x) launching the kernel `name` of tests/softmax_kernels.py."""
    return lambda x: importlib.import_module("softmax_kernels").launching(_kernel(name))(x)


def _gelu_slip(slip):
    """The exercise's gelu(x) launching the learner kernel with slip `slip` (tests/learner_kernels.py)."""
    return lambda x: importlib.import_module("solutions.kernels").gelu(
        x, kernel=importlib.import_module("learner_kernels").GeluSlip(slip))


def _flash_grid(blocks):
    """The exercise's flash_attention launching the answer key's kernel on blocks(T, block_m) query blocks."""
    def launch(q, k, v, start=None):
        kernels = importlib.import_module("solutions.kernels")
        B, H, T, _ = q.shape

        class Grid:
            def __getitem__(self, grid):
                return kernels.flash_attention_kernel[(blocks(T, 16), grid[1])]
        return kernels.flash_attention(q, k, v, start, kernel=Grid())
    return launch


def _flash_slip(slip):
    """The exercise's flash_attention launching the learner kernel with typical slip `slip`."""
    def launch(q, k, v, start=None):
        kernels = importlib.import_module("solutions.kernels")
        return kernels.flash_attention(q, k, v, start, kernel=importlib.import_module("learner_kernels").FlashSlip(slip))
    return launch


# ----- the twelfth fresh set's mutants -----

class _GridOfHeadsOnly:
    """The reference kernel launched with a grid whose second axis is H, not B * H."""

    def __getitem__(self, grid):
        kernel = importlib.import_module("solutions.kernels").flash_attention_kernel
        return lambda q, *args, **consts: kernel[(grid[0], q.shape[1])](q, *args, **consts)


def _flash_launching_heads_only(q, k, v, start=None):
    return importlib.import_module("solutions.kernels").flash_attention(q, k, v, start, kernel=_GridOfHeadsOnly())


class _GridRoundedDown:
    """The reference GELU kernel launched with n // BLOCK programs."""

    def __getitem__(self, grid):
        kernel = importlib.import_module("solutions.kernels").gelu_kernel
        return lambda x, y, n, BLOCK: kernel[(n // BLOCK,)](x, y, n, BLOCK=BLOCK)


class _LaunchedWith:
    """A reference kernel launched with its argument `at` replaced by `value(args)`: a launcher's slip."""

    def __init__(self, name, at, value):
        self.name, self.at, self.value = name, at, value

    def __getitem__(self, grid):
        kernel = getattr(importlib.import_module("solutions.kernels"), self.name)

        def launch(*args, **consts):
            args = list(args)
            args[self.at] = self.value(args)
            return kernel[grid](*args, **consts)
        return launch


def _flash_scaled_by_k(q, k, v, start=None):
    launched = _LaunchedWith("flash_attention_kernel", 9, lambda args: 1.0 / args[7])     # sm_scale = 1 / K
    return importlib.import_module("solutions.kernels").flash_attention(q, k, v, start, kernel=launched)


def _softmax_row_stride_one(x):
    launched = _LaunchedWith("softmax_kernel", 2, lambda args: 1)                        # x_row_stride = 1
    return importlib.import_module("solutions.kernels").softmax(x, kernel=launched)


def _gelu_launching(name):
    """The exercise's gelu(x) launching the kernel `name` of tests/learner_kernels.py."""
    return lambda x: importlib.import_module("solutions.kernels").gelu(x, kernel=_kernel(name, "learner_kernels"))


class _LazyLayerNormSlip:
    """LayerNormSlip(slip) of tests/learner_kernels.py, imported on first launch (it needs Triton)."""

    def __init__(self, slip):
        self.slip = slip

    def __getitem__(self, grid):
        return importlib.import_module("learner_kernels").LayerNormSlip(self.slip)[grid]


def _layer_norm_launching(slip):
    return lambda x, w, b, eps=1e-5: importlib.import_module("solutions.kernels").layer_norm(
        x, w, b, eps, kernel=_LazyLayerNormSlip(slip))


# (graded file, graded test, {(activity, piece): mutant}, words the failure must contain)
MUTANTS = [
    ("test_kernels.py", "test_layer_norm_kernel_steps_by_the_row_stride",
     {("kernels", "layer_norm_kernel"): _LazyLayerNormSlip(9)}, "every program stored its row at row 0"),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache",
     {("kernels", "flash_attention"): _flash_grid(lambda T, bm: T // bm)}, "T // 16 = 1 query block, which drops"),
    # issue 15 item 6: the row-softmax kernel (notebook 08)
    ("test_kernels.py", "test_softmax_kernel_large_scores", {("kernels", "softmax"): _softmax_kernel(SHIFT=False)},
     "no max subtraction"),
    ("test_kernels.py", "test_softmax_kernel_ragged_row", {("kernels", "softmax"): _softmax_kernel(PAD_NEG_INF=False)},
     "padding loaded as 0.0 instead of -inf"),
    ("test_kernels.py", "test_softmax_kernel_strided_rows", {("kernels", "softmax"): _softmax_kernel(X_STRIDE_IS_N=True)},
     "x's rows stepped by n_cols"),
    ("test_kernels.py", "test_softmax_kernel_matches_torch", {("kernels", "softmax"): _softmax_kernel(NORMALISE=False)},
     "not normalised"),
    ("test_kernels.py", "test_softmax_kernel_ragged_row", {("kernels", "softmax"): _softmax_kernel(STORE_MASK=False)},
     "missing mask on the store"),
    # issue 23: what a kernel did, named as it happened
    ("test_kernels.py", "test_softmax_kernel_ragged_row", {("kernels", "softmax"): _launching("softmax_kernel_storing_one_past")},
     "one element past the end of each row"),
    ("test_kernels.py", "test_softmax_kernel_computes_in_fp32",
     {("kernels", "softmax"): _launching("softmax_kernel_in_16_bits"),
      ("kernels", "softmax_kernel"): _kernel("softmax_kernel_in_16_bits")}, "never converted to fp32"),
    # issue 30 item 4: wrong pieces that passed every graded test
    ("test_kernels.py", "test_gelu_kernel_matches_formula",
     {("kernels", "gelu"): _gelu_slip(1)},
     "every program wrote the same first block"),
    ("test_kernels.py", "test_gelu_kernel_matches_formula",
     {("kernels", "gelu"): _gelu_slip(2)},
     "the block starts at pid, not pid * BLOCK"),
    ("test_kernels.py", "test_gelu_kernel_matches_formula",
     {("kernels", "gelu"): _gelu_slip(3)},
     "the cube's coefficient is 0.04715"),
    # the twelfth fresh set's classes
    ("test_kernels.py", "test_gelu_kernel_matches_formula", {("kernels", "gelu"): _gelu_launching("gelu_kernel_storing_in_x")},
     "nothing reached y"),
    ("test_kernels.py", "test_gelu_kernel_reads_and_writes_only_its_own_elements",
     {("kernels", "gelu_kernel"): _kernel("gelu_kernel_storing_in_x", "learner_kernels")}, "stored through x_ptr"),
    ("test_kernels.py", "test_gelu_kernel_matches_formula",
     {("kernels", "gelu"): _gelu_launching("gelu_kernel_masked_by_block")}, "offs < BLOCK"),
    ("test_kernels.py", "test_gelu_kernel_any_shape_and_one_element",
     {("kernels", "gelu"): _gelu_launching("gelu_kernel_masked_by_block")}, "offs < BLOCK"),
    ("test_kernels.py", "test_layer_norm_kernel_steps_by_the_row_stride",
     {("kernels", "layer_norm_kernel"): _LazyLayerNormSlip(1)}, "gamma read at an offset that grows with the row"),
    ("test_kernels.py", "test_layer_norm_kernel_steps_by_the_row_stride",
     {("kernels", "layer_norm_kernel"): _LazyLayerNormSlip(2)}, "stored at row * stride"),
    ("test_kernels.py", "test_layer_norm_kernel_ragged_width", {("kernels", "layer_norm"): _layer_norm_launching(3)},
     "the raw x scaled"),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(12)},
     "every row NaN from the first key tile on"),
    ("test_kernels.py", "test_flash_attention_kernel_scores_far_below_zero",
     {("kernels", "flash_attention"): _flash_slip(13)}, "the running max started at 0"),
    ("test_kernels.py", "test_flash_attention_kernel_scores_far_below_zero",
     {("kernels", "flash_attention"): _flash_slip(26)}, "the running max taken over the wrong axis"),
    ("test_kernels.py", "test_flash_attention_kernel_scores_far_below_zero",
     {("kernels", "flash_attention"): _flash_slip(22)}, "the launch grid's two axes read the other way round"),
    ("test_kernels.py", "test_softmax_kernel_matches_torch", {("kernels", "softmax"): _softmax_kernel(SUM_OF=1)},
     "divided by the sum of the row's x instead"),
    ("test_kernels.py", "test_softmax_kernel_matches_torch", {("kernels", "softmax"): _softmax_kernel(SUM_OF=2)},
     "divided by the sum of the row's x - max"),
    # issue 30 item 4: kernels launched without the checking launcher's padding, NaN around every tensor
    ("test_kernels.py", "test_gelu_kernel_reads_and_writes_only_its_own_elements",
     {("kernels", "gelu_kernel"): _kernel("gelu_kernel_unmasked_load", "learner_kernels")}, "tl.load without a mask"),
    ("test_kernels.py", "test_layer_norm_kernel_steps_by_the_row_stride",
     {("kernels", "layer_norm_kernel"): _kernel("layer_norm_kernel_stepping_by_d", "learner_kernels")},
     "rows stepped by D instead of the row stride"),
    ("test_kernels.py", "test_layer_norm_kernel_steps_by_the_row_stride",
     {("kernels", "layer_norm_kernel"): _kernel("layer_norm_kernel_unmasked_weight", "learner_kernels")},
     "tl.load without a mask"),
    ("test_kernels.py", "test_softmax_kernel_reads_and_writes_only_its_own_rows",
     {("kernels", "softmax_kernel"): _kernel("softmax_kernel_storing_by_the_x_stride", "learner_kernels")},
     "y's rows stepped by x_row_stride"),
    ("test_kernels.py", "test_softmax_kernel_reads_and_writes_only_its_own_rows",
     {("kernels", "softmax_kernel"): _kernel("softmax_kernel_storing_one_past")}, "one element past the end of each row"),
    # issue 32 item 1: the learner's causal FlashAttention forward
    *(("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(slip)},
       named) for slip, named in ((1, "no rescale when the max grows"), (2, "ignores the cache offset"),
                                  (3, "the diagonal tile skipped"), (4, "the diagonal masked"),
                                  (5, "the logsumexp of the unscaled scores"), (6, "applied to the output"),
                                  (7, "1/sqrt(BLOCK_K)"), (8, "a tail tile without its mask"),
                                  (9, "only acc rescaled"), (10, "only l rescaled"),
                                  (11, "the logsumexp stored as log(l) alone"), (14, "without dividing by l"),
                                  (15, "at bh·T·K"), (16, "the running max never kept"),
                                  (17, "the key loop's end without the cache offset"))),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_scaled_by_k},
     "scaled by 1/K instead of 1/sqrt(K)"),
    ("test_kernels.py", "test_softmax_kernel_matches_torch", {("kernels", "softmax"): _softmax_row_stride_one},
     "row r read from x_ptr + r"),
    # the thirteenth and fourteenth fresh sets' classes
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_launching_heads_only},
     "only the first sequence of the batch"),
    ("test_kernels.py", "test_gelu_kernel_matches_formula",
     {("kernels", "gelu"): lambda x: importlib.import_module("solutions.kernels").gelu(x, kernel=_GridRoundedDown())},
     "the last, ragged block never launched"),
    ("test_kernels.py", "test_layer_norm_kernel_ragged_width", {("kernels", "layer_norm"): _layer_norm_launching(4)},
     "used as rstd"),
    ("test_kernels.py", "test_layer_norm_kernel_ragged_width", {("kernels", "layer_norm"): _layer_norm_launching(5)},
     "mean never stored"),
    # the sixteenth fresh set's kernel classes
    *(("test_kernels.py", "test_layer_norm_kernel_ragged_width", {("kernels", "layer_norm"): _layer_norm_launching(slip)},
       named) for slip, named in ((6, "the mean of the centred row"), (7, "the variance taken over the raw row"),
                                  (8, "beta added before multiplying by gamma"))),
    *(("test_kernels.py", "test_softmax_kernel_matches_torch", {("kernels", "softmax"): _softmax_kernel(EXP2=True, EXP2_FACTOR=c)},
       named) for c, named in ((1.0, "tl.exp2 without the factor log2(e)"), (math.log2(math.e) ** 2, "used once too often"),
                               (math.log(2), "divided by log2(e)"))),
    *(("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(slip)},
       named) for slip, named in ((18, "each head's keys found at bh·T·K"), (19, "each head's values found at bh·T·K"),
                                  (20, "mask=rows < T alone, without dims < K"))),
    # no store mask at all: the last query block reaches a whole tile past o's end (more than 64
    # elements at K = 12 and K = 20), all of it inside the checking launcher's guard, and counted
    *(("test_kernels.py", test, {("kernels", "flash_attention"): _flash_slip(21)}, "the last query block stored past T")
      for test in ("test_flash_attention_kernel_with_a_cache", "test_flash_attention_kernel_queries_inside_the_keys")),
    ("test_kernels.py", "test_flash_attention_kernel_queries_inside_the_keys",
     {("kernels", "flash_attention"): _flash_slip(20)}, "mask=rows < T alone, without dims < K"),
    # the nineteenth fresh set's classes
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(23)},
     "the visibility mask built from the first key tile's indices"),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(24)},
     "the key indices never advance"),
    # the twentieth fresh set's classes
    ("test_kernels.py", "test_layer_norm_kernel_ragged_width", {("kernels", "layer_norm"): _layer_norm_launching(10)},
     "the variance divided by BLOCK_D"),
    ("test_kernels.py", "test_flash_attention_kernel_with_a_cache", {("kernels", "flash_attention"): _flash_slip(25)},
     "taken in base 2"),
]


test_the_graded_test_names_the_mistake = the_graded_test_names_the_mistake(MUTANTS)
