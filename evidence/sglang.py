"""Asking sglang engines what they serve, and judging it against the checkpoint.

`/model_info` gives the weight version; `POST /weights_checker {"action":
"checksum"}` (sglang >= 0.5.12) gives per-rank, per-tensor checksums in one of
three response shapes, normalised here. Answers are unauthenticated HTTP: the
record says what answered, and a server that calls itself tutorrl's contract
test server is recorded as exactly that.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from tutorrl._http import open_bounded
from tutorrl._read import ReadError, decode_json, read_json, read_stream
from tutorrl.errors import RefusedError
from tutorrl.evidence.schema import HASH_FUNCTION, HASH_FUNCTION_CPU, Check, EngineObservation, EngineRank, Publication, TensorComparison

if TYPE_CHECKING:
    import numpy as np

# What tutorrl's own contract test server puts in /model_info (see tests).
CONTRACT_TEST_SERVER = "tutorrl-contract-test-server"
_HEX16 = re.compile(r"[0-9a-f]{16}")
# Vocab-parallel tensors are padded to a multiple of 64 rows in the engine:
# without a known layout (served_layout) they are never compared by name.
_PADDED = ("embed_tokens", "lm_head")
# /weights_checker lists one checksum per tensor per rank: a few MB for large
# models; anything far beyond is not an answer to keep in memory.
MAX_ANSWER = 128 * 1024 * 1024
MAX_NAME = 1024
# An engine that is up answers its info routes at once; only the checksum takes
# time (it hashes every served tensor). A silent engine costs this, not the whole budget.
INFO_TIMEOUT_S = 10.0


class EngineError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class RankChecksums:
    role: str
    pp_rank: int
    tp_rank: int
    tp_size: int
    dp_rank: int
    dp_size: int
    checksums: dict[str, str]


@dataclass(frozen=True, slots=True)
class EngineReading:
    observation: EngineObservation
    ranks: list[RankChecksums]
    # Read in a LoRA run (evidence/publication.py): the checksums are of the
    # frozen base only, never of the trained model the checkpoint holds.
    lora: bool = False
    # sglang's `device` server argument (/server_info): which hash its checker computes.
    # None where the route did not say (every GPU engine hashes with the GPU kernel).
    device: str | None = None


LORA_NOT_THE_EXPORT = ("LoRA run: sglang's checksums cover the frozen base it serves, and the adapter is held apart "
                       "where /weights_checker cannot see it, so no served tensor is the trained model the checkpoint "
                       "holds (see publication.base_unchanged and publication.adapter)")


def _request(url: str, path: str, body: dict | None, timeout: float) -> tuple[int, object]:
    """Status and decoded JSON (None when not JSON) of one request; bounded like every untrusted input."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method="GET" if body is None else "POST")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    where = f"{url}{path}"
    try:
        try:
            # Engines are cluster-internal; an HTTP(S)_PROXY meant for the internet must not see them.
            with open_bounded(req, timeout, urllib.request.ProxyHandler({})) as resp:
                status, raw = resp.status, read_stream(resp, MAX_ANSWER, name=where, within=timeout)
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, read_stream(exc, MAX_ANSWER, name=where, within=timeout)
    except ReadError as exc:
        raise EngineError(str(exc)) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        # ValueError: a URL urllib cannot even form a request from.
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            raise EngineError(f"{where}: no complete answer within {timeout:.3g} s") from None
        raise EngineError(f"{where}: {reason}") from None
    if not raw:
        return status, None
    try:
        return status, decode_json(raw, name=where)
    except ReadError as exc:
        if status == 200:  # an answer that claims success must be one
            raise EngineError(f"{exc} (not an sglang engine?)") from None
        return status, None


def _short(text: str, what: str) -> str:
    # Strings from the engine are copied into the record: keep them record-sized.
    if len(text) > MAX_NAME:
        raise EngineError(f"{what} is {len(text)} characters long, over the {MAX_NAME}-character limit")
    return text


def _int(d: dict, key: str) -> int:
    v = d.get(key, 0)
    if type(v) is not int:
        raise EngineError(f"parallelism_info.{key} is {str(v)[:40]}, not an integer")
    return v


