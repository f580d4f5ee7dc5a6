"""CPU port of sglang's per-tensor weight checksum (``/weights_checker``).

sglang (0.5.12 .. 0.5.23) hashes CUDA tensors with a Triton kernel that is not
SHA-256; to compare a checkpoint with what an engine serves we must compute the
same function on the CPU. numpy only (no torch): `tutorrl evidence` stays light.
The definition is in docs/evidence (reference: golden vectors in the tests).
"""

from __future__ import annotations

import hashlib

import numpy as np

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_SEED = 0x243F6A88
_S1 = _SEED
_S2 = ((_SEED * 0x9E3779B1) ^ 0xDEADBEEF) & _M32
_A = 0x27D4EB2D
_B = 0x165667B1
_TILE = 8192  # words per Triton program
# Whole tiles per numpy step: big enough to amortise numpy's per-call cost,
# small enough to stay in L2 (larger steps measured slower).
_TILES_PER_STEP = 4


def _fmix32(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x85EBCA6B)
    x = x ^ (x >> np.uint32(13))
    x = x * np.uint32(0xC2B2AE35)
    return x ^ (x >> np.uint32(16))


def _fmix32_int(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & _M32
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & _M32
    return x ^ (x >> 16)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _splitmix64(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def sglang_gpu_hash(data: bytes | bytearray | memoryview) -> str:
    """sglang's CUDA-branch tensor hash of a tensor's contiguous bytes, as hex16."""
    raw = memoryview(data).cast("B")
    nbytes = len(raw)
    if nbytes == 0:
        return "0" * 16
    pad = (-nbytes) % 4
    if pad:
        raw = memoryview(bytes(raw) + b"\0" * pad)
    words = np.frombuffer(raw, dtype="<u4")
    n = len(words)
    nb = (4 * n) & _M32
    total = 0
    step = _TILE * _TILES_PER_STEP
    with np.errstate(over="ignore"):
        for start in range(0, n, step):
            w = words[start : start + step]
            i = np.arange(start, start + len(w), dtype=np.uint32)
            p1 = (i * np.uint32(_A) + np.uint32(_S1)) ^ _rotl(i, 15)
            p2 = (i * np.uint32(_B) + np.uint32(_S2)) ^ _rotl(i, 13)
            k1 = _fmix32(w ^ p1)
            k2 = _fmix32(w ^ p2)
            # Tile sums; a short last tile is the kernel's masked (zero) tail.
            tiles = -(-len(w) // _TILE)
            edges = np.arange(0, tiles * _TILE, _TILE)
            h1 = np.add.reduceat(k1.astype(np.uint64), edges)
            h2 = np.add.reduceat(k2.astype(np.uint64), edges)
            for a, b in zip(h1.tolist(), h2.tolist()):
                t1 = _fmix32_int((a & _M32) ^ nb)
                t2 = _fmix32_int((b & _M32) ^ nb)
                total = (total + ((t1 << 32) | t2)) & _M64
    return format(_splitmix64(total), "016x")


def sglang_cpu_hash(data: bytes | bytearray | memoryview) -> str:
    """sglang's hash for a CPU-resident tensor: the first 8 bytes of sha256."""
    return hashlib.sha256(data).hexdigest()[:16]


def fp32_to_bf16_bytes(data: bytes | memoryview) -> bytes:
    """Round-to-nearest-even fp32 -> bf16, bit-identical to torch on non-NaN input.

    An engine serving bf16 hashes bf16 bytes, so an fp32 export is cast first.
    NaNs become 0xFFFF, as torch's CPU cast emits.
    """
    bits = np.frombuffer(data, dtype="<u4")
    with np.errstate(over="ignore"):
        rounding = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
        out = ((bits + rounding) >> np.uint32(16)).astype("<u2")
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    out[nan] = 0xFFFF
    return out.tobytes()
