import pytest

from evidence_contract_server import ContractServer
from evidence_helpers import make_bundle, make_fsdp_step, model_tensors, write_safetensors
from tutorrl.evidence.bundle import load_bundle
from tutorrl.evidence.record import read_records, record_checkpoint
from tutorrl.evidence.sglang import EngineError, normalise_checksum_response
from tutorrl.evidence.tensorhash import fp32_to_bf16_bytes


def served(scale):
    """What a bf16 engine serves for model_tensors(scale): fp32 cast to bf16."""
    out = {}
    for name, (dtype, data, _) in model_tensors(scale).items():
        out[name] = fp32_to_bf16_bytes(data) if dtype == "F32" else data
    return out


def _checks(bundle):
    _, s = read_records(bundle)[-1]
    return s, {c.id: c.status for c in s.predicate.verdict.checks}


@pytest.fixture
def setup(tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    step = make_fsdp_step(tmp_path / "ckpts", 5, scale=5)
    base = tmp_path / "base"
    write_safetensors(base / "model.safetensors", model_tensors(1))
    return bundle, step, base


@pytest.mark.parametrize("shape", ["0.5.12", "0.5.13-0.5.20", ">=0.5.21"])
def test_served_checkpoint_passes_against_each_response_shape(setup, shape):
    bundle, step, base = setup
    with ContractServer(served(5), shape=shape, dp_size=2) as a, ContractServer(served(5), shape=shape) as b:
        record_checkpoint(load_bundle(bundle), "r", step, source="manual", finished=None,
                          engines=[a.url, b.url], base_model=base, progress=False)
    s, checks = _checks(bundle)
    pub = s.predicate.publication
    assert [e.kind for e in pub.engines] == ["contract-test-server"] * 2
    assert all(e.response_shape == shape for e in pub.engines)
    assert checks["publication.engines_answered"] == "pass"
    assert checks["publication.replicas_agree"] == "pass"
    assert checks["publication.matches_checkpoint"] == "pass"
    assert checks["publication.changed_from_base"] == "pass"
    assert checks["publication.weight_version"] == "pass"
    # Honest about what answered: never a pass overall from a test server.
    assert checks["publication.real_engine"] == "skipped" and s.predicate.verdict.status == "partial"
    # embed_tokens is vocab-padded in a real engine: never compared by name.
    assert pub.vs_checkpoint.compared == 2 and pub.served_digest.startswith("sha256:")
    # tp_size 1: the one rank is every rank, whatever the release (0.5.12 included).
    assert checks["publication.tp_coverage"] == "pass"


@pytest.mark.parametrize("shape,status", [("0.5.12", "skipped"), ("0.5.13-0.5.20", "pass"), (">=0.5.21", "pass")])
def test_tp_coverage_under_tensor_parallelism(setup, shape, status):
    """0.5.12 answers for its TP-0 scheduler only: other ranks cannot be covered, and the record says so."""
    bundle, step, _ = setup
    with ContractServer(served(5), shape=shape, tp_size=2) as a:
        record_checkpoint(load_bundle(bundle), "r", step, source="manual", finished=None, engines=[a.url], progress=False)
    s, checks = _checks(bundle)
    assert checks["publication.tp_coverage"] == status
    assert len(s.predicate.publication.engines[0].ranks) == (1 if shape == "0.5.12" else 2)


def test_a_missing_tp_rank_fails_coverage():
    from tutorrl.evidence.sglang import EngineReading, RankChecksums, tp_coverage
    from tutorrl.evidence.schema import EngineObservation

    obs = EngineObservation(url="http://e", kind="x", response_shape="0.5.13-0.5.20")
    ranks = [RankChecksums("target", 0, t, 4, 0, 1, {"w": "0" * 16}) for t in (0, 1, 3)]
    check = tp_coverage([EngineReading(obs, ranks)])
    assert check.status == "fail" and "[2] of 4" in check.detail


def test_same_served_digest_whatever_the_replica_count(setup):
    bundle, step, _ = setup
    digests = []
    for dp in (1, 3):
        with ContractServer(served(5), dp_size=dp) as a:
            record_checkpoint(load_bundle(bundle), "r", step, source="manual", finished=None, engines=[a.url], progress=False)
        digests.append(read_records(bundle)[-1][1].predicate.publication.served_digest)
    assert digests[0] == digests[1]


def test_unpublished_weights_and_disagreeing_replicas_fail(setup):
    bundle, step, base = setup
    with ContractServer(served(1)) as a:  # the engine still serves the base model
        record_checkpoint(load_bundle(bundle), "r", step, source="manual", finished=None,
                          engines=[a.url], base_model=base, progress=False)
    s, checks = _checks(bundle)
    assert checks["publication.matches_checkpoint"] == "fail" and checks["publication.changed_from_base"] == "fail"
    assert s.predicate.verdict.status == "fail"
    with ContractServer(served(5), dp_size=2, corrupt_dp=1) as a, ContractServer(served(5), weight_version="3") as b:
        record_checkpoint(load_bundle(bundle), "r", step, source="manual", finished=None,
                          engines=[a.url, b.url], progress=False)
    _, checks = _checks(bundle)
    assert checks["publication.replicas_agree"] == "fail" and checks["publication.weight_version"] == "fail"


def test_unmarked_server_is_not_called_a_test_server_nor_verified(setup):
    bundle, step, _ = setup
    with ContractServer(served(5), honest=False) as a:
        record_checkpoint(load_bundle(bundle), "r", step, source="manual", finished=None, engines=[a.url], progress=False)
    s, checks = _checks(bundle)
    assert s.predicate.publication.engines[0].kind == "sglang-http (unauthenticated)"
    assert "publication.real_engine" not in checks
    # no base model given: the change from base is not claimed
    assert checks["publication.changed_from_base"] == "skipped"


def test_unreachable_engine_fails(setup):
    bundle, step, _ = setup
    with ContractServer(served(5)) as a:
        url = a.url
    record_checkpoint(load_bundle(bundle), "r", step, source="manual", finished=None, engines=[url], progress=False)
    s, checks = _checks(bundle)
    assert checks["publication.engines_answered"] == "fail" and s.predicate.publication.engines[0].error


@pytest.mark.parametrize("body,match", [
    ({"success": False, "message": "boom"}, "did not succeed"),
    ({"success": True, "ranks": []}, "no ranks"),
    ({"success": True, "ranks": [{"checksums": {"a": "XYZ"}, "parallelism_info": {}}]}, "16 lowercase hex"),
    ({"success": True, "ranks": [{"checksums": {}}]}, "parallelism_info"),
    ({"success": True, "ranks": [{"checksums": {}, "parallelism_info": {"tp_rank": "0"}}]}, "not an integer"),
])
def test_malformed_checker_answers(body, match):
    with pytest.raises(EngineError, match=match):
        normalise_checksum_response(body)


def test_draft_role_is_not_mistaken_for_target():
    body = {"success": True, "ranks": [{"checksums": {"w": "0" * 16}, "per_gpu_checksum": "x",
                                        "parallelism_info": [{"role": "draft", "tp_rank": 0}, {"role": "target", "tp_rank": 1, "tp_size": 2}]}]}
    shape, ranks = normalise_checksum_response(body)
    assert shape == ">=0.5.21" and ranks[0].role == "target" and ranks[0].tp_rank == 1 and ranks[0].tp_size == 2


def test_engine_check_without_numpy_says_which_extra(monkeypatch, tmp_path):
    """numpy is the `engine` extra, not a core dependency: its absence is a clear refusal."""
    import builtins
    import sys

    from tutorrl.errors import RefusedError
    from tutorrl.evidence import sglang

    real_import = builtins.__import__

    def no_numpy(name, *args, **kwargs):
        if name == "numpy" or name.startswith("numpy."):
            raise ModuleNotFoundError("No module named 'numpy'", name="numpy")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "tutorrl.evidence.tensorhash", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_numpy)
    with pytest.raises(RefusedError, match=r"pip install 'tutorrl\[engine\]'"):
        sglang.safetensors_sglang_hashes([])


