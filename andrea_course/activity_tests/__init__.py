"""The graded tests, one file per activity (test_<activity>.py), shipped with the package so that
check() in a notebook and andrea-grade work from any install. (The framework that runs and
marks them is grading/; these are the tests of the activities, paths.ACTIVITY_TESTS.)

Each test carries @graded("activity.piece", points=...), asks the `student` fixture for the
learner's piece (isolated: the engine stands in for every other piece it calls), and judges
it with expect_close / expect_equal / expect_cases against PyTorch or the engine
(andrea_course/pieces/). A typical mistake is listed with its output on two inputs (a failure names
it only when the learner's output matches both), and each piece is also called the ways the
notebooks and the model call it (float32, strided heads, 1-D forms: tests/piece_calls.py checks).
Hidden and after-the-due-date tests are not here: they live in the instructor's private folder
(instructor/hidden_tests/ in the course's repository), passed to andrea-grade --hidden-tests.
"""
from pathlib import Path


def graded_file(activity: str) -> Path:
    """The graded tests of one activity, beside this file (the package's paths.ACTIVITY_TESTS, or
    the copy a grader staged: this module imports nothing of the package when it loads)."""
    return Path(__file__).resolve().parent / f"test_{activity}.py"


def expect_trainable(fn, args: tuple, what: str) -> None:
    """fn(*args) with its floating-point tensor arguments requiring grad: it must run, and its output
    stay on autograd's graph (the worker refuses an output cut off from it, inputs.CutOffError), as
    when the model trains through the piece; NumPy and math functions, .detach() and .data fail here."""
    from ..grading import expect_runs
    import torch
    tracked = tuple(a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point()
                    else a for a in args)
    expect_runs(lambda: fn(*tracked), f"{what}, its inputs requiring grad (as in training)",
                hint="training backpropagates through this piece: build it from torch operations, which autograd "
                     "follows (torch.exp, torch.tanh, .sum), not NumPy or math")


def randn64(*shape, seed: int):
    """A float64 tensor of standard normal numbers, the same for the same seed."""
    import torch
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def parameter_shapes(module) -> dict:
    """{name: shape} of a module's state_dict: what a class builds, compared without its values."""
    return {name: tuple(t.shape) for name, t in module.state_dict().items()}


def transposed_shapes(want: dict, own=lambda name: True) -> dict:
    """{mistake: the shapes} where one layer's weight was built with nn.Linear's sizes the other way
    round: its (out, in) weight (a, b) found as (b, a); square weights show nothing. own(name): the
    weights the class under test builds itself."""
    return {f"{name} built the other way round, nn.Linear(out, in): nn.Linear(in_features, out_features) maps "
            f"in to out and stores its weight as (out, in)": {**want, name: shape[::-1]}
            for name, shape in want.items() if len(shape) == 2 and shape[0] != shape[1] and name.endswith(".weight")
            and own(name)}


def slot_reads(source: str, slot: str) -> bool:
    """Whether a class's source reads self.<slot> in some method other than __init__ (forward, or a
    helper forward calls): read and parsed, never run."""
    import ast
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return False
    methods = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name != "__init__"]
    return any(isinstance(node, ast.Attribute) and node.attr == slot and isinstance(node.ctx, ast.Load)
               and isinstance(node.value, ast.Name) and node.value.id == "self"
               for method in methods for node in ast.walk(method))


def expect_slot_called(student, activity: str, name: str, slot: str, computes: str, run) -> None:
    """A module that carries a slot (model.MODULE_SLOTS: MLP.gelu, SwiGLU.swiglu,
    MultiHeadAttention.attention, ANDREA.cross_entropy) computes through it: its class reads
    self.<slot> outside __init__ (from its source: the learner's objects live in the worker, which
    takes no function from a test). run(): the module run once first, so that a stub says so.
    computes: what the slot computes, as the failure names it ("its GELU")."""
    from ..grading import expect_true
    run()
    expect_true(slot_reads(student.source(activity, name), slot), f"{activity}.{name}, read from its source",
                f"no method but __init__ reads self.{slot}", f"compute {computes} by calling self.{slot}(...)",
                mistake=(f"self.{slot} never called: your {name} computes {computes} itself, so whatever the "
                         f"package puts in the slot (its fused op, a Triton kernel, your own piece) never runs; "
                         f"call self.{slot}(...)"))


