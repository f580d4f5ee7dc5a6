"""tools/corpus.py: classification, aggregation, tags, and one tag end to end on a fake examples tree.

The tree, its scripts and its git repository are written here; the one verl
wheel used (0.9.1) is the one the suite's composition tests already cache.
"""

from __future__ import annotations

import importlib.util
import subprocess
import textwrap
from pathlib import Path

import pytest


_SPEC = importlib.util.spec_from_file_location("corpus_tool", Path(__file__).parents[2] / "tools" / "corpus.py")
corpus = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(corpus)


def test_classify_spec_extra_refused():
    assert corpus.classify("actor_rollout_ref.actor.optim.lr=1e-6", "0.7.1", "fsdp") == ("spec", "actor.lr")
    assert corpus.classify("data.truncation=error", "0.7.1", "fsdp") == ("spec", "data.truncation")
    assert corpus.classify("trainer.ray_wait_register_center_timeout=60", "0.7.1", "fsdp") == (
        "extra", "no spec field for this key")
    cls, why = corpus.classify("custom_reward_function.path=x.py", "0.9.1", "fsdp")
    assert cls == "dropped" and "never reads it" in why
    cls, why = corpus.classify("reward_model.use_reward_loop=True", "0.7.1", "fsdp")
    assert cls == "refused" and "no key 'reward_model.use_reward_loop'" in why
    cls, why = corpus.classify("+trainer.nnodes=2", "0.7.1", "fsdp")
    assert cls == "spec"  # the key has a spec home whatever its spelling
    cls, why = corpus.classify("+trainer.ray_wait_register_center_timeout=60", "0.7.1", "fsdp")
    assert cls == "refused" and "already exists" in why


def test_override_keys_and_reason_groups():
    assert corpus.override_key("+a.b@pkg=1") == "a.b"
    assert corpus.override_key("~x.y") == "x.y"
    assert corpus.override_key("k=<path_to_model>") == "k"  # unparsable by Hydra; the key still counts
    assert isinstance(corpus.parse_override("k=<x>"), str)
    assert corpus.reason_group("verl 0.7.1 (fsdp) has no key 'a.b' (x)\nmore") == "verl 0.7.1 (fsdp) has no key '…' (x)"
    assert corpus.reason_group("OverrideParseException: LexerNoViableAltException: a.b=<x>") == \
        "OverrideParseException: LexerNoViableAltException: …"


def test_choose_target():
    supported = ["0.4.1", "0.5.0", "0.7.1", "0.9.1"]
    assert corpus.choose_target("0.7.1", supported) == ("0.7.1", "the tag's own release")
    assert corpus.choose_target("0.7.0", supported)[0] == "0.7.1"
    assert corpus.choose_target("0.2.0.post2", supported)[0] == "0.4.1"
    assert corpus.choose_target("1.0.0", supported)[0] == "0.9.1"
    assert corpus.choose_target("0.7.0", supported, "0.5.0") == ("0.5.0", "given with --target")
    assert corpus.variant_of("ppo_megatron_trainer", []) == "megatron"
    assert corpus.variant_of("ppo_trainer", ["model_engine=megatron"]) == "megatron"


def test_aggregate_counts_and_groups():
    O = corpus.OverrideResult
    L = corpus.LaunchResult
    launches = [
        L("a.sh", "m", "ppo_trainer", "verl/trainer/config", "fsdp", True, None,
          [O("x=1", "x", None, "spec", "s"), O("y=1", "y", None, "extra", ""),
           O("z=1", "z", None, "refused", "no key 'z'")]),
        L("b.sh", "m", "ppo_megatron_trainer", "examples/c", "megatron", False, "Error: bad 'q'\nmore",
          [O("x=2", "x", None, "spec", "s"), O("w=1", "w", None, "refused", "no key 'w'")]),
    ]
    scripts = [corpus.ScriptResult("a.sh", 1, [], False, 0), corpus.ScriptResult("b.sh", 1, ["N"], False, 0),
               corpus.ScriptResult("sft.sh", 0, [], False, 0)]
    s = corpus.aggregate("v9", "9", "0.9.1", "why", 3, scripts, launches, "wheel w")
    assert (s["scripts_found"], s["scripts_launching_main_ppo"], s["launches"], s["overrides"]) == (3, 2, 2, 5)
    assert (s["distinct_keys"], s["launches_megatron"], s["launches_own_config"]) == (4, 1, 1)
    assert s["scripts_with_unset_variables"] == 1
    assert s["compose_at_own_release"]["ok"] == 1
    assert s["compose_at_own_release"]["failures_by_reason"] == [
        {"reason": "Error: bad '…'", "launches": 1, "scripts": ["b.sh"]}]
    c = s["classification"]
    assert (c["spec"]["overrides"], c["extra"]["overrides"], c["refused"]["overrides"]) == (2, 1, 2)
    assert c["spec"]["percent"] == 40.0
    assert c["refused_by_reason"] == [{"reason": "no key '…'", "overrides": 2, "keys": 2}]
    assert s["keys_by_scripts"][0] == {"key": "x", "scripts": 2}
    text = corpus.render_readme([s], ["python tools/corpus.py run --verl-git D --tag v9"])
    assert "| v9 | 3 | 2 | 2 |" in text


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(repo)})