def normalise_checksum_response(body: object) -> tuple[str, list[RankChecksums]]:
    """The ranks of a `/weights_checker` checksum answer from any sglang 0.5.12+."""
    if not isinstance(body, dict) or body.get("success") is not True:
        msg = body.get("message") if isinstance(body, dict) else body
        hint = f" ({KERNEL_HINT})" if any(m in str(msg) for m in _KERNEL_0_5_12) else ""
        raise EngineError(f"weights_checker did not succeed: {str(msg)[:200]}{hint}")
    ranks = body.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        raise EngineError("weights_checker answer has no ranks")
    shape = None
    out: list[RankChecksums] = []
    for entry in ranks:
        if not isinstance(entry, dict) or not isinstance(entry.get("checksums"), dict):
            raise EngineError("a weights_checker rank has no checksums map")
        info = entry.get("parallelism_info")
        if isinstance(info, list):  # 0.5.21+: one entry per runner role
            this = ">=0.5.21"
            roles = [r for r in info if isinstance(r, dict)]
            if not roles:
                raise EngineError("parallelism_info list is empty")
            info = next((r for r in roles if r.get("role") == "target"), roles[0])
            role = _short(str(info.get("role", "target"))[:MAX_NAME + 1], "parallelism_info.role")
        elif isinstance(info, dict):
            this = "0.5.13-0.5.20" if "per_gpu_checksum" in entry else "0.5.12"
            role = "target"
        else:
            raise EngineError("a weights_checker rank has no parallelism_info")
        if shape not in (None, this):
            raise EngineError(f"weights_checker ranks mix response shapes {shape} and {this}")
        shape = this
        checksums = {}
        for name, value in entry["checksums"].items():
            if not (isinstance(name, str) and len(name) <= MAX_NAME and isinstance(value, str) and _HEX16.fullmatch(value)):
                raise EngineError(f"checksum of {str(name)[:200]!r} is {str(value)[:40]!r}, not 16 lowercase hex digits")
            checksums[name] = value
        out.append(RankChecksums(role, _int(info, "pp_rank"), _int(info, "tp_rank"), max(1, _int(info, "tp_size")),
                                 _int(info, "dp_rank"), max(1, _int(info, "dp_size")), checksums))
    assert shape is not None
    return shape, out


def checksums_digest(checksums: dict[str, str]) -> str:
    return "sha256:" + hashlib.sha256(msgspec.json.encode(sorted(checksums.items()))).hexdigest()


# sglang's /weights_checker actions other than `checksum` (all since 0.5.6):
# `snapshot` copies every served tensor to host memory, `reset_tensors`
# overwrites every one in place with random values (the engine serves garbage
# until the next push), `compare` checks the served tensors against the
# snapshot bit for bit. Only the sensitivity control uses them.
#
# Who frees the snapshot: from 0.5.21 `compare` does (weight_checker.py:202,
# `self._snapshot_tensors = None`). In 0.5.12-0.5.20 (read in the 0.5.12, 0.5.13,
# 0.5.14 and 0.5.20 wheels) -- verl 0.9.1's pin and tutorrl's included -- nothing does: `_compare` leaves
# `_snapshot_tensors` set and no action clears it, so after one control every
# rank keeps a host copy of every served tensor (about 2 bytes a parameter in
# bf16: ~64 GB for a 32B model, per engine) until the engine exits. The
# control therefore runs only where compare frees it (`snapshot_is_freed`).
ACTIONS = ("snapshot", "reset_tensors", "compare")
# What every /weights_checker request asks for. From 0.5.21 a request without
# `selector` means "all" (target and draft/MTP runners: the control would also
# reset draft weights verl never republishes, and checksums would carry
# "draft."-prefixed names); "target" is what verl pushes. 0.5.12-0.5.20 ignore
# fields they do not know (pydantic `extra="ignore"` for 0.5.12-0.5.14's
# dataclass, `extra_behavior="ignore"` in 0.5.20's msgspec schema).
# `skip_tensor_list` is not sent: verl pushes every target tensor (a vision
# tower included), so every one is checked; miles skips "visual" because its
# publication does not.
SELECTOR = {"selector": "target"}
# Response shapes (normalise_checksum_response) of releases whose `compare` frees the snapshot.
FREES_SNAPSHOT = (">=0.5.21",)
SNAPSHOT_HELD = ("sglang {shape} never frees the /weights_checker snapshot (only 0.5.21+'s compare does): the "
                 "control would leave every rank of every engine holding a host-memory copy of every served tensor "
                 "(about 2 bytes per parameter in bf16, e.g. ~64 GB for a 32B model, per engine) until the engine "
                 "exits")


