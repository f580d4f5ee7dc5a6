"""Does tutorrl's CPU port of sglang's weight checksum equal sglang's own kernel on a GPU?

Sized for one H200 and well under 10 minutes, with no network: needs only
torch (CUDA build, which brings Triton) and tutorrl's own code. sglang's
kernel comes from an installed sglang, or from a wheel file named with
`--sglang-wheel` (carried to the machine; only the kernel's module is loaded
from it, not the package's dependencies).

For each case (fp32 and bf16 tensors of real random values, odd lengths, a
multi-tile size) it prints one row: the bytes, tutorrl's CPU port (the
baseline), a torch re-implementation run on the device (an independent second
reading of the definition), and sglang's kernel on CUDA, with each timing and
its ratio to the CPU port measured in the same run. Exit status 1 on any
mismatch. Without CUDA (the smoke test) the sglang column says "not run".
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
try:
    from tutorrl.evidence.tensorhash import sglang_gpu_hash
except ModuleNotFoundError:  # run from a checkout that is not installed: the folders are the package
    raise SystemExit("tutorrl is not importable: pip install -e . (or run with the checkout's .venv)") from None

M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
SEED = 0x243F6A88
S2 = ((SEED * 0x9E3779B1) ^ 0xDEADBEEF) & M32
TILE = 8192
# Where sglang keeps the kernel: 0.5.12 and later releases.
KERNEL_MODULES = ("sglang.srt.layers.multimodal", "sglang.kernels.ops.memory.gpu_tensor_hash")


def _fmix32(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = (x * 0x85EBCA6B) & M32
    x = x ^ (x >> 13)
    x = (x * 0xC2B2AE35) & M32
    return x ^ (x >> 16)


def _splitmix64(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def torch_hash(t: torch.Tensor) -> str:
    """The same definition in torch int64 arithmetic, on the tensor's own device."""
    raw = t.contiguous().view(-1).view(torch.uint8)
    if raw.numel() == 0:
        return "0" * 16
    pad = (-raw.numel()) % 4
    if pad:
        raw = torch.cat([raw, raw.new_zeros(pad)])
    b = raw.to(torch.int64).view(-1, 4)
    w = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16) | (b[:, 3] << 24)  # little-endian words
    n = w.numel()
    i = torch.arange(n, device=w.device, dtype=torch.int64)
    rot15 = ((i << 15) | (i >> 17)) & M32
    rot13 = ((i << 13) | (i >> 19)) & M32
    k1 = _fmix32(w ^ (((i * 0x27D4EB2D + SEED) & M32) ^ rot15))
    k2 = _fmix32(w ^ (((i * 0x165667B1 + S2) & M32) ^ rot13))
    tiles = -(-n // TILE)
    nb = (4 * n) & M32
    h = []
    for k in (k1, k2):  # masked tail words add nothing, as in the kernel
        k = torch.cat([k, k.new_zeros(tiles * TILE - n)]).view(tiles, TILE).sum(dim=1) & M32
        h.append(_fmix32(k ^ nb).tolist())
    total = sum((a << 32) | c for a, c in zip(*h)) & M64
    return format(_splitmix64(total), "016x")


def load_sglang_kernel(wheel: Path | None):
    """sglang's `gpu_tensor_hash`, or why it is unavailable."""
    for name in KERNEL_MODULES:
        try:
            return getattr(importlib.import_module(name), "gpu_tensor_hash"), name
        except (ImportError, AttributeError):
            continue
    if wheel is None:
        return None, "sglang not installed and no --sglang-wheel given"
    with zipfile.ZipFile(wheel) as z:
        for name in KERNEL_MODULES:
            member = name.replace(".", "/") + ".py"
            if member in z.namelist():
                out = Path(tempfile.mkdtemp()) / "sglang_kernel.py"
                out.write_bytes(z.read(member))
                spec = importlib.util.spec_from_file_location("sglang_kernel", out)
                mod = importlib.util.module_from_spec(spec)
                try:
                    spec.loader.exec_module(mod)
                    return mod.gpu_tensor_hash, f"{wheel.name}:{member}"
                except Exception as exc:
                    return None, f"{member} from {wheel.name} does not load alone: {type(exc).__name__}: {exc}"
    return None, f"no kernel module in {wheel.name}"


def as_hex(value) -> str:
    if isinstance(value, torch.Tensor):
        value = int(value.item())
    return format(int(value) & M64, "016x")


def timed(fn, device: str, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return out, best


def cases(sizes_mib: list[float], seed: int):
    g = torch.Generator().manual_seed(seed)
    yield "bf16 odd length (3 elements)", torch.randn(3, generator=g).to(torch.bfloat16)
    yield "fp32 one tile + 1 word", torch.randn(TILE + 1, generator=g)
    for mib in sizes_mib:
        n = max(1, int(mib * 2**20) // 4)
        x = torch.randn(n, generator=g)
        yield f"fp32 {mib:g} MiB", x
        yield f"bf16 {mib:g} MiB (fp32 cast)", x.to(torch.bfloat16)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mib", type=float, nargs="+", default=[1, 64, 1024])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sglang-wheel", type=Path)
    args = ap.parse_args(argv)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    kernel, where = load_sglang_kernel(args.sglang_wheel) if device == "cuda" else (None, "not run: no CUDA device")
    print(f"device: {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}; torch {torch.__version__}; "
          f"sglang kernel: {where}")
    header = ("case", "bytes", "tutorrl CPU port", "torch impl", "sglang kernel", "CPU s", "torch s (x CPU)",
              "sglang s (x CPU)", "match")
    rows, failed = [], False
    for name, t in cases(args.sizes_mib, args.seed):
        host = t.contiguous()
        ref, cpu_s = timed(lambda: sglang_gpu_hash(host.view(-1).view(torch.uint8).numpy().tobytes()), "cpu", args.repeat)
        dev = host.to(device)
        mine, torch_s = timed(lambda: torch_hash(dev), device, args.repeat)
        theirs, sgl_s = "not run", None
        if kernel is not None:
            value, sgl_s = timed(lambda: kernel(dev), device, args.repeat)
            theirs = as_hex(value)
        ok = mine == ref and theirs in (ref, "not run")
        failed |= not ok
        rows.append((name, str(host.numel() * host.element_size()), ref, mine, theirs, f"{cpu_s:.4f}",
                     f"{torch_s:.4f} ({torch_s / cpu_s:.2f})",
                     "-" if sgl_s is None else f"{sgl_s:.4f} ({sgl_s / cpu_s:.3f})", "yes" if ok else "MISMATCH"))
        del dev
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for r in (header, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    if kernel is None and device == "cuda":
        print("sglang's kernel was not compared: " + where)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
