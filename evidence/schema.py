"""Typed shapes of every evidence file.

A record is an in-toto Statement v1 whose predicate is tutorrl's. Every struct
forbids unknown fields: a record is re-encoded canonically on verify, and an
added key must be a detected edit, not silently ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
# A URI tutorrl owns; bumping the trailing version is how the predicate evolves.
PREDICATE_TYPE = "https://tutorrl.dev/evidence/checkpoint/v1"
HEAD_SCHEMA = "tutorrl.evidence-head/1"

Hex64 = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
Sha256 = Annotated[str, msgspec.Meta(pattern="^sha256:[0-9a-f]{64}$")]

Status = Literal["pass", "fail", "skipped"]
OverallStatus = Literal["pass", "fail", "partial"]
# "model-merger": a Hugging Face folder `tutorrl model` made from a recorded checkpoint (evidence/merged.py).
Source = Literal["callback", "post-run-scan", "manual", "model-merger"]
MODEL_SOURCE = "model-merger"
# The check a model record passes: the checkpoint re-hashed before the merge matched the record it links.
MODEL_LINK_CHECK = "lineage.merged_from"


class _Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class ResourceDescriptor(_Strict, kw_only=True):
    name: str
    digest: dict[str, Hex64]


class FileResource(_Strict, kw_only=True):
    # Same fields as an OpenSSF model-signing manifest resource, plus size.
    name: str
    algorithm: Literal["sha256"]
    digest: Hex64
    size: Annotated[int, msgspec.Meta(ge=0)]


class Serialization(_Strict, kw_only=True):
    method: str = "files"
    hash_type: str = "sha256"
    allow_symlinks: bool = False
    ignore_paths: list[str] = []


class FileManifest(_Strict, kw_only=True):
    serialization: Serialization
    resources: list[FileResource]
    # sha256 over the concatenated raw digests in resource order (OMS root).
    root: Sha256


class TensorDigest(_Strict, kw_only=True):
    name: str
    dtype: str
    shape: list[int]
    sha256: Hex64


class SafetensorsDigests(_Strict, kw_only=True):
    file: str
    tensor_count: int
    tensor_bytes: int
    # sha256 of the canonical JSON of `tensors`: one value to compare exports by.
    tensors_digest: Sha256
    tensors: list[TensorDigest]


class Check(_Strict, kw_only=True):
    id: str
    status: Status
    detail: str


class Verdict(_Strict, kw_only=True):
    status: OverallStatus
    checks: list[Check]


class Tracker(_Strict, kw_only=True):
    present: bool
    raw: str | None = None
    step: int | None = None


class RoleLayout(_Strict, kw_only=True):
    role: str
    layout: Literal["fsdp", "megatron-v2", "megatron-v1", "unknown"]
    world_size: int | None = None


class CheckpointInfo(_Strict, kw_only=True):
    root: str
    directory: str
    step: int
    tracker: Tracker
    roles: list[RoleLayout]
    files: FileManifest
    safetensors: list[SafetensorsDigests]


class EngineRank(_Strict, kw_only=True):
    role: str
    pp_rank: int
    tp_rank: int
    tp_size: int
    dp_rank: int
    dp_size: int
    tensor_count: int
    # sha256 of the canonical JSON of this rank's sorted [name, checksum] pairs.
    checksums_digest: str


class EngineObservation(_Strict, kw_only=True):
    url: str
    # What answered: "contract-test-server" when the server says it is one,
    # otherwise "sglang-http (unauthenticated)". Never "verified".
    kind: str
    response_shape: str | None = None
    weight_version: str | None = None
    ranks: list[EngineRank] = []
    error: str | None = None


class TensorComparison(_Strict, kw_only=True):
    against: str
    compared: int
    equal: int
    different: list[str]


HASH_FUNCTION = "sglang.gpu_tensor_hash(seed=0x243F6A88,tile=8192)"
# What sglang's weight checker computes for a tensor held in host memory (an
# engine started with `--device cpu`): not the GPU kernel, the first 8 bytes of sha256.
HASH_FUNCTION_CPU = "sglang.tensor_hash(cpu)=sha256[:8]"


class EngineVersions(_Strict, kw_only=True):
    url: str
    # sglang's own /model_info weight_version: verl 0.9.1 never sets it, so it
    # stays what the engine started with ("default"); it must not move.
    weight_version: str | None
    # verl's version of the served weights: the rollout server actor's
    # `global_steps`, set by verl after each push that carries a step.
    global_steps: int | None
    error: str | None = None


class PushControl(_Strict, kw_only=True):
    """The sensitivity control: the checker must see a reset, the push must undo it."""

    snapshot_ok: bool
    # Served tensors whose checksum changed after `reset_tensors`: must be > 0.
    reset_changed: int
    republished_versions: list[EngineVersions]
    compare_ok: bool
    # The checksums after the republication equal those first read.
    republished_equal: bool
    detail: str


class InRun(_Strict, kw_only=True):
    """When and how the engines were read inside the run (evidence/publication.py)."""

    trainer: str
    # The call after which the engines were read, as verl names it.
    moment: str
    global_step: int
    # The same engines read at the bootstrap: when verl's checkpoint manager first puts them to sleep,
    # just before its first push (evidence/publication.py).
    baseline: list[EngineVersions]
    before: list[EngineVersions]
    after: list[EngineVersions]
    # Pushes observed since `before` was read, this one included.
    pushes: int
    # sha256 of the sorted (engine, role, pp, tp, dp, tensor name) roster.
    roster_digest: Sha256 | None
    # The step of the previous publication read in this run (roster and change baseline).
    previous_step: int | None
    changed_since_previous: int | None
    control: PushControl | None


class Publication(_Strict, kw_only=True, omit_defaults=True):
    # The fields before `in_run` have no defaults so that they are always
    # written: with omit_defaults, records written before `in_run` existed
    # re-encode to the same bytes (verify requires canonical form).
    engines: list[EngineObservation]
    served_digest: str | None
    served_tensor_count: int
    hash_function: str
    vs_checkpoint: TensorComparison | None
    vs_base: TensorComparison | None
    in_run: InRun | None = None


class ChainLink(_Strict, kw_only=True):
    sequence: int
    # "sha256:<hex>" of the previous record file's bytes; null only for the first.
    previous: Sha256 | None


class BundleRef(_Strict, kw_only=True):
    digest: Sha256
    verl: str


class RunInfo(_Strict, kw_only=True):
    run_id: str
    source: Source
    # None: not known when recorded (the in-run callback).
    finished: bool | None
    tutorrl_version: str
    recorded_at: str


class Lineage(_Strict, kw_only=True, omit_defaults=True):
    """The checkpoint a run resumed from, and the record that vouched for it (evidence/lineage.py)."""

    step: int
    directory: str
    # The resumed checkpoint's files root as hashed after the run; its record must give the same.
    files_root: Sha256
    # The record of that checkpoint: its bundle, file name and the sha256 of its bytes. Absent
    # when no record of this machine's runs covered the checkpoint.
    bundle: Sha256 | None = None
    record: str | None = None
    record_digest: Sha256 | None = None
    # Where that bundle was when linked: where `tutorrl verify` looks for the record.
    bundle_path: str | None = None


class Merge(_Strict, kw_only=True, omit_defaults=True):
    """How a model record's folder was made (`tutorrl model`, evidence/merged.py): verl's model merger
    run on the checkpoint its lineage links to. The folder itself is the record's `checkpoint`."""

    # "verl.model_merger" with --backend fsdp or megatron.
    merger: str
    backend: Literal["fsdp", "megatron"]
    # verl's release in the environment the merger ran in (the bundle's: `tutorrl model` refuses another).
    verl: str
    # A LoRA run: the adapter verl's merger wrote (lora_adapter/), and whether the weights beside it are the
    # base model with the adapter merged in (--merge-lora) or the base model alone.
    lora_adapter: bool = False
    lora_merged: bool = False
    # Where the adapter's lora_alpha came from when the merger wrote 0 for it (verl 0.5.0 does).
    lora_alpha_from: str | None = None


