"""Each override text is read by Hydra's own parser once per process (importer/overrides.py)."""

from __future__ import annotations

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from tutorrl.importer.overrides import parse

TEXTS = ["a.b=1", "+c.d=[1,'x',{k:2}]", "++e=null", "~f", "g='quoted ${h}'", "i=1,2", "j@k=v"]


@pytest.mark.parametrize("text", TEXTS)
def test_a_text_reads_as_hydra_reads_it(text):
    (hydra,) = OverridesParser.create().parse_overrides([text])
    ours = parse(text)
    assert (ours.type, ours.key_or_group, ours.package, ours.value_type, ours.input_line) == \
        (hydra.type, hydra.key_or_group, hydra.package, hydra.value_type, hydra.input_line)
    assert ours.is_sweep_override() == hydra.is_sweep_override()
    assert ours.value() == hydra.value()


def test_a_text_is_parsed_once_and_its_value_is_new_each_time():
    first = parse("+l.m=[1,{n:[2]}]")
    assert parse("+l.m=[1,{n:[2]}]") is first
    value = first.value()
    value[1]["n"].append(3)  # what a reader does with a value never reaches the next reader
    assert first.value() == [1, {"n": [2]}]


def test_an_error_is_raised_every_time():
    for _ in range(2):
        with pytest.raises(Exception, match="mismatched input|no viable alternative|token recognition"):
            parse("a.b=[1,")