def layer_mixups(layers: dict, roles: dict, combine, said: dict | None = None, source=None, fix: str = "",
                 why_unused: str = ": a line copied and left unchanged?") -> dict:
    """{mistake: output} of a module whose inputs to `combine` come from the wrong layers: every way
    of taking each role from one of `layers` ({"w_q": its output, ...}) but the right one.

    roles: {role: the layer it comes from}, in combine's argument order; said: {(layer per role,
    ...): words} for a mix-up a test names in its own words; source(name): how a layer is said
    (default self.<name>); fix: the right way, said after (default "q = self.w_q(x), ...");
    why_unused: what a layer never used suggests. A copied line left unchanged (the values from
    w_k, the gate twice) shows as one of these."""
    import itertools
    source = source or (lambda name: f"self.{name}")
    fix = fix or ("each comes from its own layer, " + ", ".join(f"{r} = {source(w)}(x)" for r, w in roles.items()))
    right = tuple(roles.values())
    out = {}
    for chosen in itertools.product(layers, repeat=len(roles)):
        if chosen == right:
            continue
        wrong = [f"{role} from {source(got)} instead of {source(want)}"
                 for (role, want), got in zip(roles.items(), chosen) if got != want]
        unused = [source(name) for name in right if name not in chosen]
        words = (said or {}).get(chosen) or (
            "; ".join(wrong) + (f" ({', '.join(unused)} never used{why_unused})" if unused else "")
            + f": {fix}")
        out[words] = combine(*(layers[name] for name in chosen))
    return out


def fitted_gelu(x, y, gelu_with):
    """(description, output) of the tanh-form GELU whose two constants best fit the learner's y,
    when they are not the formula's: y = x/2 · (1 + tanh(c·(x + cubic·x³))) solved for z = c·x +
    c·cubic·x³ by least squares; gelu_with(c, cubic) makes that GELU. None when y is not of that
    form or its constants are right."""
    import math

    import torch
    x64, y64 = x.double().reshape(-1), torch.as_tensor(y).double().reshape(-1)
    t = 2 * y64 / x64 - 1
    keep = (x64.abs() > 0.3) & (x64.abs() < 3) & (t.abs() < 0.999)
    if int(keep.sum()) < 8 or not torch.isfinite(t[keep]).all():
        return None
    basis = torch.stack([x64[keep], x64[keep] ** 3], dim=1)                   # (N, 2)
    a, b = torch.linalg.lstsq(basis, torch.atanh(t[keep])[:, None]).solution.flatten().tolist()
    c, cubic = a, b / a if a else float("nan")
    said = []
    if not math.isclose(c, math.sqrt(2 / math.pi), rel_tol=1e-3):
        said.append(f"the factor before (x + cubic·x³) is {c:.4g}, not sqrt(2/π) = 0.7978845608")
    if not math.isclose(cubic, 0.044715, rel_tol=1e-3):
        outside = math.isclose(cubic * math.sqrt(2 / math.pi), 0.044715, rel_tol=1e-3)
        said.append(f"the cube's coefficient is {cubic:.4g}, not 0.044715" + (
            f" ({cubic:.4g} = 0.044715 / sqrt(2/π): sqrt(2/π) multiplies x but not 0.044715·x³; it multiplies "
            f"the whole x + 0.044715·x³)" if outside else ""))
    if not said or not math.isfinite(cubic):
        return None
    return "your GELU is the tanh form with other constants: " + "; ".join(said), gelu_with(c, cubic)(x.double())


def add_fitted_gelu(mistakes: dict, x, got, gelu_with) -> None:
    """Adds to `mistakes` the tanh-form GELU fitted to the learner's output (fitted_gelu), where
    that output is a tensor of x's shape that no listed mistake gives already (it says it better)."""
    import torch
    if not (isinstance(got, torch.Tensor) and got.shape == x.shape) or any(
            isinstance(m, torch.Tensor) and m.shape == got.shape
            and torch.allclose(got.double(), m.double(), atol=1e-5, rtol=1e-4) for m in mistakes.values()):
        return
    fitted = fitted_gelu(x, got, gelu_with)
    if fitted:
        mistakes[fitted[0]] = fitted[1].to(x.dtype)