def test_records_written_before_in_run_existed_stay_canonical():
    """`in_run` is omitted when absent, so an older record re-encodes to its own bytes."""
    from tutorrl.evidence.schema import Publication
    from tutorrl.evidence.statement import canonical

    old = (b'{"engines":[],"hash_function":"sglang.gpu_tensor_hash(seed=0x243F6A88,tile=8192)",'
           b'"served_digest":null,"served_tensor_count":0,"vs_base":null,"vs_checkpoint":null}\n')
    import msgspec

    assert canonical(msgspec.json.decode(old, type=Publication)) == old


# -- What each sglang release does, and what tutorrl asks of it -----------------------------------------------------

def test_only_the_target_runner_is_read_from_0_5_21_on():
    # 0.5.21+: a request without `selector` means "all" -- target and draft (MTP) --
    # and the draft's tensors come back "draft."-prefixed in every rank's map.
    from tutorrl.evidence.sglang import read_engine

    draft = {"model.layers.0.mtp.weight": b"\1" * 8}
    with ContractServer(served(5), draft=draft) as srv:
        assert any(n.startswith("draft.") for n in srv.checksum({})[1]["ranks"][0]["checksums"])
        reading = read_engine(srv.url, timeout=10)
    assert srv.bodies == [{"action": "checksum", "selector": "target"}]
    assert reading.observation.error is None
    (rank,) = reading.ranks
    assert rank.role == "target" and sorted(rank.checksums) == sorted(served(5))


@pytest.mark.parametrize("shape", ["0.5.12", "0.5.13-0.5.20"])
def test_releases_before_0_5_21_ignore_the_selector(shape):
    from tutorrl.evidence.sglang import read_engine

    with ContractServer(served(5), shape=shape) as srv:
        reading = read_engine(srv.url, timeout=10)
    assert reading.observation.error is None and reading.observation.response_shape == shape
    assert srv.bodies == [{"action": "checksum"}]  # what the release kept of tutorrl's request