def snapshot_is_freed(shape: str | None) -> bool:
    """Whether the release that answered with `shape` frees the snapshot in `compare`."""
    return shape in FREES_SNAPSHOT


# sglang 0.5.12's checksum kernel (`_as_uint32_words`, srt/layers/multimodal.py:122)
# views a tensor as bytes without flattening it, so a tensor of 2 or more
# dimensions whose last dimension is not a multiple of 4 bytes makes the whole
# checksum call fail with one of these torch errors; 0.5.13 added `.reshape(-1)`.
_KERNEL_0_5_12 = ("to view Byte as UInt32", "must match the size of tensor b")
KERNEL_HINT = ("sglang 0.5.12's checksum kernel cannot hash a tensor of 2+ dimensions whose last dimension is not a "
               "multiple of 4 bytes, and then fails the whole call (fixed in 0.5.13; tutorrl's stack pins 0.5.14)")


def weights_checker_action(url: str, action: str, *, timeout: float = 600.0) -> str:
    """Run one of ACTIONS on an engine; its message, or EngineError when it did not succeed."""
    if action not in ACTIONS:
        raise ValueError(action)
    # No `allow_quant_error`: `compare` is then bitwise (its default), as wanted.
    status, body = _request(url, "/weights_checker", {"action": action, **SELECTOR}, timeout)
    if status == 404:
        raise EngineError("no /weights_checker route (sglang < 0.5.6)")
    if status != 200 or not isinstance(body, dict) or body.get("success") is not True:
        msg = body.get("message") if isinstance(body, dict) else body
        raise EngineError(f"weights_checker {action} answered HTTP {status}: {str(msg)[:300]}")
    return _short(str(body.get("message", "")), "message")


class _Budget:
    """Seconds left of one engine's reading: ``timeout`` bounds all its requests together, not each."""

    def __init__(self, url: str, total: float):
        self.url, self.total, self.end = url, total, time.monotonic() + total

    def __call__(self, cap: float | None = None) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise EngineError(f"{self.url}: no complete reading within {self.total:g} s")
        return left if cap is None else min(left, cap)


def read_weight_version(url: str, *, timeout: float = 60.0) -> str | None:
    """sglang's own weight_version (None when the engine reports none); EngineError when it does not answer."""
    left = _Budget(url, timeout)
    status, info = _request(url, "/model_info", None, left(INFO_TIMEOUT_S))
    if status == 404:
        status, info = _request(url, "/get_model_info", None, left(INFO_TIMEOUT_S))
    if status != 200 or not isinstance(info, dict):
        raise EngineError(f"/model_info answered HTTP {status}")
    v = info.get("weight_version")
    return _short(v, "weight_version") if isinstance(v, str) else None


def rank_key(r: RankChecksums) -> tuple[str, int, int, int]:
    return (r.role, r.pp_rank, r.tp_rank, r.dp_rank)


def served_maps(readings: list[EngineReading]) -> dict[tuple[int, str, int, int, int], dict[str, str]]:
    """Every rank's checksums keyed by (engine index, role, pp, tp, dp): what roster and change checks compare."""
    return {(i, *rank_key(r)): r.checksums for i, reading in enumerate(readings) for r in reading.ranks}


