"""The release an import targets is one where verl runs the launch, when one that reads as much does.

Unakar/Logic-RL's scripts set a mini-batch larger than the batch: verl 0.3.0+
refuses that at start, verl 0.2 runs the step's batch as one mini-batch.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

import support

from tutorrl.importer.launch import Prepared, _default_config, import_launch


def _corpus_tool():
    # As test_corpus.py loads it: msgspec resolves the tool's annotations through its module name.
    if "corpus_tool" not in sys.modules:
        spec = importlib.util.spec_from_file_location("corpus_tool", Path(__file__).parents[2] / "tools" / "corpus.py")
        sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules["corpus_tool"]


corpus = _corpus_tool()

pytestmark = [pytest.mark.slow, pytest.mark.wheels]

# Keys every supported release reads; a mini-batch (32) larger than the batch (8).
LARGE_MINI = Prepared("t", None, None, [
    "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1", "trainer.n_gpus_per_node=1", "trainer.nnodes=1",
], {}, [])


def test_without_verl_the_import_takes_the_newest_release_that_runs_it():
    text, report = import_launch(LARGE_MINI, None)
    assert report.release == "0.2.0.post2" and report.exact is True, report.not_checked
    newest = corpus.supported_releases()[-1]
    assert f"verl {newest} refuses the imported spec (" in report.release_reason
    assert "actor.ppo_mini_batch_size: 32 is more than data.train_batch_size (8)" in report.release_reason
    assert "verl 0.2.0.post2, the newest of those that takes it" in report.release_reason
    assert 'verl = "0.2.0.post2"' in text


def test_with_verl_the_release_given_is_kept_and_what_to_change_is_named():
    _, report = import_launch(LARGE_MINI, "0.9.1")
    # The round trip is proven with the spec as written; what the compiler refuses is named with its fix.
    assert report.release == "0.9.1" and report.exact is True and report.not_checked == ""
    (refused,) = report.does_not_compile
    assert "set it to at most 8, or data.train_batch_size to at least 32" in refused
    assert refused.startswith("imported.toml:")


def test_the_corpus_target_is_the_newest_reader_that_takes_the_spec():
    trips = {}

    def takes(release):
        trips[release] = import_launch(LARGE_MINI, release)[1]
        return not trips[release].does_not_compile

    releases = corpus.supported_releases()
    release, why, error = corpus.newest_composing(LARGE_MINI, releases, _default_config, takes)
    assert (release, error) == ("0.2.0.post2", "")
    assert why == (f"the newest that composes it and reads every key it sets and takes the imported spec "
                   f"(verl {releases[-1]} refuses it at start)")
    assert trips["0.2.0.post2"].exact is True and trips["0.2.0.post2"].does_not_compile == []
    assert trips[releases[-1]].exact is True and trips[releases[-1]].does_not_compile
    # Without the check, the newest that reads every key, as before.
    assert corpus.newest_composing(LARGE_MINI, releases, _default_config)[0] == releases[-1]


def test_what_a_never_read_key_meant_is_offered_in_the_settings_the_release_reads():
    # verl 0.9 declares reward_model.reward_manager and never reads it; it reads reward.reward_manager.name.
    launch = Prepared("t", None, None, ["algorithm.adv_estimator=grpo", "reward_model.reward_manager=dapo"], {}, [])
    text, report = import_launch(launch, "0.9.1")
    # Kept as written, where the compiler takes a key verl never reads: the launch is the script's.
    assert report.exact is True and report.differences == []
    assert '[verl]\nunread_overrides = [\n    "reward_model.reward_manager=dapo",\n]\n' in text
    assert '#   [reward] manager = "dapo"    (for reward_model.reward_manager=dapo)\n' in text
    assert 'what they meant, in settings verl 0.9.1 reads, is offered (commented) at the end of the spec: ' \
           'reward.manager = "dapo"' in report.notes
    # Offered, not set: the spec is the launch as verl 0.9.1 runs it.
    assert "\n[reward]" not in text
    # Where the release reads the key as written (0.8.0 migrates it), nothing is offered: it is imported.
    text, report = import_launch(launch, "0.8.0")
    assert report.exact is True and "What they meant" not in text


def test_where_no_release_reads_every_key_the_corpus_target_reads_the_most():
    # LeonLixyz/r2e-verl's launches: verl up to 0.5.0 reads rollout.repetition_penalty (vLLM's sampling
    # parameter), none reads val_kwargs.repetition_penalty, 0.9 no longer reads reward_model.reward_manager.
    launch = Prepared("t", None, None, [
        "algorithm.adv_estimator=grpo", "reward_model.reward_manager=naive",
        "+actor_rollout_ref.rollout.repetition_penalty=1.1", "+actor_rollout_ref.rollout.val_kwargs.repetition_penalty=1.1",
    ], {}, [])
    releases = corpus.supported_releases()
    assert corpus.newest_composing(launch, releases, _default_config) == (
        "0.5.0", "the newest that composes it and reads the most of the keys it sets (none that composes it reads "
        "every one)", "")
    # The same release `tutorrl import` chooses without --verl.
    text, report = import_launch(launch, None)
    assert report.release == "0.5.0"
    # The key no release reads is the fork's: kept as written, so the launch is the script's.
    assert report.exact is True and report.differences == []
    assert '"+actor_rollout_ref.rollout.val_kwargs.repetition_penalty=1.1"' in text.split("unread_overrides")[1]


# Keys every supported release reads, and one that no dataclass of 0.6.0+ takes.
TYPO_FIELD = Prepared("t", None, None, [
    "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1", "trainer.n_gpus_per_node=1", "trainer.nnodes=1",
    "+actor_rollout_ref.actor.clip_ratio_typo=0.3",
], {}, [])


def test_a_release_where_verl_would_stop_on_a_plus_key_is_not_chosen():
    text, report = import_launch(TYPO_FIELD, None)
    newest = corpus.supported_releases()[-1]
    # 0.6.0 on builds the actor's table into a dataclass that has no such field.
    assert report.release == "0.5.0"
    assert (f"verl {newest} stops on actor_rollout_ref.actor.clip_ratio_typo: it builds the section into a "
            "dataclass") in report.release_reason
    # Verl 0.5.0 takes the key and never reads it: said, and kept as written (unread_overrides).
    assert report.exact is True and "+actor_rollout_ref.actor.clip_ratio_typo=0.3" in text.split("unread_overrides")[1]
    assert any("verl 0.5.0 never reads actor_rollout_ref.actor.clip_ratio_typo" in n for n in report.notes)


def test_at_a_release_given_that_stops_on_it_the_key_is_refused_with_the_reason():
    text, report = import_launch(TYPO_FIELD, "0.9.1")
    (refused,) = [m for m in report.mapped if m.how == "refused"]
    assert refused.override == "+actor_rollout_ref.actor.clip_ratio_typo=0.3"
    assert refused.note.startswith("verl 0.9.1 (fsdp) builds FSDPActorConfig from 'actor_rollout_ref.actor' and "
                                   "refuses fields it does not declare: 'clip_ratio_typo'")
    # The spec leaves it out and compiles; the launch as written differs from it (verl stops on it).
    assert "clip_ratio_typo" not in text and report.exact is False


def test_a_spec_verl_would_fail_on_is_proven_as_written_and_says_what_to_change(tmp_path):
    # RLHFlow/Minimal-RL's launches: a loss name where verl 0.7.1+ has a table. Hydra composes it and
    # verl fails reading policy_loss.loss_mode; the spec keeps it (the launch is the script's) and the
    # compiler's refusal is the report's list of what to change.
    launch = Prepared("t", None, None, ["algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.policy_loss=plusplus"],
                      {}, [])
    text, report = import_launch(launch, "0.9.1")
    assert report.exact is True and report.differences == [] and report.not_checked == ""
    assert '"actor_rollout_ref.actor.policy_loss=plusplus"' in text.split("extra_overrides")[1]
    (refused,) = report.does_not_compile
    assert "'actor_rollout_ref.actor.policy_loss' is a table in verl 0.9.1" in refused
    assert "(the spec's actor.policy_loss)" in refused
    # The command says so, and does not exit 0: the spec is not ready to compile.
    proc = support.cli("import", "--verl", "0.9.1", "-o", str(tmp_path / "s.toml"), "--",
                       "algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.policy_loss=plusplus")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the spec does not compile until you change (the launch as written has the same problems):\n" \
           f"  {tmp_path / 's.toml'}:" in proc.stdout
    assert "round trip: exact" in proc.stdout and "Traceback" not in proc.stderr
    compiled = support.cli("compile", str(tmp_path / "s.toml"), cwd=tmp_path)
    assert compiled.returncode == 2 and "is a table in verl 0.9.1" in compiled.stderr


def test_a_stand_in_for_a_placeholder_is_one_the_rules_take_where_one_is():
    # NGPUS unset: of the stand-ins, 2 divides the rollout's tensor parallel size; what is left is the
    # launch's own problem (a mini-batch larger than the batch), not one the stand-in 1 would make.
    launch = Prepared("t", None, None, [
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=32",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "trainer.n_gpus_per_node=__UNSET_NGPUS__",
        "trainer.nnodes=1"], {"NGPUS": "__UNSET_NGPUS__"}, [])
    _, report = import_launch(launch, "0.9.1")
    assert report.exact is True
    (refused,) = report.does_not_compile
    assert "actor.ppo_mini_batch_size: 32 is more than data.train_batch_size (16)" in refused
    assert any("__UNSET_NGPUS__ = 2" in n for n in report.notes)


def test_a_key_verl_ignores_set_twice_is_its_last_value():
    launch = Prepared("t", None, None, ["algorithm.adv_estimator=grpo", "custom_reward_function.path=a.py",
                                        "custom_reward_function.path=b.py"], {}, [])
    text, report = import_launch(launch, "0.9.1")
    assert report.exact is True and report.does_not_compile == []
    assert [(m.override, m.how) for m in report.mapped[1:]] == [
        ("custom_reward_function.path=a.py", "dropped"), ("custom_reward_function.path=b.py", "unread")]
    assert '"custom_reward_function.path=b.py"' in text and "a.py" not in text


def test_a_key_verl_ignores_written_twice_alike_is_one_override():
    # The same text twice (a script that repeats a line): one unread override, the earlier dropped.
    launch = Prepared("t", None, None, ["algorithm.adv_estimator=grpo", "custom_reward_function.path=a.py",
                                        "custom_reward_function.path=a.py"], {}, [])
    text, report = import_launch(launch, "0.9.1")
    assert report.exact is True and report.does_not_compile == []
    assert [m.how for m in report.mapped[1:]] == ["dropped", "unread"]
    assert text.count('"custom_reward_function.path=a.py"') == 1
