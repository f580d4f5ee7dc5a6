"""tools/corpus.py: classification, aggregation, tags, and one tag end to end on a fake examples tree.

The tree, its scripts and its git repository are written here; the one verl
wheel used (0.9.1) is the one the suite's composition tests already cache.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


_SPEC = importlib.util.spec_from_file_location("corpus_tool", Path(__file__).parents[2] / "tools" / "corpus.py")
corpus = importlib.util.module_from_spec(_SPEC)
# msgspec resolves the tool's annotations through its module: it must be importable by name.
sys.modules[_SPEC.name] = corpus
_SPEC.loader.exec_module(corpus)


def test_classify_spec_extra_refused():
    assert corpus.classify("actor_rollout_ref.actor.optim.lr=1e-6", "0.7.1", "fsdp") == ("spec", "actor.lr")
    assert corpus.classify("data.truncation=error", "0.7.1", "fsdp") == ("spec", "data.truncation")
    assert corpus.classify("trainer.ray_wait_register_center_timeout=60", "0.7.1", "fsdp") == (
        "extra", "no spec field for this key")
    cls, why = corpus.classify("custom_reward_function.path=x.py", "0.9.1", "fsdp")
    assert cls == "unread" and "never reads it" in why
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
@pytest.mark.wheels
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


# ---------------------------------------------------------------------------
# The third-party corpus: the pure parts on small fixtures written here; the
# committed list and numbers held to each other (no mirror needed).


def test_sources_list_loads_and_refuses_what_is_not_one(tmp_path):
    good = tmp_path / "s.json"
    good.write_text('{"schema": "x", "repositories": [{"repo": "a/b", "commit": "%s", "scripts": ["r.sh"]}]}'
                    % ("0" * 40))
    assert [(s.repo, s.scripts) for s in corpus.load_sources(good)] == [("a/b", ["r.sh"])]
    short = tmp_path / "short.json"
    short.write_text('{"schema": "x", "repositories": [{"repo": "a/b", "commit": "abc", "scripts": []}]}')
    with pytest.raises(SystemExit, match="not a full git hash"):
        corpus.load_sources(short)
    twice = tmp_path / "twice.json"
    row = '{"repo": "a/b", "commit": "%s", "scripts": []}' % ("1" * 40)
    twice.write_text('{"schema": "x", "repositories": [%s, %s]}' % (row, row))
    with pytest.raises(SystemExit, match="listed twice"):
        corpus.load_sources(twice)


def test_committed_sources_and_numbers_agree():
    docs = Path(__file__).parents[2] / "docs" / "corpus"
    sources = corpus.load_sources(docs / "thirdparty-sources.json")
    assert len(sources) >= 40 and sum(len(s.scripts) for s in sources) >= 80
    assert not any(s.repo.lower().startswith("volcengine/") for s in sources)
    numbers = corpus.json.loads((docs / "thirdparty.json").read_text())
    assert numbers["repositories"] == len(sources) and numbers["scripts"] == sum(len(s.scripts) for s in sources)
    trip = numbers["round_trip"]
    # Every launch with a target is exact or counted under a reason.
    assert trip["exact"] + sum(r["launches"] for r in trip["not_exact_by_reason"]) == trip["with_target"]
    assert trip["with_target"] + sum(r["launches"] for r in numbers["no_target"]) == numbers["launches"]


@pytest.fixture
def fork_repo(tmp_path) -> Path:
    repo = tmp_path / "fork"
    (repo / "scripts").mkdir(parents=True)
    (repo / "verl" / "version").mkdir(parents=True)
    (repo / "scripts" / "train.sh").write_text(textwrap.dedent("""\
        MODEL=${MODEL_PATH:-Qwen/Qwen2.5-0.5B}
        python3 -m verl.trainer.main_ppo \\
            actor_rollout_ref.model.path=$MODEL \\
            data.train_files=$HOME/data/train.parquet \\
            trainer.total_epochs=3
        """))
    (repo / "scripts" / "fork_only.sh").write_text(
        "python3 -m verl.trainer.main_ppo retriever.topk=3 trainer.total_epochs=1\n")
    (repo / "scripts" / "own_trainer.sh").write_text("python3 my/main_ppo.py trainer.total_epochs=1\n")
    (repo / "verl" / "version" / "version").write_text("0.9.1\n")
    (repo / "model.bin").write_bytes(b"\0" * 100)
    (repo / "big.json").write_text("[" + "0," * 600_000 + "0]")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "fork")
    return repo


def test_export_text_tree_and_written_for(fork_repo, tmp_path):
    gitdir = fork_repo / ".git"
    commit = corpus.git(gitdir, "rev-parse", "HEAD").decode().strip()
    dest = tmp_path / "out"
    dest.mkdir()
    corpus.export_text_tree(gitdir, commit, dest)
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    # Scripts and configs only: no binary, nothing over the size limit, no code.
    assert got == ["scripts/fork_only.sh", "scripts/own_trainer.sh", "scripts/train.sh"]
    assert corpus.written_for(gitdir, commit) == ("0.9.1", "verl/version/version of the repository's own verl")


def test_trip_groups_name_fields_and_rules_not_values():
    a = corpus.trip_group("not checked: the imported spec does not compile: imported.toml:29:1: "
                          "actor.ppo_mini_batch_size: 256 is more than data.train_batch_size (8) (verl refuses)")
    b = corpus.trip_group("not checked: the imported spec does not compile: imported.toml:30:1: "
                          "actor.ppo_mini_batch_size: 32 is more than data.train_batch_size (16) (verl refuses)")
    assert a == b == ("not checked: the imported spec does not compile: "
                      "actor.ppo_mini_batch_size: N is more than data.train_batch_size")
    c = corpus.trip_group("not checked: the imported spec does not compile: imported.toml:66:5: "
                          "verl.extra_overrides.0: verl 0.9.1 (fsdp) has no key 'a.b' (did you mean 'a.c'?)")
    assert c == "not checked: the imported spec does not compile: verl.extra_overrides.N: verl N.N.N has no key '…'"
    assert corpus.trip_group("differs: a.b") == "differs: a.b"


def test_aggregate_thirdparty_counts_every_launch_once():
    T, S = corpus.ThirdPartyLaunch, corpus.ThirdPartyScript
    launches = [
        T("o/a", "x.sh", 0, "verl.trainer.main_ppo", True, "fsdp", 1, target="0.9.1", round_trip="exact",
          default_release="0.9.1", default_round_trip="exact"),
        T("o/a", "y.sh", 0, "verl.trainer.main_ppo", True, "fsdp", 0, target="0.7.1",
          round_trip="differs: settings the release declares and never reads", differing_keys=["k"],
          default_release="0.7.1", default_round_trip="exact", written_release="0.7.1",
          written_round_trip="exact"),
        T("o/b", "z.sh", 0, "verl.trainer.main_ppo", True, "megatron", no_target="Could not override '…'.",
          no_target_key="retriever.topk"),
        T("o/b", "w.sh", 0, "my/main_ppo.py", False),
    ]
    scripts = [S("o/a", "x.sh", 1, ["M"], False), S("o/a", "y.sh", 1, [], False), S("o/b", "z.sh", 1, [], False),
               S("o/b", "w.sh", 1, [], False), S("o/b", "v.sh", 0, [], False, "not in the repository at the commit")]
    repos = [{"repo": "o/a", "written_for": "0.7.1"}, {"repo": "o/b", "written_for": None}]
    s = corpus.aggregate_thirdparty(scripts, launches, repos, [])
    assert (s["launches"], s["launches_other_entry"], s["launches_megatron"]) == (3, 1, 1)
    assert s["round_trip"]["with_target"] == 2 and s["round_trip"]["exact"] == 1
    assert s["round_trip"]["not_exact_by_reason"] == [
        {"reason": "differs: settings the release declares and never reads", "launches": 1}]
    assert s["no_target_keys"] == [{"key": "retriever.topk", "launches": 1}]
    assert s["default_release"]["exact"] == 2 and s["written_for"]["exact"] == 1
    assert s["scripts_not_captured"] == [{"reason": "not in the repository at the commit", "launches": 1}]
    assert s["targets"] == {"0.7.1": 1, "0.9.1": 1}
    text = corpus.render_thirdparty(s, "python tools/corpus.py thirdparty --mirror-root M")
    assert "| 2 | 5 | 4 | 3 | 1 | 1 | 2 | 1/2 (50.0%) | 2/2 (100.0%) | 1/1 |" in text
    assert "`retriever.topk` 1" in text


@pytest.mark.slow
@pytest.mark.wheels
def test_thirdparty_end_to_end_on_a_fork(fork_repo, tmp_path):
    gitdir = fork_repo / ".git"
    commit = corpus.git(gitdir, "rev-parse", "HEAD").decode().strip()
    mirrors = tmp_path / "mirrors"
    (mirrors / "o+fork").mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(fork_repo), str(mirrors / "o+fork" / "repo")], check=True)
    sources = [corpus.Source("o/fork", commit, ["scripts/train.sh", "scripts/fork_only.sh",
                                                "scripts/own_trainer.sh", "scripts/gone.sh"])]
    scripts, launches, repos, missing = corpus.run_thirdparty(sources, mirrors, 20, progress=lambda m: None)
    assert missing == [] and repos[0]["written_for"] == "0.9.1"
    by = {l.script: l for l in launches}
    assert by["scripts/train.sh"].target == "0.9.1" and by["scripts/train.sh"].round_trip == "exact"
    assert by["scripts/fork_only.sh"].target == "" and by["scripts/fork_only.sh"].no_target_key == "retriever.topk"
    assert not by["scripts/own_trainer.sh"].verl_main
    assert [s.error for s in scripts if s.script == "scripts/gone.sh"] == ["not in the repository at the commit"]
    assert corpus.run_thirdparty([corpus.Source("o/none", commit, [])], mirrors, 20,
                                 progress=lambda m: None)[3] == ["o/none"]


def test_thirdparty_runs_only_where_every_mirror_is(tmp_path, capsys):
    sources = tmp_path / "s.json"
    sources.write_text('{"schema": "x", "repositories": [{"repo": "o/gone", "commit": "%s", "scripts": ["r.sh"]}]}'
                       % ("0" * 40))
    out = tmp_path / "out"
    assert corpus.main(["thirdparty", "--sources", str(sources), "--mirror-root", str(tmp_path / "none"),
                        "--out", str(out)]) == 2
    (tmp_path / "mirrors").mkdir()
    assert corpus.main(["thirdparty", "--sources", str(sources), "--mirror-root", str(tmp_path / "mirrors"),
                        "--out", str(out)]) == 2
    assert "no mirror of 1 listed repositories" in capsys.readouterr().err
    assert not out.exists()  # nothing written


@pytest.mark.slow
@pytest.mark.wheels
def test_target_is_the_newest_release_reading_every_key_as_written():
    from tutorrl.importer.launch import Prepared, _default_config, import_launch

    releases = corpus.supported_releases()
    plain = Prepared("t", None, None, ["algorithm.adv_estimator=grpo", "trainer.total_epochs=2"], {}, [])
    assert corpus.newest_composing(plain, releases, _default_config) == (releases[-1], "the newest that composes it", "")
    # 0.7.1 and later read the DAPO reward kwargs as reward.reward_kwargs; 0.7.1 and 0.8.0 still read the
    # script's own keys (main_ppo migrates them), 0.9.0 no longer does.
    dapo = Prepared("t", None, None, ["algorithm.adv_estimator=grpo", "+reward_model.reward_kwargs.max_resp_len=4096",
                                      "reward_model.reward_manager=dapo"], {}, [])
    assert corpus.newest_composing(dapo, releases, _default_config) == (
        "0.8.0", "the newest that composes it and reads every key it sets", "")
    # At 0.9.0 both run ignored, and the spec keeps both as written (unread_overrides): exact, and what they
    # meant offered in reward.manager and reward.manager_kwargs (issue 40, D2: the kwargs alone used to move).
    _, report = import_launch(dapo, "0.9.0")
    assert corpus.trip_reason(report) == "exact"
    assert sorted(m.how for m in report.mapped) == ["field", "unread", "unread"]
    for release in ("0.7.0", "0.8.0"):
        _, report = import_launch(dapo, release)
        assert corpus.trip_reason(report) == "exact", release
    broken = Prepared("t", None, None, ["no_such.key=1"], {}, [])
    release, why, error = corpus.newest_composing(broken, releases, _default_config)
    assert release is None and "Could not override 'no_such.key'" in error


@pytest.mark.slow
@pytest.mark.wheels
def test_a_plus_key_verl_stops_on_is_its_own_reason_and_not_a_target():
    from tutorrl.importer.launch import Prepared, _default_config, import_launch

    # verl 0.6.0's own example sets model.enable_activation_offloading; HFModelConfig calls it enable_activation_offload.
    typo = Prepared("t", None, None, ["algorithm.adv_estimator=grpo",
                                      "+actor_rollout_ref.model.enable_activation_offloading=True"], {}, [])
    _, report = import_launch(typo, "0.6.0")
    assert corpus.trip_reason(report) == ("differs: '+' keys verl stops on (the dataclass it builds the section into "
                                          "has no such field)")
    # As a target, the newest release where verl does not stop on it (0.5.0 takes it and never reads it).
    assert corpus.newest_composing(typo, corpus.supported_releases(), _default_config)[0] == "0.5.0"


def test_a_launch_of_an_engine_without_key_sets_is_listed_under_that_cause():
    # verl 0.9's VeOmni and MindSpeed engines (model_engine=veomni) select their own actor configs; tutorrl's
    # key sets are the fsdp and megatron ones, so what the import refuses there is named by that cause.
    O = corpus.OverrideResult
    L = corpus.LaunchResult
    veomni = [O("model_engine=veomni", "model_engine", None, "extra", ""), O("x=1", "x", None, "spec", "s")]
    launches = [
        L("v.sh", "m", "ppo_trainer", None, "fsdp", True, None, veomni, "exact", [], "", "", "no key '…'"),
        L("m.sh", "m", "ppo_trainer", None, "fsdp", True, None,
          [O("model_engine=mindspeed", "model_engine", None, "extra", "")], "differs: '+' keys verl stops on"),
        L("f.sh", "m", "ppo_trainer", None, "fsdp", True, None,
          [O("model_engine=megatron", "model_engine", None, "extra", "")], "differs: x"),
    ]
    s = corpus.aggregate("v9", "9", "0.9.1", "why", 3, [], launches, "wheel w")
    trip = s["round_trip"]
    assert trip["exact_spec_refused_by_reason"] == [{
        "reason": "the launch selects verl's veomni engine (model_engine=veomni), which tutorrl has no key set for "
                  "(fsdp and megatron only): no key '…'", "launches": 1, "scripts": ["v.sh"]}]
    assert [(r["reason"][:45], r["scripts"]) for r in trip["not_exact_by_reason"]] == [
        ("differs: x", ["f.sh"]), ("the launch selects verl's mindspeed engine (m", ["m.sh"])]


@pytest.fixture
def fake_verl_entries(tmp_path):
    """A fake verl tree with this suite's fully_async and one_step_off scripts where verl keeps its own, a
    main_ppo example (not an entry launch: not counted) and a one-step-off launch verl itself cannot compose."""
    import shutil

    repo = tmp_path / "verl-entries"
    scripts = Path(__file__).parent / "scripts"
    for name, folder in (("fully_async_grpo", "fully_async_policy"), ("one_step_off_grpo", "one_step_off_policy")):
        shell = repo / "verl" / "experimental" / folder / "shell"
        shell.mkdir(parents=True)
        shutil.copy(scripts / f"{name}.sh", shell / f"{name}.sh")
    (repo / "verl" / "trainer").mkdir(parents=True)
    (repo / "verl" / "trainer" / "README").write_text("fake\n")
    (repo / "examples").mkdir()
    shutil.copy(scripts / "grpo_fsdp_lists.sh", repo / "examples" / "grpo.sh")
    (repo / "examples" / "broken.sh").write_text(
        "python3 -m verl.experimental.one_step_off_policy.main_ppo --config-name=no_such_trainer trainer.nnodes=1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "fake")
    _git(repo, "tag", "v0.9.1")
    return repo / ".git"


@pytest.mark.slow
@pytest.mark.wheels
def test_entries_imports_each_entry_launch_with_its_own_config(fake_verl_entries, tmp_path):
    summary = corpus.run_entries(fake_verl_entries, "v0.9.1", 20, progress=lambda m: None)
    assert (summary["scripts"], summary["launches"], summary["verl_composes"], summary["exact"]) == (3, 3, 2, 2)
    assert summary["by_entry"] == {"fully_async": {"launches": 1, "exact": 1},
                                   "one_step_off": {"launches": 2, "exact": 1}}
    (miss,) = summary["not_exact"]
    assert miss["script"] == "examples/broken.sh" and "does not compose" in miss["reason"]
    corpus.write_json(tmp_path / "entries.json", summary)
    corpus.write_readme(tmp_path)
    readme = (tmp_path / "README.md").read_text()
    assert "| v0.9.1 | 3 | 3 | 2 | 2 (66.7%) | 2/2 (100.0%) | fully_async 1/1, one_step_off 1/2 | 0 |" in readme