def test_no_dead_weight_version_fallback():
    # /get_weight_version answers 404 in 0.5.8-0.5.20 and is gone from 0.5.21: never asked.
    from tutorrl.evidence.sglang import read_engine

    for shape in ("0.5.12", ">=0.5.21"):
        with ContractServer(served(5), shape=shape, weight_version=None) as srv:
            obs = read_engine(srv.url, timeout=10).observation
        assert obs.error is None and obs.weight_version is None
        assert [p for _, p in srv.paths] == ["/model_info", "/server_info", "/weights_checker"]


@pytest.mark.parametrize("dims, fails", [((5, 3), True), ((2, 3), True), ((3, 2), False), ((15,), False)])
def test_the_0_5_12_kernel_fails_on_a_narrow_last_dimension(dims, fails):
    # bf16: a last dimension of 3 is 6 bytes, not a multiple of 4; 0.5.12's whole checksum call fails.
    from tutorrl.evidence.sglang import KERNEL_HINT, read_engine

    data = b"\7" * (2 * (dims[0] * (dims[1] if len(dims) > 1 else 1)))
    tensors = {**served(5), "model.odd.weight": data}
    with ContractServer(tensors, shape="0.5.12", dims={"model.odd.weight": dims}) as old, \
            ContractServer(tensors, shape="0.5.13-0.5.20", dims={"model.odd.weight": dims}) as fixed:
        broken = read_engine(old.url, timeout=10).observation
        later = read_engine(fixed.url, timeout=10).observation
    assert later.error is None
    if fails:
        assert broken.error and KERNEL_HINT in broken.error and "fixed in 0.5.13" in broken.error
    else:
        assert broken.error is None


@pytest.mark.parametrize("shape, freed", [("0.5.12", False), ("0.5.13-0.5.20", False), (">=0.5.21", True)])
def test_the_stand_in_keeps_the_snapshot_as_each_release_does(shape, freed):
    from tutorrl.evidence.sglang import snapshot_is_freed, weights_checker_action

    with ContractServer(served(5), shape=shape) as srv:
        for action in ("snapshot", "reset_tensors"):
            weights_checker_action(srv.url, action, timeout=10)
        with pytest.raises(EngineError, match="check tensor equality failed"):
            weights_checker_action(srv.url, "compare", timeout=10)
        srv.load(served(5))
        weights_checker_action(srv.url, "compare", timeout=10)
        assert srv.snapshot_held is not freed
    assert snapshot_is_freed(shape) is freed


def test_0_5_12_takes_post_with_an_action_only():
    import json
    import urllib.error
    import urllib.request

    with ContractServer(served(5), shape="0.5.12") as old, ContractServer(served(5), shape="0.5.13-0.5.20") as new:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(old.url + "/weights_checker", timeout=10)
        assert err.value.code == 405
        req = urllib.request.Request(old.url + "/weights_checker", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 422
        with urllib.request.urlopen(new.url + "/weights_checker", timeout=10) as resp:  # GET: a checksum
            assert json.loads(resp.read())["success"] is True


def test_an_engine_on_the_cpu_is_compared_with_the_hash_it_computes(setup):
    """sglang hashes a tensor in host memory with sha256 and one on a GPU with its kernel: the engine's
    `device` (its /server_info) decides which the checkpoint is rebuilt with, and the record names it."""
    from tutorrl.evidence.schema import HASH_FUNCTION, HASH_FUNCTION_CPU

    bundle, step, base = setup
    with ContractServer(served(5), device="cpu") as cpu:
        record_checkpoint(load_bundle(bundle), "r", step, source="manual", finished=None,
                          engines=[cpu.url], base_model=base, progress=False)
    s, checks = _checks(bundle)
    assert s.predicate.publication.hash_function == HASH_FUNCTION_CPU
    assert checks["publication.matches_checkpoint"] == "pass" and checks["publication.changed_from_base"] == "pass"
    # The same engine, read as if it hashed on a GPU (a caller that says so), matches nothing: the choice is real.
    from tutorrl.evidence.sglang import judge, read_engine, safetensors_sglang_hashes

    with ContractServer(served(5), device="cpu") as cpu:
        reading = read_engine(cpu.url, timeout=10, device="cuda")
        assert ("GET", "/server_info") not in cpu.paths  # told, so not asked
    export = sorted(step.rglob("*.safetensors"))
    pub, wrong = judge([reading], safetensors_sglang_hashes(export), None)
    assert pub.hash_function == HASH_FUNCTION
    assert {c.id: c.status for c in wrong}["publication.matches_checkpoint"] == "fail"


def test_engines_on_cpu_and_gpu_together_are_not_compared(setup):
    from tutorrl.evidence.sglang import judge, read_engine, safetensors_sglang_hashes

    _, step, _ = setup
    with ContractServer(served(5), device="cpu") as cpu, ContractServer(served(5)) as gpu:
        readings = [read_engine(cpu.url, timeout=10), read_engine(gpu.url, timeout=10)]
    assert [r.device for r in readings] == ["cpu", "cuda"]
    _, checks = judge(readings, safetensors_sglang_hashes(sorted(step.rglob("*.safetensors"))), None)
    match = {c.id: c for c in checks}["publication.matches_checkpoint"]
    assert match.status == "skipped" and "hash differently" in match.detail and cpu.url in match.detail
