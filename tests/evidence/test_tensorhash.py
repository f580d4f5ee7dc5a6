import numpy as np
import pytest

from tutorrl.evidence.tensorhash import fp32_to_bf16_bytes, sglang_cpu_hash, sglang_gpu_hash

# Golden vectors produced by sglang 0.5.23's own Triton kernel (interpreter mode).
GOLDEN = [
    (b"", "0000000000000000", "e3b0c44298fc1c14"),
    (b"abc", "d8af575884d43b13", "ba7816bf8f01cfea"),
    (bytes(4), "3d93a6540b54ef2a", "df3f619804a92fdb"),
    (bytes(range(256)), "ac371f47da03664b", "40aff2e9d2d8922e"),
    (bytes(range(256)) * 128, "668122ab2b04f371", "e11360251d117365"),
    (bytes(range(256)) * 128 + b"\x01\x02\x03\x04", "70d259f5f7cf24a9", "93917703c1e3324d"),
    (np.arange(65536, dtype="<f4").tobytes(), "3374626470917820", "00f2c484030d0c6a"),
]


@pytest.mark.parametrize("data,gpu,cpu", GOLDEN)
def test_golden_vectors(data, gpu, cpu):
    assert sglang_gpu_hash(data) == gpu
    assert sglang_cpu_hash(data) == cpu


def test_hash_is_position_dependent_and_chunking_invariant():
    data = np.random.default_rng(0).integers(0, 256, size=8192 * 4 * 9 + 6, dtype=np.uint8).tobytes()
    assert sglang_gpu_hash(data) == sglang_gpu_hash(memoryview(data))
    swapped = data[4:8] + data[:4] + data[8:]
    assert sglang_gpu_hash(swapped) != sglang_gpu_hash(data)


@pytest.mark.parametrize("f32,bf16", [
    (0x3F800000, 0x3F80),  # 1.0
    (0x3F808000, 0x3F80),  # tie, even stays
    (0x3F818000, 0x3F82),  # tie, odd rounds up
    (0x3F80C000, 0x3F81),  # above half
    (0x7F800000, 0x7F80),  # +inf
    (0xFF800000, 0xFF80),  # -inf
    (0x00000001, 0x0000),  # smallest subnormal rounds to zero
    (0x7F7FFFFF, 0x7F80),  # max float rounds to inf, as torch does
    (0x7FC00000, 0xFFFF),  # NaN: torch CPU emits 0xFFFF
])
def test_bf16_round_to_nearest_even(f32, bf16):
    out = fp32_to_bf16_bytes(np.array([f32], dtype="<u4").tobytes())
    assert np.frombuffer(out, dtype="<u2")[0] == bf16
