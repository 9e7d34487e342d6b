"""Hidden and after-the-due-date graded tests of activity model: the instructor's, never
shipped to learners (andrea-grade --hidden-tests instructor/hidden_tests)."""
from andrea_course.activity_tests.test_model import (  # the activity's helpers
    ANDREA,
    CFG,
    Case,
    ModelConfig,
    _check_counts,
    _generation_model,
    _student_model,
    count_parameters,
    expect_cases,
    graded,
    torch)


@graded("model.ANDREA", points=2, visibility="after_due_date")
def test_andrea_generates_the_same_with_and_without_the_cache(student):
    ref = _generation_model()
    ids = torch.tensor([[3, 1, 4], [15, 9, 2], [6, 5, 3]])
    restart = _generation_model()                                # the mistake: positions restart at 0 each step
    embed = restart.embed.forward
    restart.embed.forward = lambda ids, start=0: embed(ids, 0)
    m = _student_model(student, ref, CFG)
    name = "positions restart at 0 for every new token: pass start = caches[0].pos to self.embed"

    def case(prompt, n):
        return Case(f"ANDREA.generate(ids of shape {tuple(prompt.shape)}, {n}, temperature=0) with the KV cache",
                    lambda: _listed(m.generate(prompt, n, temperature=0.0)),
                    ref.generate(prompt, n, temperature=0.0, use_cache=False).tolist(),
                    {name: restart.generate(prompt, n, temperature=0.0, use_cache=True).tolist()})
    expect_cases(case(ids, 5), case(torch.tensor([[7, 2], [1, 8]]), 4), exact=True,
                 hint="with caches, the new tokens start at position caches[0].pos: self.embed(ids, start)")


def _listed(out):
    return out.tolist() if isinstance(out, torch.Tensor) else out

@graded("model.count_parameters", points=2, visibility="hidden")
def test_count_parameters_matches_the_tensors(student):
    """Every option of the config: the count from sizes equals the count of a built model's tensors."""
    fn = student.piece("model", "count_parameters")
    configs = (ModelConfig.preset("andrea-tiny", n_layers=2),
               ModelConfig.preset("andrea-tiny", n_layers=2, bias=False, n_kv_heads=2),
               ModelConfig.preset("andrea-tiny-modern", n_layers=2),
               ModelConfig.preset("andrea-tiny-modern", n_layers=2, bias=True, norm="layernorm", n_kv_heads=1))
    for cfg in configs:
        want = count_parameters(ANDREA(cfg))
        changed = {k: v for k, v in cfg.to_dict().items() if v != ModelConfig().to_dict()[k]}
        _check_counts(fn, cfg, None, f"count_parameters({changed})", want=want)