def read_engine(url: str, *, timeout: float = 120.0, device: str | None = None) -> EngineReading:
    """One engine's weight version and checksums, all within ``timeout`` seconds; failures land in `.error`.

    ``device``: the device the engine was started on, where the caller knows it (inside a verl run, from
    the rollout config); else the engine is asked (/server_info). It decides which hash its checksums are."""
    kind = "sglang-http (unauthenticated)"
    version = None
    left = _Budget(url, timeout)
    try:
        status, info = _request(url, "/model_info", None, left(INFO_TIMEOUT_S))
        if status == 404:  # sglang 0.5.1-0.5.5 only had the older route names
            status, info = _request(url, "/get_model_info", None, left(INFO_TIMEOUT_S))
        if status != 200 or not isinstance(info, dict):
            raise EngineError(f"/model_info answered HTTP {status}")
        if info.get("server_kind") == CONTRACT_TEST_SERVER:
            kind = "contract-test-server"
        # No fallback: /get_weight_version answers 404 in 0.5.8-0.5.20 and is gone
        # from 0.5.21; /model_info carries weight_version in every release with a checksum.
        if isinstance(info.get("weight_version"), str):
            version = _short(info["weight_version"], "weight_version")
        if device is None:
            device = _device(url, left)
        status, body = _request(url, "/weights_checker", {"action": "checksum", **SELECTOR}, left())
        if status == 404:
            raise EngineError("no /weights_checker route (sglang < 0.5.6)")
        shape, ranks = normalise_checksum_response(body)
    except EngineError as exc:
        obs = EngineObservation(url=url, kind=kind, weight_version=version, error=str(exc))
        return EngineReading(obs, [])
    obs = EngineObservation(
        url=url, kind=kind, response_shape=shape, weight_version=version,
        ranks=[EngineRank(role=r.role, pp_rank=r.pp_rank, tp_rank=r.tp_rank, tp_size=r.tp_size, dp_rank=r.dp_rank,
                          dp_size=r.dp_size, tensor_count=len(r.checksums), checksums_digest=checksums_digest(r.checksums))
               for r in sorted(ranks, key=lambda r: (r.role, r.pp_rank, r.tp_rank, r.dp_rank))],
    )
    return EngineReading(obs, ranks, device=device)


def _device(url: str, left: _Budget) -> str | None:
    """sglang's `device` server argument, from /server_info (/get_server_info before 0.5.10); None if unsaid.

    It decides the checksum: sglang's checker hashes a tensor in host memory with sha256, one on a GPU
    with its Triton kernel. Not an error when absent: an engine that does not say is hashed as a GPU one."""
    status, info = _request(url, "/server_info", None, left(INFO_TIMEOUT_S))
    if status == 404:
        status, info = _request(url, "/get_server_info", None, left(INFO_TIMEOUT_S))
    device = info.get("device") if status == 200 and isinstance(info, dict) else None
    return _short(device, "device") if isinstance(device, str) else None


def engine_hash(readings: list[EngineReading]) -> tuple[Callable[[memoryview], str], str] | str:
    """The checksum the answering engines computed (function, its name in the record), or why none is known."""
    from tutorrl.evidence.tensorhash import sglang_cpu_hash, sglang_gpu_hash

    devices = {r.device == "cpu" for r in readings if r.ranks}
    if devices == {True}:
        return sglang_cpu_hash, HASH_FUNCTION_CPU
    if devices == {True, False}:
        cpu = sorted(r.observation.url for r in readings if r.ranks and r.device == "cpu")
        return f"engines on the CPU ({', '.join(cpu)}) and on GPUs hash differently: not compared"
    return sglang_gpu_hash, HASH_FUNCTION


def _served_shards(readings: list[EngineReading]) -> dict[tuple[str, int, int], list[tuple[str, dict[str, str]]]]:
    groups: dict[tuple[str, int, int], list[tuple[str, dict[str, str]]]] = {}
    for reading in readings:
        for r in reading.ranks:
            groups.setdefault((r.role, r.pp_rank, r.tp_rank), []).append((f"{reading.observation.url} dp{r.dp_rank}", r.checksums))
    return groups


def _target_shards(readings: list[EngineReading]) -> list[tuple[int, int, dict[str, str]]]:
    """Every distinct (tp_rank, tp_size, checksums) the target role serves: replicas that agree count once."""
    seen: dict[tuple[int, int, str], dict[str, str]] = {}
    for reading in readings:
        for r in reading.ranks:
            if r.role == "target":
                seen.setdefault((r.tp_rank, r.tp_size, checksums_digest(r.checksums)), r.checksums)
    return [(tp, size, m) for (tp, size, _), m in sorted(seen.items(), key=lambda kv: kv[0])]


def _label(name: str, tp_rank: int, tp_size: int) -> str:
    return name if tp_size == 1 else f"{name} (tp {tp_rank}/{tp_size})"


@dataclass(frozen=True, slots=True)
class Coverage:
    """What a comparison could not cover, and why: for the record's details."""
    not_compared: int
    reasons: list[str]  # "reason: N shard(s), e.g. NAME", most frequent first

    def summary(self) -> str:
        return f"{self.not_compared} served shard(s) not compared: " + "; ".join(self.reasons[:4])


