"""What each of the learner's pieces fills in the model: one row per piece, read by every layer.

A row says, for one piece of lessons.LESSONS ("activity.piece"):

  replaces   the name in model.py of what the piece stands in for: an engine class (replaced module
             by module, by type, the engine's weights copied in), the model's forward ("ANDREA"),
             the cache class new_caches builds ("KVCache") or the function generate draws each
             token with ("sample_next")
  slot       or the slot its function fills (backends.py: a function a module calls by the slot's
             name; model.MODULE_SLOTS says which module types carry it)
  steps      the pieces it calls by name: each is the learner's where it passes, wherever it is
             called from (the learner's piece, or the engine's written step by step, by_steps)
  by_steps   (module of pieces/, name): the engine's version written step by step, so that a
             learner's steps run in it when the learner's piece itself does not pass
  kernel     kernels="triton": the learner's Triton kernel that does this piece's job in the
             package's launcher once it passes
  supports   {config field: the values it computes}: in a model with another value the engine's
             runs instead, and model.pieces says why
  twins      engine code besides pieces/ and the op slot's back-ends (backends.TABLE) that computes
             the same piece ("package.module" or "package.module:name"): authorship refuses a
             learner's piece that reaches it
  given      methods of the engine's class that the exercise gives rather than asks for

Every piece of the lessons has a row (most fill nothing: they are graded on their own);
tests/overlay/test_contracts.py checks each row's parts against the engine, the overlay and authorship.
A leaf module: it names the engine's things, it does not import them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from .lessons import LESSONS


@dataclass(frozen=True)
class Contract:
    piece: str                                       # "activity.piece"
    replaces: str | None = None                      # a name in model.py
    slot: str | None = None                          # a slot of backends.py / model.MODULE_SLOTS
    steps: tuple[str, ...] = ()
    by_steps: tuple[str, str] | None = None          # (activity of pieces/, name)
    kernel: str | None = None                        # "kernels.<name>"
    supports: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    twins: tuple[str, ...] = ()
    given: tuple[str, ...] = ()

    @property
    def fills(self) -> bool:
        """Whether the piece fills a part of the model (a class, a slot or a model part)."""
        return self.replaces is not None or self.slot is not None


def _supports(**fields: tuple) -> MappingProxyType:
    return MappingProxyType({name: frozenset(values) for name, values in fields.items()})


_ATTENTION_STEPS = ("attention.attention_scores", "attention.scale_scores", "attention.apply_causal_mask",
                    "attention.softmax", "attention.weighted_sum")

# The pieces that fill something, need something or have a twin, in the order model.pieces lists
# them; every other piece of LESSONS gets an empty row.
_ROWS = (
    Contract("embeddings.Embeddings", replaces="Embeddings", supports=_supports(position=("learned",))),
    Contract("attention.attention", slot="attention", steps=_ATTENTION_STEPS,
             by_steps=("attention", "attention_by_steps"), kernel="kernels.flash_attention_kernel"),
    Contract("attention.apply_causal_mask", steps=("attention.causal_mask",),
             by_steps=("attention", "apply_causal_mask")),
    Contract("multihead.MultiHeadAttention", replaces="MultiHeadAttention",
             supports=_supports(position=("learned",)), given=("cache_and_share",)),
    Contract("mlp.gelu_tanh", slot="gelu", kernel="kernels.gelu_kernel"),
    Contract("mlp.MLP", replaces="MLP"),
    Contract("block.layer_norm", slot="layer_norm", kernel="kernels.layer_norm_kernel"),
    Contract("block.Block", replaces="Block"),
    Contract("attention.softmax", kernel="kernels.softmax_kernel",
             twins=("andrea_course.engine.kernels.softmax",)),              # the Triton row softmax
    Contract("modern.rms_norm", slot="rms_norm"),
    Contract("modern.swiglu", slot="swiglu"),
    Contract("modern.SwiGLU", replaces="SwiGLU"),
    Contract("modern.rope_frequencies", slot="rope_frequencies"),
    Contract("modern.apply_rope", slot="apply_rope"),
    Contract("modern.rope_attention", slot="rope_attention", steps=("modern.apply_rope", "attention.attention")),
    Contract("model.ANDREA", replaces="ANDREA"),                     # its forward runs the engine's model
    Contract("model.KVCache", replaces="KVCache"),                   # the class model.new_caches builds
    Contract("model.sample_next", replaces="sample_next"),           # what model.generate draws each token with
)

# Given classes of the exercise files that carry slots as the engine's class of the same name does.
GIVEN_CLASSES: dict[str, str] = {"block.LayerNorm": "LayerNorm", "modern.RMSNorm": "RMSNorm"}


def _table(rows) -> dict[str, Contract]:
    pieces = [exercise for lesson in LESSONS for exercise in lesson.exercises]
    declared = {row.piece: row for row in rows}
    stray = sorted(set(declared) - set(pieces))
    if stray or len(declared) != len(rows):
        raise ValueError(f"contract rows for no piece of lessons.LESSONS, or twice: {stray or 'a duplicate'}")
    return {piece: declared.get(piece, Contract(piece)) for piece in pieces}


CONTRACTS: dict[str, Contract] = _table(_ROWS)


def contract(piece: str) -> Contract:
    """The row of one piece ("activity.piece"); a clear KeyError for any other name."""
    try:
        return CONTRACTS[piece]
    except KeyError:
        raise KeyError(f"no piece named {piece!r} in lessons.LESSONS") from None


def declared() -> dict[str, Contract]:
    """The rows written above (not the empty ones), in their order: the order model.pieces lists
    the pieces in."""
    return {row.piece: row for row in _ROWS}


def filling() -> dict[str, Contract]:
    """The rows of the pieces that fill a part of the model, in the order of declared()."""
    return {piece: row for piece, row in declared().items() if row.fills}


def computes(row: Contract, cfg) -> tuple[str, frozenset] | None:
    """The first (field, values) of row.supports that `cfg` asks another value of, else None."""
    for name, values in row.supports.items():
        if getattr(cfg, name) not in values:
            return name, values
    return None
