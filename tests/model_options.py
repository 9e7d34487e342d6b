"""Every value of every model option: the str and bool fields of the engine's ModelConfig, each
with the values its validate accepts (for a str field, config.py's tuple named after it: NORMS for
norm, MLPS for mlp, POSITIONS for position; for a bool, both). Read by the tests that must see a
model of each value (tests/overlay/test_contracts.py, tests/overlay/test_observed.py), so a new
option is in them as soon as config.py has it.
"""
from __future__ import annotations

import dataclasses
import typing

from andrea_course.engine import config
from andrea_course.engine.config import ModelConfig


def option_values() -> dict[str, tuple]:
    """{field: its values} for every str and bool field of ModelConfig, in field order."""
    hints = typing.get_type_hints(ModelConfig)
    out = {}
    for field in dataclasses.fields(ModelConfig):
        if hints[field.name] is bool:
            out[field.name] = (False, True)
        elif hints[field.name] is str:
            out[field.name] = _choices(field.name)
    return out


def _choices(name: str) -> tuple[str, ...]:
    values = getattr(config, f"{name.upper()}S", None)
    if not isinstance(values, tuple):
        raise AssertionError(f"ModelConfig.{name} is a str option: config.py needs {name.upper()}S, the tuple "
                             f"of the values validate accepts, for the tests to build a model of each")
    return values
