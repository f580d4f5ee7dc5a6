"""The callback as verl 0.9.1 itself loads and calls it."""

import pytest

from evidence_helpers import digest_of, make_bundle, make_fsdp_step
from tutorrl.evidence.record import read_records
from tutorrl.evidence.verify import verify_evidence

FQN = "tutorrl.evidence.callback.EvidenceCallback"


@pytest.fixture(scope="module")
def build():
    import omegaconf

    from verl.trainer.ppo.checkpoint_callback import CheckpointCallback, build_checkpoint_callback

    def make():
        cfg = omegaconf.OmegaConf.create({"trainer": {"checkpoint_callback_class": FQN}})
        cb = build_checkpoint_callback(cfg)
        assert isinstance(cb, CheckpointCallback) and type(cb).__name__ == "EvidenceCallback"
        return cb

    return make


@pytest.mark.slow
def test_verl_loads_and_calls_it(build, tmp_path, monkeypatch):
    bundle = make_bundle(tmp_path / "bundles")
    monkeypatch.setenv("TUTORRL_BUNDLE_DIR", str(bundle))
    monkeypatch.setenv("TUTORRL_RUN_ID", "run-7")
    monkeypatch.chdir(tmp_path)
    cb = build()
    step = make_fsdp_step(tmp_path / "ckpts", 10)
    # verl passes the path as it joined it: relative to the trainer's cwd
    cb.on_save(trainer=object(), global_step=10, checkpoint_dir="ckpts/global_step_10", async_save=False)
    cb.on_save(trainer=object(), global_step=11, checkpoint_dir="ckpts/global_step_11", async_save=True)
    (record,) = [s for _, s in read_records(bundle)]
    assert record.predicate.run.run_id == "run-7" and record.predicate.run.source == "callback"
    assert record.predicate.checkpoint.root == str(step.parent) and record.predicate.run.finished is None
    pub = {c.id: c for c in record.predicate.verdict.checks}["publication.engines_answered"]
    assert pub.status == "skipped" and "on_save" in pub.detail
    assert verify_evidence(bundle, digest_of(bundle)) == []


@pytest.mark.slow
def test_never_raises_into_the_trainer(build, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TUTORRL_BUNDLE_DIR", raising=False)
    build().on_save(trainer=None, global_step=1, checkpoint_dir=str(tmp_path))
    assert "TUTORRL_BUNDLE_DIR is not set" in capsys.readouterr().err
    monkeypatch.setenv("TUTORRL_BUNDLE_DIR", str(tmp_path / "no-bundle"))
    build().on_save(trainer=None, global_step=1, checkpoint_dir=str(tmp_path / "nope"))
    assert "could not record evidence" in capsys.readouterr().err