def _compare(label: str, shards: list[tuple[int, int, dict[str, str]]],
             reference: CheckpointReference, hasher: Callable[[memoryview], str]) -> tuple[TensorComparison, Coverage]:
    """Each served (tensor, TP rank) against the checksum candidates `reference` rebuilds for it."""
    keys = [(n, tp, size) for tp, size, m in shards for n in m]
    expected, skipped = reference.expected(keys, hasher)
    compared, different = 0, []
    for tp, size, m in shards:
        for n in sorted(m):
            cands = expected.get((n, tp, size))
            if cands is None:
                continue
            compared += 1
            if m[n] not in cands:
                different.append(_label(n, tp, size))
    by_reason: dict[str, list[str]] = {}
    for (n, tp, size), why in sorted(skipped.items()):
        by_reason.setdefault(why, []).append(_label(n, tp, size))
    reasons = [f"{why}: {len(names)}, e.g. {names[0]}"
               for why, names in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    comparison = TensorComparison(against=label, compared=compared, equal=compared - len(different),
                                  different=different[:20])
    return comparison, Coverage(len(skipped), reasons)


def _uncovered_ranks(shards: list[tuple[int, int, dict[str, str]]]) -> str:
    """TP ranks of an answered tp_size that sent no checksums (sglang 0.5.12 answers for rank 0 only)."""
    seen: dict[int, set[int]] = {}
    for tp, size, _ in shards:
        seen.setdefault(size, set()).add(tp)
    missing = [f"ranks {sorted(set(range(size)) - ranks)} of tp_size {size}"
               for size, ranks in sorted(seen.items()) if len(ranks) < size]
    return ("; not covered (no checksums answered): " + ", ".join(missing)) if missing else ""


def tp_coverage(readings: list[EngineReading]) -> Check:
    """Whether every tensor-parallel rank of every engine answered with its checksums.

    sglang 0.5.13+ all-gathers every TP rank's checksums into the answer; 0.5.12
    returns only the replying (TP 0) scheduler's, so with tp_size > 1 the other
    ranks cannot be covered through the API (verl 0.9.1 pins 0.5.12 and launches
    sglang with tp_size = rollout TP x DP). With tp_size 1 there is nothing else.
    """
    missing, uncoverable = [], []
    answered = [r for r in readings if not r.observation.error]
    for reading in answered:
        groups: dict[tuple[str, int, int], tuple[int, set[int]]] = {}
        for r in reading.ranks:
            size, seen = groups.setdefault((r.role, r.pp_rank, r.dp_rank), (r.tp_size, set()))
            seen.add(r.tp_rank)
            if r.tp_size != size:
                missing.append(f"{reading.observation.url} {r.role} pp{r.pp_rank}: tp_size {size} and {r.tp_size}")
        for (role, pp, dp), (size, seen) in sorted(groups.items()):
            lacking = sorted(set(range(size)) - seen)
            if not lacking:
                continue
            where = f"{reading.observation.url} {role} pp{pp} dp{dp}: tp ranks {lacking} of {size} absent"
            (uncoverable if reading.observation.response_shape == "0.5.12" else missing).append(where)
    if missing:
        return Check(id="publication.tp_coverage", status="fail", detail="; ".join(missing[:10]))
    if uncoverable:
        return Check(id="publication.tp_coverage", status="skipped", detail=(
            "sglang 0.5.12 returns only the replying TP rank's tensors (0.5.13+ return every rank): "
            + "; ".join(uncoverable[:10])))
    if not answered or not any(r.ranks for r in answered):
        return Check(id="publication.tp_coverage", status="skipped", detail="no engine answered with checksums")
    n = sum(len(r.ranks) for r in answered)
    return Check(id="publication.tp_coverage", status="pass",
                 detail=f"every tensor-parallel rank of {len(answered)} engine(s) answered ({n} rank(s))")


def judge(
    readings: list[EngineReading],
    checkpoint_hashes: CheckpointReference | None,
    base_hashes: CheckpointReference | None,
) -> tuple[Publication, list[Check]]:
    """The publication block and its checks, `*_hashes` rebuilding expected checksums from safetensors."""
    checks: list[Check] = []
    obs = [r.observation for r in readings]
    failed = [o for o in obs if o.error]
    if failed and all(KERNEL_HINT in (o.error or "") for o in failed):
        # A known defect of the engine's release, not a sign of wrong weights: nothing can be read there.
        checks.append(Check(id="publication.engines_answered", status="skipped",
                            detail="; ".join(f"{o.url}: {o.error}" for o in failed)))
    elif failed:
        checks.append(Check(id="publication.engines_answered", status="fail",
                            detail="; ".join(f"{o.url}: {o.error}" for o in failed)))
    else:
        checks.append(Check(id="publication.engines_answered", status="pass",
                            detail=f"{len(obs)} engine(s) answered /model_info and /weights_checker checksum"))
    test_servers = [o.url for o in obs if o.kind == "contract-test-server"]
    if test_servers:
        checks.append(Check(id="publication.real_engine", status="skipped",
                            detail=f"answered by tutorrl's contract test server ({', '.join(test_servers)}), not a real engine"))
    checks.append(tp_coverage(readings))

    versions = sorted({o.weight_version for o in obs if o.weight_version is not None})
    if not versions:
        checks.append(Check(id="publication.weight_version", status="skipped", detail="no engine reported a weight_version"))
    elif len(versions) == 1 and all(o.weight_version is not None for o in obs):
        checks.append(Check(id="publication.weight_version", status="pass",
                            detail=f"every engine serves weight_version {versions[0]!r} (verl 0.9.1 never sets it: 'default' is normal)"))
    else:
        checks.append(Check(id="publication.weight_version", status="fail", detail=f"engines disagree: {versions}"))

    groups = _served_shards(readings)
    distinct: list[tuple[str, int, int, list[tuple[str, str]]]] = []
    disagree = []
    for key, members in sorted(groups.items()):
        maps = {checksums_digest(m): m for _, m in members}
        if len(maps) > 1:
            disagree.append(f"{key[0]} pp{key[1]} tp{key[2]}: " + ", ".join(w for w, _ in members))
        for m in maps.values():
            distinct.append((key[0], key[1], key[2], sorted(m.items())))
    if disagree:
        checks.append(Check(id="publication.replicas_agree", status="fail",
                            detail="data-parallel replicas serve different weights: " + "; ".join(disagree)))
    elif groups and any(len(m) > 1 for m in groups.values()):
        n = max(len(m) for m in groups.values())
        checks.append(Check(id="publication.replicas_agree", status="pass",
                            detail=f"{n} data-parallel replica(s) per shard serve identical checksums"))
    else:
        checks.append(Check(id="publication.replicas_agree", status="skipped",
                            detail="one replica per shard: nothing to compare" if groups else "no checksums to compare"))

    served_digest = None
    if distinct:
        served_digest = "sha256:" + hashlib.sha256(msgspec.json.encode(sorted(distinct))).hexdigest()
    # Every rank that answered is compared: the reference rebuilds each rank's
    # shard (fused, sliced, padded) from the checkpoint, as sglang's loaders do.
    shards = _target_shards(readings)
    uncovered = _uncovered_ranks(shards)
    vs_ckpt = vs_base = None
    hashed = engine_hash(readings)
    hasher, hash_function = hashed if isinstance(hashed, tuple) else (None, HASH_FUNCTION)
    if shards and hasher is None:
        checks.append(Check(id="publication.matches_checkpoint", status="skipped", detail=hashed))
    elif not shards:
        checks.append(Check(id="publication.matches_checkpoint", status="skipped",
                            detail="no target rank answered with checksums"))
    elif any(r.lora for r in readings):
        checks.append(Check(id="publication.matches_checkpoint", status="skipped", detail=LORA_NOT_THE_EXPORT))
    elif checkpoint_hashes is None:
        checks.append(Check(id="publication.matches_checkpoint", status="skipped",
                            detail="the checkpoint has no safetensors export to compare with"))
    else:
        vs_ckpt, cover = _compare("checkpoint safetensors export", shards, checkpoint_hashes, hasher)
        ranks = len({(tp, size) for tp, size, _ in shards})
        how = checkpoint_hashes.layout
        if vs_ckpt.compared == 0:
            checks.append(Check(id="publication.matches_checkpoint", status="skipped",
                                detail=f"no served tensor could be rebuilt from the export ({how}); {cover.summary()}"))
        elif vs_ckpt.different:
            checks.append(Check(id="publication.matches_checkpoint", status="fail", detail=(
                f"{vs_ckpt.compared - vs_ckpt.equal} of {vs_ckpt.compared} served shards differ from the export "
                f"rebuilt as the engine loads it ({how}), e.g. {vs_ckpt.different[0]}")))
        else:
            checks.append(Check(id="publication.matches_checkpoint", status="pass", detail=(
                f"all {vs_ckpt.compared} served shards on {ranks} TP rank(s) equal the export rebuilt as the "
                f"engine loads it ({how})" + uncovered)))
        if cover.not_compared:
            checks.append(Check(id="publication.checkpoint_coverage", status="skipped",
                                detail=f"{cover.summary()} ({how})"))
        else:
            checks.append(Check(id="publication.checkpoint_coverage", status="pass", detail=(
                f"every served tensor of every answering TP rank was rebuilt from the export ({how})" + uncovered)))
    if any(r.lora for r in readings):
        checks.append(Check(id="publication.changed_from_base", status="skipped", detail=LORA_NOT_THE_EXPORT))
    elif hasher is None and shards:
        checks.append(Check(id="publication.changed_from_base", status="skipped", detail=hashed))
    elif base_hashes is None or not shards:
        checks.append(Check(id="publication.changed_from_base", status="skipped",
                            detail="no base model safetensors to compare with" if shards else "no target rank answered"))
    else:
        vs_base, _ = _compare("base model", shards, base_hashes, hasher)
        matched = vs_ckpt is not None and vs_ckpt.compared > 0 and not vs_ckpt.different
        if vs_base.compared == 0:
            checks.append(Check(id="publication.changed_from_base", status="skipped",
                                detail=f"no served tensor could be rebuilt from the base model ({base_hashes.layout})"))
        elif not vs_base.different:
            checks.append(Check(id="publication.changed_from_base", status="fail",
                                detail=f"all {vs_base.compared} comparable served shards still equal the base model"))
        elif matched:
            checks.append(Check(id="publication.changed_from_base", status="pass",
                                detail=f"{vs_base.compared - vs_base.equal} of {vs_base.compared} served shards differ from the base model"))
        else:
            # Without a match against the checkpoint, "different" may only mean another dtype or layout.
            checks.append(Check(id="publication.changed_from_base", status="skipped",
                                detail="served tensors differ from the base, but without a checkpoint match that may be dtype or layout"))
    pub = Publication(
        engines=obs, served_digest=served_digest,
        served_tensor_count=sum(len(items) for *_, items in distinct), hash_function=hash_function,
        vs_checkpoint=vs_ckpt, vs_base=vs_base,
    )
    return pub, checks


# Element views by byte width: slicing and concatenating integers moves the
# bits of any float type unchanged, which is all the loaders do.
_UINT = {1: "u1", 2: "<u2", 4: "<u4", 8: "<u8"}
MAX_CONFIG = 4 * 1024 * 1024

Key = tuple[str, int, int]  # (served name, tp_rank, tp_size)


class CheckpointReference:
    """Expected sglang checksums of served shards, rebuilt from a safetensors export.

    For the families in `served_layout.FAMILIES` (named by the export's
    config.json) every served parameter of every TP rank is rebuilt from the
    checkpoint tensors it is loaded from: fused q/k/v and gate/up, TP slices with
    KV-head replication, zero-padded vocab rows. Without that config (absent,
    unreadable, another architecture) only a served tensor with a checkpoint
    tensor of the same name at tp_size 1 is compared, vocab-padded ones excepted;
    everything else is reported as not compared, with the reason.

    fp32 tensors get a second candidate cast to bf16 (round-to-nearest-even):
    a bf16 engine hashes the bytes it serves, not the export's.
    """

    def __init__(self, files: list[Path], config: Path | None = None):
        from tutorrl.evidence.safetensors import read_header
        from tutorrl.evidence.served_layout import model_shape

        self.where = {}
        for f in files:
            for t in read_header(f).tensors:
                self.where[t.name] = (f, t)
        if config is None and files:
            config = files[0].parent / "config.json"
        self.shape = None
        if config is None:
            why = "no config.json"
        else:
            try:
                found = model_shape(read_json(config, MAX_CONFIG, name=config.name))
            except FileNotFoundError:
                found = f"no {config.name} next to the safetensors files"
            except ReadError as exc:
                found = str(exc)
            if isinstance(found, str):
                why = found
            else:
                self.shape, why = found, ""
        # How served shards are rebuilt, for the record.
        if self.shape is not None:
            self.layout = f"{self.shape.architecture} layout from config.json: fused qkv/gate_up, TP slices, vocab padding"
        else:
            self.layout = f"{why}: same-named tensors at tp_size 1 only"
        self._no_layout = why

    def _plan(self, name: str, tp_size: int) -> tuple[str, tuple[str, ...]] | str:
        from tutorrl.evidence.served_layout import plan

        if self.shape is not None:
            found = plan(name, self.shape)
            if found is not None:
                return found
        if tp_size == 1 and name in self.where:
            if self.shape is None and any(p in name for p in _PADDED):
                return "vocab-padded in the engine; no layout to rebuild its padding"
            return "replicated", (name,)
        if self.shape is None:
            return self._no_layout
        return ("no checkpoint tensor of that name" if tp_size == 1
                else f"no {self.shape.architecture} layout rule for it")

    def _array(self, name: str) -> np.ndarray:
        import numpy as np

        from tutorrl.evidence.safetensors import ITEMSIZE
        from tutorrl.evidence.served_layout import LayoutError

        f, t = self.where[name]
        size = ITEMSIZE.get(t.dtype)
        if size not in _UINT:
            raise LayoutError(f"{name} has dtype {t.dtype}, not byte-addressable")
        return np.fromfile(f, dtype=_UINT[size], count=t.nbytes // size, offset=t.start).reshape(t.shape)

    def expected(self, keys: Iterable[Key], hasher: Callable[[memoryview], str]) -> tuple[dict[Key, set[str]], dict[Key, str]]:
        """Checksum candidates (by ``hasher``, the engine's checksum) for each key that can be rebuilt;
        for the others, why not."""
        import numpy as np

        from tutorrl.evidence.served_layout import LayoutError, build
        from tutorrl.evidence.tensorhash import fp32_to_bf16_bytes

        by_name: dict[str, list[Key]] = {}
        for key in keys:
            by_name.setdefault(key[0], []).append(key)
        expected: dict[Key, set[str]] = {}
        skipped: dict[Key, str] = {}
        for name, group in sorted(by_name.items()):
            # One read of the sources per served name, whatever the number of ranks asking.
            arrays: dict[tuple[str, ...], list[np.ndarray] | str] = {}
            for key in sorted(set(group)):
                _, tp, size = key
                plan = self._plan(name, size)
                if isinstance(plan, str):
                    skipped[key] = plan
                    continue
                kind, sources = plan
                if sources not in arrays:
                    missing = [s for s in sources if s not in self.where]
                    dtypes = {self.where[s][1].dtype for s in sources if s in self.where}
                    if missing:
                        arrays[sources] = f"checkpoint has no {missing[0]}"
                    elif len(dtypes) > 1:
                        arrays[sources] = f"sources mix dtypes {sorted(dtypes)}"
                    else:
                        try:
                            arrays[sources] = [self._array(s) for s in sources]
                        except (LayoutError, ValueError, OSError) as exc:
                            arrays[sources] = str(exc)
                got = arrays[sources]
                if isinstance(got, str):
                    skipped[key] = got
                    continue
                try:
                    # Hashed in place: a copy of every served shard would double the memory traffic.
                    raw = np.ascontiguousarray(build(kind, got, self.shape, tp, size)).data
                except LayoutError as exc:
                    skipped[key] = str(exc)
                    continue
                cands = {hasher(raw)}
                if self.where[sources[0]][1].dtype == "F32":
                    cands.add(hasher(memoryview(fp32_to_bf16_bytes(raw))))
                expected[key] = cands
        return expected, skipped


def safetensors_sglang_hashes(files: list[Path], config: Path | None = None) -> CheckpointReference:
    """The reference for an export's safetensors files (config.json: next to them unless given)."""
    try:
        import tutorrl.evidence.tensorhash  # noqa: F401  (numpy: the engine extra)
    except ModuleNotFoundError as exc:
        if exc.name != "numpy":
            raise
        raise RefusedError("comparing a checkpoint with the weights an engine serves needs numpy: "
                           "pip install 'tutorrl[engine]'") from None
    return CheckpointReference(files, config)