class Predicate(_Strict, kw_only=True, omit_defaults=True):
    # The fields before `lineage` have no defaults, so they are always written: with
    # omit_defaults, records written before `lineage` existed re-encode to the same bytes.
    chain: ChainLink
    bundle: BundleRef
    run: RunInfo
    checkpoint: CheckpointInfo
    publication: Publication | None
    verdict: Verdict
    # Only in the first record of a run that resumed from a checkpoint, and in every model record
    # (the checkpoint it was merged from).
    lineage: Lineage | None = None
    # Only in a model record (run.source "model-merger"): `checkpoint` is then the merged folder.
    model: Merge | None = None


class Statement(_Strict, kw_only=True):
    type: Literal["https://in-toto.io/Statement/v1"] = msgspec.field(name="_type", default=STATEMENT_TYPE)
    subject: list[ResourceDescriptor]
    predicateType: Literal["https://tutorrl.dev/evidence/checkpoint/v1"] = PREDICATE_TYPE
    predicate: Predicate


class Head(_Strict, kw_only=True):
    """`evidence/HEAD`: the newest record, so removing the last one is detected."""

    schema: Literal["tutorrl.evidence-head/1"] = HEAD_SCHEMA
    sequence: int
    digest: Sha256


def overall_status(checks: list[Check]) -> OverallStatus:
    # A skipped check never counts as a pass: any skip makes the whole "partial".
    statuses = {c.status for c in checks}
    if "fail" in statuses:
        return "fail"
    if "skipped" in statuses or not checks:
        return "partial"
    return "pass"


def make_verdict(checks: list[Check]) -> Verdict:
    return Verdict(status=overall_status(checks), checks=checks)


# -- Signed records and anchors (evidence/sign.py, evidence/anchor.py) ------------------------------------------------

# DSSE's payload type for an in-toto statement of any predicate.
DSSE_PAYLOAD_TYPE = "application/vnd.in-toto+json"
ANCHOR_SCHEMA = "tutorrl.evidence-anchor/1"


class Signature(_Strict, kw_only=True):
    """One DSSE signature. `keyid` and `publicKey` are hints (DSSE: never a
    security decision on their own); trust comes from `verify --trust`."""

    # sha256 (hex) of the raw 32-byte Ed25519 public key.
    keyid: Hex64
    # base64 of the raw Ed25519 public key: lets a verifier without --trust
    # still check the signature and see a change of signer along the chain.
    publicKey: str
    # base64 of the 64-byte Ed25519 signature over DSSE's PAE(payloadType, payload).
    sig: str


class Envelope(_Strict, kw_only=True):
    """A record file: a DSSE envelope around the canonical bytes of a Statement.
    An unsigned record has no signatures; it is still an envelope."""

    payload: str
    payloadType: Literal["application/vnd.in-toto+json"] = DSSE_PAYLOAD_TYPE
    signatures: list[Signature]


class Anchor(_Strict, kw_only=True):
    """The chain head at one moment, kept by the user outside the bundle."""

    schema: Literal["tutorrl.evidence-anchor/1"] = ANCHOR_SCHEMA
    bundle: Sha256
    sequence: Annotated[int, msgspec.Meta(ge=1)]
    digest: Sha256
