"""andrea-sample with the learner's pieces: GPT-2's weights in the learner's own code.

    andrea-sample --hf gpt2 --impl exercises --prompt "The meaning of life is"

Everything else is andrea_course.train.sample's. --impl builds the model GPT-2's config asks
for (V = 50,257, T = 1,024, a tied head) from each of the learner's pieces whose graded tests
all pass (the engine's where one does not, and the line on stderr says which), copies the
GPT2LMHeadModel's tensors in (hf.load_gpt2) and samples from it.
"""
from __future__ import annotations

from ..train import sample


def build_parser():
    p = sample.build_parser()
    p.add_argument("--impl", help="with --hf: build the model from your pieces that pass: 'exercises', "
                   "'solutions' or a folder shaped like exercises/")
    return p


def yours_with_gpt2(args, hf_model):
    """(the learner's model with GPT-2's weights, whose it is); the engine's without --impl."""
    if not args.impl:
        return sample._engine_gpt2(args, hf_model)
    from ..grading.passing import learner_model
    from ..engine.hf import config_from_hf, load_gpt2
    folder = _folder(args.impl)
    model = load_gpt2(learner_model(config_from_hf(hf_model.config), folder), hf_model)
    return model, f"GPT-2's weights in your code ({folder}): {_whose_pieces(model.pieces)}"


def _folder(impl):
    from ..overlay import ImplementationError, resolve
    from ..train.cli import UsageError
    try:
        return resolve(impl)
    except ImplementationError as exc:
        raise UsageError(f"--impl: {exc}") from None


def _whose_pieces(pieces: dict) -> str:
    yours = [name for name, status in pieces.items() if status == "yours"]
    engine = {name: status.removeprefix("engine: ") for name, status in pieces.items() if status != "yours"}
    text = f"{len(yours)} of its {len(pieces)} pieces yours"
    return text + ("; the engine's: " + "; ".join(f"{n} ({why})" for n, why in engine.items()) if engine else "")


def _main(argv) -> int:
    from ..train.cli import UsageError
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.impl and not args.hf:
        raise UsageError("--impl goes with --hf (GPT-2's weights in your code); a run of yours "
                         "(--ckpt) already records whose pieces trained it")
    if args.impl:
        _folder(args.impl)                  # refused before any download
    return sample._main(argv, parser=parser, build_hf=yours_with_gpt2)


def main(argv=None) -> int:
    from ..train.cli import run
    return run("andrea-sample", _main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