@pytest.fixture
def fake_verl(tmp_path) -> Path:
    repo = tmp_path / "verl"
    ex = repo / "examples"
    (ex / "grpo").mkdir(parents=True)
    (ex / "own" / "config").mkdir(parents=True)
    (ex / "sft").mkdir()
    (ex / "grpo" / "run.sh").write_text(textwrap.dedent("""\
        set -x
        N=${N_GPUS:-8}
        python3 -m verl.trainer.main_ppo \\
            algorithm.adv_estimator=grpo \\
            actor_rollout_ref.actor.optim.lr=1e-6 \\
            data.truncation=error \\
            trainer.n_gpus_per_node=$N \\
            trainer.nnodes=$NNODES \\
            +data.truncation=left $@
        """))
    (ex / "grpo" / "bad.sh").write_text("python3 -m verl.trainer.main_ppo no.such.key=1\n")
    (ex / "own" / "run.sh").write_text(textwrap.dedent("""\
        HERE=$(pwd)
        python3 -m verl.trainer.main_ppo --config-path="$HERE/examples/own/config" --config-name=mine \\
            trainer.total_epochs=2
        """))
    (ex / "own" / "config" / "mine.yaml").write_text(textwrap.dedent("""\
        hydra:
          searchpath:
            - file://verl/trainer/config
        defaults:
          - ppo_trainer
          - _self_
        trainer:
          total_epochs: 7
        """))
    (ex / "sft" / "run.sh").write_text("torchrun -m verl.trainer.fsdp_sft_trainer a=1\n")
    (repo / "README").write_text("fake\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "fake")
    _git(repo, "tag", "v0.9.1")
    _git(repo, "tag", "not-a-release")
    return repo / ".git"


@pytest.mark.slow
def test_one_tag_end_to_end(fake_verl, tmp_path):
    assert corpus.list_tags(fake_verl) == ["v0.9.1"]
    summary, detail = corpus.run_tag(fake_verl, "v0.9.1", None, None, 20, progress=lambda m: None)
    assert summary["config_source"].startswith("wheel verl-0.9.1")
    assert (summary["scripts_found"], summary["scripts_launching_main_ppo"], summary["launches"]) == (4, 3, 3)
    assert summary["scripts_with_unset_variables"] == 1 and summary["launches_own_config"] == 1
    comp = summary["compose_at_own_release"]
    assert comp["ok"] == 1 and comp["failed"] == 2  # the own-config launch composes; `+` on a set key; no such key
    c = summary["classification"]
    assert summary["target"] == "0.9.1" and summary["overrides"] == 8
    # Every key with a spec field lands there, whatever its '+'; the unknown key is refused.
    assert (c["spec"]["overrides"], c["extra"]["overrides"], c["refused"]["overrides"]) == (7, 0, 1)
    # The launch that composes (its own config) imports and composes to the identical config.
    assert summary["round_trip"]["launches_composing"] == 1 and summary["round_trip"]["exact"] == 1
    by_script = {s["script"]: s for s in detail["scripts"]}
    assert by_script["examples/grpo/run.sh"]["unset"] == {"NNODES": "__UNSET_NNODES__"}
    assert by_script["examples/own/run.sh"]["launches"][0]["config_path"] == "examples/own/config"
