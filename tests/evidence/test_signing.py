"""Signed, anchorable evidence (issue 14, item 2): DSSE envelopes signed with
the user's Ed25519 key, `verify --trust`, and anchors kept outside the bundle.

Every attack from the issue is run against real chains written by
`record_checkpoint`, and what each protection catches is compared with the
table in docs/evidence.md, so the documentation cannot promise more than
`verify` does.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import stat
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_helpers import digest_of, make_bundle, make_fsdp_step
from tutorrl.cli import main
from tutorrl.evidence.anchor import parse_anchor
from tutorrl.evidence.bundle import load_bundle
from tutorrl.evidence.chain import record_files, record_name
from tutorrl.evidence.record import read_records, record_checkpoint
from tutorrl.evidence.schema import ChainLink, Head
from tutorrl.evidence.sign import generate_key, judge_signatures, load_trusted
from tutorrl.evidence.statement import canonical, decode_record, digest, encode_record, pae
from tutorrl.evidence.verify import check_evidence

DOCS = Path(__file__).resolve().parents[2] / "docs" / "evidence.md"


def _record(bundle: Path, ckpts: Path, step: int, run_id: str = "r") -> Path:
    make_fsdp_step(ckpts, step)
    return record_checkpoint(load_bundle(bundle), run_id, ckpts / f"global_step_{step}", source="manual",
                             finished=True, progress=False)


def _chain(root: Path, key: Path | None, steps=(1, 2, 3)) -> Path:
    bundle = make_bundle(root / "bundles")
    with pytest.MonkeyPatch.context() as mp:
        if key is not None:
            mp.setenv("TUTORRL_EVIDENCE_KEY", str(key))
        for step in steps:
            _record(bundle, root / "ckpts", step)
    return bundle


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys")
    owner = generate_key(root / "owner")
    other = generate_key(root / "attacker")
    return {"owner": owner, "attacker": other, "owner_pub": root / "owner.pub", "attacker_pub": root / "attacker.pub"}


@pytest.fixture(scope="module")
def chains(tmp_path_factory, keys):
    """Two three-record chains, as recorded: one unsigned, one signed by the owner."""
    unsigned = _chain(tmp_path_factory.mktemp("unsigned"), None)
    signed = _chain(tmp_path_factory.mktemp("signed"), keys["owner"].path)
    return {"unsigned": unsigned, "signed": signed}


def _copy(bundle: Path, dest: Path) -> Path:
    out = dest / bundle.name
    shutil.copytree(bundle, out)
    return out


# -- what an attacker who can write the bundle folder, but has no key, can do -----------------------------------------


def _records(evdir: Path):
    return [(seq, decode_record(p.read_bytes())) for seq, p in sorted(record_files(evdir).items())]


def _write_head(evdir: Path, seq: int) -> None:
    (evdir / "HEAD").write_bytes(canonical(Head(sequence=seq, digest=digest((evdir / record_name(seq)).read_bytes()))))


def _rewrite_from(evdir: Path, start: int, edit, signers) -> None:
    """Rewrite records from `start` on (`edit` changes the statement of `start`), relinking each to its
    predecessor and signing with `signers` (the attacker's own keys: never the owner's)."""
    prev = digest((evdir / record_name(start - 1)).read_bytes()) if start > 1 else None
    for seq, rec in _records(evdir):
        if seq < start:
            continue
        s = rec.statement
        if seq == start:
            s = edit(s)
        s = msgspec.structs.replace(s, predicate=msgspec.structs.replace(
            s.predicate, chain=ChainLink(sequence=seq, previous=prev)))
        data = encode_record(s, signers)
        (evdir / record_name(seq)).write_bytes(data)
        prev = digest(data)
    _write_head(evdir, max(record_files(evdir)))


def _forged_run(s):
    return msgspec.structs.replace(s, predicate=msgspec.structs.replace(
        s.predicate, run=msgspec.structs.replace(s.predicate.run, run_id="forged")))


def forged_append(evdir: Path, signers) -> None:
    last = max(record_files(evdir))
    (evdir / record_name(last + 1)).write_bytes((evdir / record_name(last)).read_bytes())  # placeholder to rewrite
    _rewrite_from(evdir, last + 1, _forged_run, signers)


def relinked_rewrite(evdir: Path, signers) -> None:
    _rewrite_from(evdir, 2, _forged_run, signers)


def truncate_new_head(evdir: Path, signers) -> None:
    (evdir / record_name(3)).unlink()
    _write_head(evdir, 2)


def head_rewind(evdir: Path, signers) -> None:
    _write_head(evdir, 2)


def delete_evidence(evdir: Path, signers) -> None:
    shutil.rmtree(evdir)


def byte_edit(evdir: Path, signers) -> None:
    path = evdir / record_name(2)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


ATTACKS = {f.__name__.replace("_", "-"): f for f in
           (forged_append, relinked_rewrite, truncate_new_head, head_rewind, delete_evidence, byte_edit)}
MODES = ("unsigned", "unsigned + anchor", "signed + --trust", "signed + --trust + anchor")


def _documented() -> dict[tuple[str, str], str]:
    """The table in docs/evidence.md: (attack id, mode) -> 'refused' or 'passes'."""
    table = {}
    header = None
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None and cells[1:] == [f"{m}" for m in MODES]:
            header = cells
            continue
        m = re.match(r"`([a-z-]+)`", cells[0]) if header else None
        if m and m.group(1) in ATTACKS:
            for mode, cell in zip(MODES, cells[1:]):
                table[(m.group(1), mode)] = cell.split()[0].strip("*")
    return table


def _outcome(chains, keys, tmp_path, attack: str, mode: str, attacker_signs: bool) -> list[str]:
    signed = mode.startswith("signed")
    bundle = _copy(chains["signed" if signed else "unsigned"], tmp_path)
    evdir = bundle / "evidence"
    head = json.loads((evdir / "HEAD").read_text())
    anchors = [parse_anchor(f"{head['sequence']}:{head['digest']}")] if "anchor" in mode else []
    signers = [keys["attacker"]] if signed and attacker_signs else []
    ATTACKS[attack](evdir, signers)
    trust = load_trusted([str(keys["owner_pub"])]) if signed else None
    return check_evidence(bundle, digest_of(bundle), trust=trust, anchors=anchors).problems


def test_the_documented_table_covers_every_attack_and_protection():
    assert set(_documented()) == {(a, m) for a in ATTACKS for m in MODES}
    assert set(_documented().values()) <= {"refused", "passes"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_each_attack_is_caught_exactly_where_the_docs_say(chains, keys, tmp_path, attack, mode):
    documented = _documented()[(attack, mode)]
    # An attacker in the signed world may leave its records unsigned or sign them with its own key.
    for attacker_signs in ((False, True) if mode.startswith("signed") else (False,)):
        problems = _outcome(chains, keys, tmp_path / f"signs-{attacker_signs}", attack, mode, attacker_signs)
        assert ("refused" if problems else "passes") == documented, (attack, mode, attacker_signs, problems)


@pytest.mark.parametrize("attack,names", [
    ("forged-append", "000004.json"), ("relinked-rewrite", "000002.json"), ("truncate-new-head", "000003.json"),
    ("head-rewind", "000003.json"), ("delete-evidence", "000003.json"),
])
def test_signed_and_anchored_refusal_names_the_record(chains, keys, tmp_path, attack, names):
    problems = _outcome(chains, keys, tmp_path, attack, "signed + --trust + anchor", attacker_signs=True)
    assert any(names in p for p in problems), problems


def test_the_cli_refuses_a_tampered_signed_anchored_bundle(chains, keys, tmp_path, capsys):
    bundle = _copy(chains["signed"], tmp_path)
    assert main(["evidence", "anchor", str(bundle), "--out", str(tmp_path / "anchor.json")]) == 0
    spelled = capsys.readouterr().out.strip()
    assert spelled == f"3:{digest((bundle / 'evidence' / '000003.json').read_bytes())}"
    argv = ["verify", str(bundle), "--trust", str(keys["owner_pub"]), "--anchor", str(tmp_path / "anchor.json")]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "3 evidence record(s), each signed by a trusted key, holding 1 anchor(s)" in out.out
    assert "warning" not in out.err
    truncate_new_head(bundle / "evidence", [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "000003.json is missing" in err and "Traceback" not in err
    assert main([*argv[:-1], spelled, "--format", "json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and any("000003.json" in p for p in report["problems"])


# -- signing and the envelope ------------------------------------------------------------------------------------------


def test_pae_is_dsse_v1():
    # DSSE protocol.md: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, lengths in ASCII decimal.
    assert pae("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_an_independent_dsse_implementation_verifies_our_envelopes(chains, keys):
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey

    data = (chains["signed"] / "evidence" / "000002.json").read_bytes()
    env = Envelope.from_dict(json.loads(data))
    assert env.payload_type == "application/vnd.in-toto+json"
    assert json.loads(env.payload)["_type"] == "https://in-toto.io/Statement/v1"
    pub = load_pem_public_key(keys["owner_pub"].read_bytes())
    key = SSlibKey.from_crypto(pub, keyid=keys["owner"].keyid)
    assert set(env.verify([key], 1)) == {keys["owner"].keyid}
    stranger = SSlibKey.from_crypto(load_pem_public_key(keys["attacker_pub"].read_bytes()), keyid=keys["owner"].keyid)
    from securesystemslib.exceptions import VerificationError

    with pytest.raises(VerificationError):
        env.verify([stranger], 1)


@pytest.fixture(scope="module")
def signed_record(chains):
    path = chains["signed"] / "evidence" / "000002.json"
    return path.name, path.read_bytes()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_byte_flip_in_a_signed_envelope_fails_on_its_own(signed_record, keys, data):
    """Without the chain around it: the envelope alone either stops decoding or its signature fails."""
    name, raw = signed_record
    trusted = load_trusted([str(keys["owner_pub"])])
    assert judge_signatures([(name, decode_record(raw))], trusted) == ([], [])
    pos = data.draw(st.integers(0, len(raw) - 1))
    bit = data.draw(st.integers(0, 7))
    flipped = raw[:pos] + bytes([raw[pos] ^ (1 << bit)]) + raw[pos + 1:]
    try:
        rec = decode_record(flipped)
    except ValueError:
        return
    problems, _ = judge_signatures([(name, rec)], trusted)
    assert problems, (pos, bit)


def test_signed_chain_without_trust_warns_and_still_refuses_a_downgrade(chains, keys, tmp_path):
    bundle = _copy(chains["signed"], tmp_path)
    report = check_evidence(bundle, digest_of(bundle))
    assert report.problems == []
    assert any("no key was trusted" in w and keys["owner"].keyid[:16] in w for w in report.warnings)
    forged_append(bundle / "evidence", [])
    problems = check_evidence(bundle, digest_of(bundle)).problems
    assert any(p.startswith("000004.json: unsigned, after 000003.json was signed") for p in problems)


def test_a_writer_without_the_key_never_continues_a_signed_chain(chains, tmp_path, capsys):
    bundle = _copy(chains["signed"], tmp_path)
    make_fsdp_step(tmp_path / "ckpts", 4)
    before = sorted(os.listdir(bundle / "evidence"))
    assert main(["evidence", str(bundle), "--add", str(tmp_path / "ckpts" / "global_step_4")]) == 2
    err = capsys.readouterr().err
    assert "000003.json is signed but no signing key was found" in err and "Traceback" not in err
    assert sorted(os.listdir(bundle / "evidence")) == before


def test_key_rotation_is_a_warning_without_trust_and_fine_when_both_keys_are_trusted(keys, tmp_path, monkeypatch):
    bundle = _chain(tmp_path / "a", keys["owner"].path, steps=(1, 2))
    monkeypatch.setenv("TUTORRL_EVIDENCE_KEY", str(keys["attacker"].path))  # a second key of the same user
    _record(bundle, tmp_path / "a" / "ckpts", 3)
    digest_ = digest_of(bundle)
    report = check_evidence(bundle, digest_)
    assert report.problems == [] and any(w.startswith("000003.json: signed by key") for w in report.warnings)
    both = tmp_path / "trusted.pem"
    both.write_bytes(keys["owner_pub"].read_bytes() + keys["attacker_pub"].read_bytes())
    assert check_evidence(bundle, digest_, trust=load_trusted([str(both)])).problems == []
    only_owner = check_evidence(bundle, digest_, trust=load_trusted([str(keys["owner_pub"])])).problems
    assert only_owner == [f"000003.json: not signed by a trusted key (signed by: {keys['attacker'].keyid[:16]})"]


def test_the_default_key_signs_and_keygen_writes_it_privately(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert main(["evidence", "keygen"]) == 0
    key = tmp_path / "cfg" / "tutorrl" / "evidence-signing-key"
    assert capsys.readouterr().out.strip().endswith("evidence-signing-key.pub")
    assert os.stat(key).st_mode & 0o777 == 0o600 and os.stat(key.parent).st_mode & 0o777 == 0o700
    assert b"PRIVATE KEY" in key.read_bytes() and b"PUBLIC KEY" in key.with_name(key.name + ".pub").read_bytes()
    assert main(["evidence", "keygen"]) == 2
    assert "already exists" in capsys.readouterr().err
    bundle = _chain(tmp_path / "c", None, steps=(1,))
    assert main(["evidence", str(bundle)]) == 0
    # The record's own line (the reasons of its skipped checks follow it, indented).
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("000001.json")]
    assert line.rstrip().endswith("signed by " + load_trusted([str(key) + ".pub"])[0].keyid[:16])
    assert main(["verify", str(bundle), "--trust", str(key) + ".pub"]) == 0
    # The key bytes are in the key file only: never in the bundle.
    secret = key.read_bytes()
    assert not any(secret in p.read_bytes() for p in bundle.rglob("*") if p.is_file())


def test_keygen_refuses_a_path_inside_a_bundle(tmp_path, capsys):
    bundle = make_bundle(tmp_path / "bundles")
    assert main(["evidence", "keygen", "--key", str(bundle / "evidence" / "key")]) == 2
    assert "inside bundle" in capsys.readouterr().err
    assert not (bundle / "evidence").exists()


def test_keygen_refuses_a_bundle_reached_through_a_link_and_a_key_path_that_is_a_link(tmp_path, capsys):
    bundle = make_bundle(tmp_path / "bundles")
    (bundle / "evidence").mkdir()
    # A folder outside every bundle by its name, inside one in fact.
    (tmp_path / "keys").symlink_to(bundle / "evidence")
    assert main(["evidence", "keygen", "--key", str(tmp_path / "keys" / "signing")]) == 2
    err = capsys.readouterr().err
    assert f"inside bundle {bundle}" in err and "Traceback" not in err
    assert list((bundle / "evidence").iterdir()) == []
    # The key path itself a link (here dangling, to a file outside any bundle).
    (tmp_path / "key").symlink_to(tmp_path / "elsewhere")
    assert main(["evidence", "keygen", "--key", str(tmp_path / "key")]) == 2
    assert "is a symbolic link; a key is never written through one" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere").exists()


def test_verify_names_a_private_key_found_inside_a_bundle(tmp_path, keys, capsys):
    bundle = make_bundle(tmp_path / "bundles")
    assert main(["verify", str(bundle)]) == 0
    capsys.readouterr()
    (bundle / "runs" / "r1").mkdir(parents=True)
    shutil.copy(keys["owner"].path, bundle / "runs" / "r1" / "notes")
    assert main(["verify", str(bundle)]) == 2
    err = capsys.readouterr().err
    assert "runs/r1/notes holds a private key" in err and "Traceback" not in err
    # Its public half is no secret.
    (bundle / "runs" / "r1" / "notes").unlink()
    shutil.copy(str(keys["owner"].path) + ".pub", bundle / "runs" / "r1" / "owner.pub")
    assert main(["verify", str(bundle)]) == 0


def test_anchor_refuses_an_out_that_is_not_a_regular_file(chains, tmp_path, capsys):
    bundle = _copy(chains["signed"], tmp_path)
    fifo = tmp_path / "anchor.fifo"
    os.mkfifo(fifo)
    assert main(["evidence", "anchor", str(bundle), "--out", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert "it exists and is a FIFO, not a regular file" in err and "Traceback" not in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def _write_key(path: Path, pem: bytes, mode: int = 0o600) -> Path:
    path.write_bytes(pem)
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize("problem", ["missing", "group-readable", "not-ed25519", "garbage"])
def test_an_unusable_key_refuses_the_record_and_writes_nothing(tmp_path, capsys, monkeypatch, problem, keys):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = tmp_path / "key"
    if problem == "group-readable":
        _write_key(key, keys["owner"].path.read_bytes(), 0o640)
    elif problem == "not-ed25519":
        pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        _write_key(key, pem)
    elif problem == "garbage":
        _write_key(key, b"not a key\n")
    monkeypatch.setenv("TUTORRL_EVIDENCE_KEY", str(key))
    bundle = make_bundle(tmp_path / "bundles")
    make_fsdp_step(tmp_path / "ckpts", 1)
    assert main(["evidence", str(bundle), "--add", str(tmp_path / "ckpts")]) == 2
    err = capsys.readouterr().err
    expected = {"missing": "no such file", "group-readable": "readable by others (mode 0640)",
                "not-ed25519": "not an Ed25519 key", "garbage": "not an unencrypted PEM private key"}[problem]
    assert f"signing key {key}" in err and expected in err and "Traceback" not in err
    assert not (bundle / "evidence").exists()


# -- the pre-signing format ----------------------------------------------------------------------------------------------


def test_records_from_before_signing_still_verify_with_a_warning(chains, keys, tmp_path, capsys, monkeypatch):
    """A chain of bare statements (the format before envelopes) verifies, says it is unsigned, and can be
    continued -- signed -- after a key is made; --trust then names each record that has no signature."""
    bundle = _copy(chains["unsigned"], tmp_path)
    evdir = bundle / "evidence"
    prev = None
    for seq, rec in _records(evdir):
        s = rec.statement
        s = msgspec.structs.replace(s, predicate=msgspec.structs.replace(
            s.predicate, chain=ChainLink(sequence=seq, previous=prev)))
        data = canonical(s)  # exactly what the previous release wrote
        (evdir / record_name(seq)).write_bytes(data)
        prev = digest(data)
    _write_head(evdir, 3)
    report = check_evidence(bundle, digest_of(bundle))
    assert report.problems == [] and any("3 in the pre-signing format" in w for w in report.warnings)
    assert len(read_records(bundle)) == 3
    monkeypatch.setenv("TUTORRL_EVIDENCE_KEY", str(keys["owner"].path))
    _record(bundle, tmp_path / "ckpts", 4)
    trust = load_trusted([str(keys["owner_pub"])])
    problems = check_evidence(bundle, digest_of(bundle), trust=trust).problems
    assert problems == [f"{record_name(n)}: unsigned; --trust requires a signature by a trusted key" for n in (1, 2, 3)]
    assert main(["verify", str(bundle)]) == 0
    assert "pre-signing format" in capsys.readouterr().err


# -- anchors and trust arguments -------------------------------------------------------------------------------------------


def test_anchor_spellings(chains, tmp_path):
    bundle = chains["unsigned"]
    d2 = digest((bundle / "evidence" / "000002.json").read_bytes())
    ok = check_evidence(bundle, digest_of(bundle), anchors=[parse_anchor(d2), parse_anchor(f"2:{d2}")])
    assert ok.problems == []
    wrong_seq = check_evidence(bundle, digest_of(bundle), anchors=[parse_anchor(f"3:{d2}")]).problems
    assert len(wrong_seq) == 1 and "000003.json is not the anchored record" in wrong_seq[0]
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "tutorrl.evidence-anchor/1", "bundle": "sha256:" + "ab" * 32,
                                 "sequence": 2, "digest": d2}, indent=2))
    foreign = check_evidence(bundle, digest_of(bundle), anchors=[parse_anchor(str(other))]).problems
    assert len(foreign) == 1 and "anchors bundle sha256:abab" in foreign[0]


@pytest.mark.parametrize("argv,msg", [
    (["--anchor", "{t}/none.json"], "neither an anchor (N:sha256:HEX) nor an existing file"),
    (["--anchor", "{t}/bad.json"], "not an anchor file"),
    (["--trust", "{t}/none.pub"], "--trust {t}/none.pub: no such file"),
    (["--trust", "{t}/bad.json"], "no PEM public key in it"),
    (["--trust", "{key}"], "holds a private key; give its public key"),
])
def test_verify_argument_errors_exit_2_naming_the_argument(chains, keys, tmp_path, capsys, argv, msg):
    (tmp_path / "bad.json").write_text('{"sequence": 1}')
    fill = {"t": tmp_path, "key": keys["owner"].path}
    assert main(["verify", str(chains["unsigned"]), *[a.format(**fill) for a in argv]]) == 2
    err = capsys.readouterr().err
    assert msg.format(**fill) in err and "Traceback" not in err


def test_anchor_command_refusals(chains, tmp_path, capsys):
    empty = make_bundle(tmp_path / "bundles")
    assert main(["evidence", "anchor", str(empty)]) == 2
    assert "nothing to anchor" in capsys.readouterr().err
    bundle = _copy(chains["unsigned"], tmp_path / "copy")
    assert main(["evidence", "anchor", str(bundle), "--out", str(bundle / "anchor.json")]) == 2
    assert "inside the bundle" in capsys.readouterr().err and not (bundle / "anchor.json").exists()
    byte_edit(bundle / "evidence", [])
    assert main(["evidence", "anchor", str(bundle), "--out", str(tmp_path / "a.json")]) == 2
    assert "does not verify, so it is not anchored" in capsys.readouterr().err
    assert not (tmp_path / "a.json").exists()
    assert main(["evidence", "anchor"]) == 2
    assert main(["evidence", str(bundle), "--key", "x"]) == 2
    assert "--key only applies" in capsys.readouterr().err


def test_anchor_json_is_the_anchor_file(chains, tmp_path, capsys):
    bundle = chains["signed"]
    assert main(["evidence", "anchor", str(bundle), "--format", "json", "--out", str(tmp_path / "a.json")]) == 0
    printed = capsys.readouterr().out
    assert printed.encode() == (tmp_path / "a.json").read_bytes()
    doc = json.loads(printed)
    assert doc["bundle"] == digest_of(bundle) and doc["sequence"] == 3


@pytest.mark.slow
def test_the_trainer_callback_signs_with_the_key_its_environment_names(keys, tmp_path, monkeypatch):
    """The trainer process gets only the key's path, by name in its environment."""
    from tutorrl.evidence.callback import EvidenceCallback

    bundle = make_bundle(tmp_path / "bundles")
    monkeypatch.setenv("TUTORRL_BUNDLE_DIR", str(bundle))
    monkeypatch.setenv("TUTORRL_EVIDENCE_KEY", str(keys["owner"].path))
    make_fsdp_step(tmp_path / "ckpts", 5)
    callback = EvidenceCallback(config=None)
    callback.on_save(trainer=None, global_step=5, checkpoint_dir=str(tmp_path / "ckpts" / "global_step_5"))
    callback.wait()  # the record is written beside training
    (path,) = record_files(bundle / "evidence").values()
    (sig,) = decode_record(path.read_bytes()).signatures
    assert sig.keyid == keys["owner"].keyid and base64.b64decode(sig.publicKey) == keys["owner"].public_raw
    trust = load_trusted([str(keys["owner_pub"])])
    assert check_evidence(bundle, digest_of(bundle), trust=trust).problems == []


def test_is_signed_reads_the_envelope_without_decoding_it(chains):
    from tutorrl.evidence.statement import is_signed

    for kind, expected in (("signed", True), ("unsigned", False)):
        for path in record_files(chains[kind] / "evidence").values():
            data = path.read_bytes()
            assert is_signed(data) is expected is bool(decode_record(data).signatures)
    bare = canonical(decode_record((chains["unsigned"] / "evidence" / "000001.json").read_bytes()).statement)
    assert is_signed(bare) is False
