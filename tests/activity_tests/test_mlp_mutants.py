"""Mutation tests of andrea_course/activity_tests/test_mlp.py: every typical mistake, written as a small
wrong piece (a mutant), must make its graded test fail with a Mismatch that names it.

MUTANTS: (graded file, graded test, {(activity, piece): mutant}, words its failure must name).
The tests over each table are written once, in mutant_checks.py (README.md)."""
import math

import torch
import torch.nn.functional as F

from andrea_course import pieces

from mutant_checks import the_graded_test_names_the_mistake

mlp = pieces.module("mlp")


# ----- the mutants: what a learner typically writes instead -----

def _gelu(c, a):
    return lambda x: 0.5 * x * (1 + torch.tanh(c * (x + a * x ** 3)))


class MLPCallingGeluItself(mlp.MLP):
    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class MLPWithAFourDFc(mlp.MLP):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.fc = torch.nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=cfg.bias)


def _phi(x):
    return torch.exp(-x ** 2 / 2) / math.sqrt(2 * math.pi)


def _gelu_grad(cdf=lambda x: 0.5 * (1 + torch.erf(x / math.sqrt(2))), pdf=_phi, sign=1):
    """A gelu_grad written with one typical mistake: Phi(x) + sign·x·phi(x), with its Phi and phi."""
    return lambda x: cdf(x) + sign * x * pdf(x)


def _gelu_tanh_grad(x):
    """The slope of the tanh form, by hand: 0.5·(1 + tanh u) + 0.5·x·(1 - tanh² u)·u'."""
    c = math.sqrt(2 / math.pi)
    t = torch.tanh(c * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * c * (1 + 3 * 0.044715 * x ** 2)


# ----- the twelfth fresh set's mutants -----

def _gelu_tanh_flipped(x):
    return 0.5 * x * (1 - torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


class MLPWithGeluFirst(mlp.MLP):
    def forward(self, x):
        return self.proj(self.fc(self.gelu(x)))


# ----- the twenty-first fresh set's mutants -----

class _MLPWithoutFcBias(mlp.MLP):
    def forward(self, x):
        return self.proj(self.gelu(x @ self.fc.weight.T))


# (graded file, graded test, {(activity, piece): mutant}, words the failure must contain)
MUTANTS = [
    ("test_mlp.py", "test_gelu_tanh", {("mlp", "gelu_tanh"): _gelu(math.sqrt(2 / math.pi), 0.44715)}, "0.44715"),
    ("test_mlp.py", "test_gelu_tanh", {("mlp", "gelu_tanh"): _gelu(math.sqrt(math.pi / 2), 0.044715)},
     "sqrt(pi/2)"),
    ("test_mlp.py", "test_gelu_tanh", {("mlp", "gelu_tanh"): mlp.gelu_erf}, "exact erf form"),
    ("test_mlp.py", "test_gelu_erf", {("mlp", "gelu_erf"): mlp.gelu_tanh}, "tanh approximation"),
    ("test_mlp.py", "test_gelu_tanh", {("mlp", "gelu_tanh"): _gelu(2 // math.pi, 0.044715)}, "the tanh term is 0"),
    ("test_mlp.py", "test_gelu_erf", {("mlp", "gelu_erf"): lambda x: 0.5 * x * (1 + torch.erf(x * (1 // math.sqrt(2))))},
     "the erf term is 0"),
    ("test_mlp.py", "test_mlp", {("mlp", "MLP"): type("ReluMLP", (mlp.MLP,), {
        "forward": lambda self, x: self.proj(torch.relu(self.fc(x)))})}, "ReLU"),
    # issue 15 item 6: nearest_tokens (notebook 01), gelu_grad (notebook 04)
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): _gelu_grad(pdf=lambda x: torch.zeros_like(x))}, "only Phi(x)"),
    ("test_mlp.py", "test_gelu_grad_in_float32_keeps_the_shape",
     {("mlp", "gelu_grad"): _gelu_grad(pdf=lambda x: torch.zeros_like(x))}, "only Phi(x)"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): _gelu_grad(pdf=lambda x: torch.exp(-x ** 2 / 2))}, "without its factor 1/sqrt(2·pi)"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): _gelu_tanh_grad}, "slope of the tanh approximation"),
    ("test_mlp.py", "test_gelu_grad_in_float32_keeps_the_shape",
     {("mlp", "gelu_grad"): _gelu_tanh_grad}, "slope of the tanh approximation"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): lambda x: (x > 0).to(x.dtype)}, "ReLU's slope"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): _gelu_grad(cdf=lambda x: 0.5 * (1 + torch.erf(x)))}, "erf(x) instead of erf(x / sqrt(2))"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): _gelu_grad(sign=-1)}, "x·phi(x) subtracted"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu", {("mlp", "gelu_grad"): F.gelu}, "GELU itself"),
    # issue 30 item 4: wrong pieces that passed every graded test
    ("test_mlp.py", "test_mlp_calls_its_gelu_slot", {("mlp", "MLP"): MLPCallingGeluItself}, "self.gelu never called"),
    # the twelfth fresh set's classes
    ("test_mlp.py", "test_gelu_tanh", {("mlp", "gelu_tanh"): _gelu_tanh_flipped}, "1 - tanh"),
    ("test_mlp.py", "test_gelu_erf",
     {("mlp", "gelu_erf"): lambda x: 0.5 * x * (1 - torch.erf(x / math.sqrt(2)))}, "1 - erf"),
    ("test_mlp.py", "test_gelu_erf",
     {("mlp", "gelu_erf"): lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2)))}, "math.erf"),
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): lambda x: x * 0.5 * (1 + torch.erf(x / math.sqrt(2))) + _phi(x)}, "product rule mixed up"),
    ("test_mlp.py", "test_mlp", {("mlp", "MLP"): MLPWithGeluFirst}, "GELU applied to the input"),
    # the eleventh fresh set's classes
    ("test_mlp.py", "test_gelu_grad_is_the_slope_of_the_exact_gelu",
     {("mlp", "gelu_grad"): lambda x: 0.5 * (1 + torch.erf(x / math.sqrt(2))) * _phi(x)}, "derivatives multiplied"),
    ("test_mlp.py", "test_mlp", {("mlp", "MLP"): MLPWithAFourDFc}, "fc's width hard-coded as 4·D"),
    # the twenty-first fresh set's classes
    ("test_mlp.py", "test_mlp", {("mlp", "MLP"): _MLPWithoutFcBias}, "fc's bias left out"),
]


test_the_graded_test_names_the_mistake = the_graded_test_names_the_mistake(MUTANTS)
