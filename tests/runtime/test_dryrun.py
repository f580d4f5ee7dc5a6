"""Reading a dry run's `--cfg all` output: verl's part, and how many overrides Hydra applied."""

from __future__ import annotations

from tutorrl.runtime import dryrun

CFG_ALL = """\
hydra:
  run:
    dir: outputs/${now:%Y-%m-%d}
  overrides:
    hydra:
    - hydra.mode=RUN
    task:
    - trainer.project_name="chess-tutor"
    - data.train_batch_size=56
    - 'actor_rollout_ref.model.path="a/very/long/path/that/a/yaml/dumper/may/fold/onto/a/second/line/when/it/is/long"'
    - trainer.logger=["console"]
  job:
    name: main_ppo
    override_dirname: data.train_batch_size=56,trainer.logger=["console"]
model_engine: dp
actor_rollout_ref:
  actor:
    betas:
    - 0.9
    - 0.999
trainer:
  project_name: chess-tutor
"""


def test_counts_the_overrides_hydra_applied():
    composed = dryrun.read_composed(CFG_ALL)
    assert composed.overrides == 4


def test_verl_part_is_everything_but_hydras_section():
    composed = dryrun.read_composed(CFG_ALL)
    assert composed.verl_config == CFG_ALL[CFG_ALL.index("model_engine:"):]


def test_an_item_folded_onto_the_next_line_counts_once():
    folded = CFG_ALL.replace('    - trainer.logger=["console"]\n', '    - trainer.logger=["console",\n      "wandb"]\n')
    assert dryrun.read_composed(folded).overrides == 4


def test_no_overrides_and_no_hydra_section():
    empty = "hydra:\n  overrides:\n    hydra: []\n    task: []\n  job:\n    name: x\ntrainer:\n  a: 1\n"
    assert dryrun.read_composed(empty).overrides == 0
    assert dryrun.read_composed("trainer:\n  a: 1\n").overrides is None
    assert dryrun.read_composed("not yaml at all\n").verl_config == "not yaml at all\n"


def test_count_found_inside_a_job_log():
    log = "2026-01-01 INFO job_manager.py -- Runtime env is setting up.\nWARNING: something\n" + CFG_ALL
    assert dryrun.count_task_overrides(log.splitlines()) == 4


def test_summarise_writes_verl_config_into_the_run_record(tmp_path):
    (tmp_path / dryrun.RAW_FILE).write_text(CFG_ALL)
    count, where = dryrun.summarise(tmp_path, tmp_path / "job.log", in_log=False)
    assert (count, where) == (4, tmp_path / dryrun.CONFIG_FILE)
    assert where.read_text().startswith("model_engine: dp\n")
    # An uploaded bundle ran elsewhere: its output is in the log only.
    (tmp_path / "job.log").write_text("Running entrypoint\n" + CFG_ALL)
    assert dryrun.summarise(tmp_path, tmp_path / "job.log", in_log=True) == (4, tmp_path / "job.log")


def _proof(**kw):
    args = dict(release="0.9.1", overrides=25, roots=["DATA_ROOT"], passthrough=[], evidence_hook=False, gpus=8,
                uploaded=False)
    args.update(kw)
    proved, not_proved = dryrun.proof_lines(**args)
    return proved, not_proved


def test_a_dry_run_says_what_it_proved_and_what_it_did_not():
    proved, not_proved = _proof()
    assert proved.startswith("proved: the bundle's files match its manifest; ")
    assert "launch.sh found verl 0.9.1 in the job's Python" in proved
    assert "the roots resolved (DATA_ROOT)" in proved
    assert "composed its config with all 25 overrides" in proved
    # What a dry run never touches is said as not proved, never as a pass.
    assert not_proved.startswith("not proved")
    for words in ("verl's own checks of that config at start", "the 8 GPU(s) it needs", "fits their memory",
                  "the training stack imports", "the data, the model and the reward function",
                  "the rollout engine starts"):
        assert words in not_proved and words not in proved, words


def test_the_proof_follows_what_the_launch_checked():
    proved, _ = _proof(roots=[], passthrough=["WANDB_API_KEY"], evidence_hook=True, overrides=None, uploaded=True)
    assert "roots" not in proved
    assert "the passthrough variables reached the job (WANDB_API_KEY)" in proved
    assert "tutorrl's evidence hook" in proved
    assert "with every override" in proved and "from Ray's copy of the bundle" in proved


def test_a_dry_run_asks_for_its_end_often_once_verl_has_printed_its_config(tmp_path):
    from types import SimpleNamespace

    from tutorrl.runtime import run, submit

    session = run.RunSession.__new__(run.RunSession)
    session.upload, session.run_dir, session.cluster_url = False, tmp_path, None
    assert session._dry_run_poll() == run.DRY_RUN_POLL_S  # nothing printed yet
    (tmp_path / dryrun.RAW_FILE).write_text("hydra:\n")
    assert session._dry_run_poll() == run.DRY_RUN_END_POLL_S < run.DRY_RUN_POLL_S
    # A verl that printed and then hangs is asked at the usual pace once the fast phase is over.
    import time

    session._printed_at = time.monotonic() - run.DRY_RUN_END_FAST_S - 1
    assert session._dry_run_poll() == run.DRY_RUN_POLL_S
    del session._printed_at
    session.cluster_url = "http://127.0.0.1:8265"  # a cluster's dashboard is never asked at the fast pace
    assert session._dry_run_poll() == run.DRY_RUN_POLL_S
    session.cluster_url, session.upload = None, True  # the output is in the job log: nothing says verl returns
    assert session._dry_run_poll() == run.DRY_RUN_POLL_S

    # wait_terminal asks the function before each wait.
    statuses, asked = iter(["PENDING", "RUNNING", "SUCCEEDED"]), []
    client = SimpleNamespace(get_job_status=lambda sid: SimpleNamespace(value=next(statuses)))
    assert submit.wait_terminal(client, "tutorrl-x-1", poll_s=lambda: asked.append(1) or 0) == "SUCCEEDED"
    assert len(asked) == 2
