"""The capstone: the course's corpus and tokenizer, token shards, the training loop, checkpoints,
sampling, and a small pretrained ANDREA that ships with the course.

    from andrea_course.train import load_tokenizer, load_corpus, pretrained
    tok = load_tokenizer()                  # byte-level BPE, V = 8,449
    stories = load_corpus()                 # the shipped stories, one str each
    model, tok = pretrained()               # a tiny ANDREA trained on them

Command line: andrea-prepare (text -> token shards), andrea-train, andrea-sample.
"""
from .corpus import load_corpus
from .tokenizer import EOT, Tokenizer, TokenizerError, load_tokenizer, train_tokenizer

__all__ = ["EOT", "Tokenizer", "TokenizerError", "load_corpus", "load_tokenizer", "pretrained",
           "train_tokenizer"]


def pretrained(device="cpu"):
    """(model, tokenizer): the small ANDREA shipped in andrea_course/data/, in eval mode.

    Trained on the shipped stories by tools/train_shipped_model.py; nothing is downloaded."""
    from .sample import load_pretrained
    return load_pretrained(device=device)
