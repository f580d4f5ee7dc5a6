"""The tests' one spec builder (tests/support.py): its minimal spec compiles, and its merge rules hold."""

from __future__ import annotations

import tomllib

import support
from tutorrl.compiler import compile_bytes


def test_the_minimal_spec_compiles():
    compiled = compile_bytes(support.spec_toml().encode(), "minimal.toml")
    assert not compiled.warnings, [w.render() for w in compiled.warnings]


def test_a_table_is_merged_key_by_key_and_a_whole_one_replaces():
    doc = support.spec_doc(actor={"strategy": "megatron"}, reward=support.Whole(plugin="p"))
    assert doc["actor"] == {"ppo_mini_batch_size": 8, "ppo_micro_batch_size_per_gpu": 2, "strategy": "megatron"}
    assert doc["reward"] == {"plugin": "p"}


def test_drop_removes_and_the_base_is_left_as_it_was():
    base = support.spec_doc(env={"set": {"A": "1", "B": "2"}})
    variant = support.spec_doc(base, env={"set": {"A": support.DROP}}, resources=support.DROP)
    assert variant["env"] == {"set": {"B": "2"}} and "resources" not in variant
    assert base["env"] == {"set": {"A": "1", "B": "2"}} and "resources" in base


def test_dotted_paths_set_what_they_name():
    doc = support.spec_doc(support.spec_doc(env={"set": {"A": "1"}}),
                           **support.nested({"data.seed": 3, "env.set": {"B": "2"}}))
    assert doc["data"]["seed"] == 3 and doc["data"]["train_batch_size"] == 16
    assert doc["env"]["set"] == {"B": "2"}


def test_the_text_reads_back_as_the_data():
    doc = support.spec_doc(data={"train": 'it\'s ${x} "q".parquet'})
    assert tomllib.loads(support.spec_toml(doc)) == doc
