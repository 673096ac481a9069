"""Hardware presets (published datasheet numbers) and this machine, measured.

One number pair decides most of Lesson 25: memory bandwidth and dense
arithmetic peak. Their ratio, the ridge point, is the arithmetic intensity
(FLOP per byte of weights read) above which a decode step stops waiting on
memory and starts waiting on arithmetic.
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Hardware:
    """One accelerator (or this CPU) as the roofline sees it."""

    name: str
    memory_gb: float  # usable device memory, GB (1e9 bytes)
    bandwidth_gb_s: float  # memory read bandwidth, GB/s
    peak_tflops: float  # dense peak for the serving dtype, TFLOP/s
    dtype: str = "bfloat16"  # the dtype peak_tflops is quoted for
    interconnect_gb_s: float = 0.0  # per-GPU link bandwidth inside a node (NVLink), GB/s
    source: str = ""  # where the numbers come from

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity where compute time equals memory time."""
        return self.peak_tflops * 1e12 / (self.bandwidth_gb_s * 1e9)

    def ridge_tokens_per_step(self, bytes_per_param: float | None = None) -> float:
        """Tokens a decode step must carry before weights stop being the bottleneck.

        Each token costs 2 FLOP per parameter; the weights cost bytes_per_param
        bytes per parameter, read once per step. So intensity = tokens * 2 / bytes_per_param.
        """
        if bytes_per_param is None:
            bytes_per_param = DTYPE_BYTES[self.dtype]
        return self.ridge_flop_per_byte * bytes_per_param / 2.0

    def to_dict(self) -> dict:
        return asdict(self)


DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "int8": 1, "int4": 0.5}

# Published SXM datasheet numbers: dense (no sparsity) bf16 tensor-core peak.
PRESETS: dict[str, Hardware] = {
    "H200": Hardware("H200", 141, 4800, 989, interconnect_gb_s=900,
                     source="NVIDIA H200 SXM datasheet: 141 GB HBM3e, 4.8 TB/s, 989 TFLOP/s dense BF16"),
    "H100": Hardware("H100", 80, 3350, 989, interconnect_gb_s=900,
                     source="NVIDIA H100 SXM datasheet: 80 GB HBM3, 3.35 TB/s, 989 TFLOP/s dense BF16"),
    "A100": Hardware("A100", 80, 2039, 312, interconnect_gb_s=600,
                     source="NVIDIA A100 SXM 80GB datasheet: 2.039 TB/s, 312 TFLOP/s dense BF16"),
    "L40S": Hardware("L40S", 48, 864, 362, interconnect_gb_s=64,
                     source="NVIDIA L40S datasheet: 48 GB GDDR6, 864 GB/s, 362 TFLOP/s dense BF16 (PCIe Gen4 x16 between cards)"),
    "L4": Hardware("L4", 24, 300, 121, interconnect_gb_s=64,
                   source="NVIDIA L4 datasheet: 24 GB GDDR6, 300 GB/s, 121 TFLOP/s dense BF16 (PCIe Gen4 x16 between cards)"),
}


class UnknownHardware(ValueError):
    pass


def get(name: str) -> Hardware:
    """Look up a preset by name, case-insensitive: 'h200', 'H200-SXM' and torch's
    'NVIDIA H100 80GB HBM3' all work."""
    words = re.split(r"[\s_-]+", name.strip().upper())
    for word in words:
        if word in PRESETS:
            return PRESETS[word]
    raise UnknownHardware(
        f"Unknown GPU type {name!r}. Known types: {', '.join(PRESETS)}. "
        "Use one of these names, or describe the machine with measure_this_machine()."
    )


def package_version(*dists: str, missing: str = "") -> str:
    """The installed version of the first of these distributions found (results record what they ran on)."""
    from importlib.metadata import PackageNotFoundError, version

    for d in dists:
        try:
            return version(d)
        except PackageNotFoundError:
            continue
    return missing


def cpu_name() -> str:
    """The CPU model string, as /proc/cpuinfo reports it."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def measure_this_machine(threads: int | None = None, seconds: float = 1.0) -> Hardware:
    """Measure read bandwidth and fp32 GEMM peak of this CPU with torch (a few seconds).

    Read bandwidth: sum over a 256 MB float32 tensor (far larger than any cache).
    GEMM peak: square-ish fp32 matmuls at M=256, the shape of a batched decode step.
    """
    import torch

    if threads:
        torch.set_num_threads(threads)
    n_threads = torch.get_num_threads()

    def best_rate(fn, work: float) -> float:
        fn()  # warm-up
        best, deadline = 0.0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            fn()
            best = max(best, work / (time.perf_counter() - t0))
        return best

    big = torch.ones(64 * 1024 * 1024, dtype=torch.float32)  # 256 MB
    bandwidth = best_rate(lambda: big.sum().item(), big.numel() * 4) / 1e9
    del big
    a = torch.randn(256, 2048)
    b = torch.randn(2048, 2048)
    gflops = best_rate(lambda: torch.mm(a, b), 2 * 256 * 2048 * 2048) / 1e9
    return Hardware(
        name=f"{cpu_name()} ({n_threads} threads)",
        memory_gb=_mem_total_gb(),
        bandwidth_gb_s=round(bandwidth, 2),
        peak_tflops=round(gflops / 1000, 4),
        dtype="float32",
        source=f"measured with torch {torch.__version__}: 256 MB sum, fp32 GEMM 256x2048x2048",
    )


def _mem_total_gb() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    return round(int(line.split()[1]) * 1024 / 1e9, 1)
    except OSError:
        pass
    return 0.0


_MEASURED: dict[int, Hardware] = {}


def this_machine(threads: int | None = None, refresh: bool = False) -> Hardware:
    """This CPU's roofline, measured once per process (a few seconds) and then reused.

    Not cached on disk: a roofline measured while the machine was busy would otherwise
    follow every later record. refresh=True measures again."""
    threads = threads or cpu_cores()
    if refresh or threads not in _MEASURED:
        _MEASURED[threads] = measure_this_machine(threads)
    return _MEASURED[threads]


def from_dict(d: dict) -> Hardware:
    return Hardware(**{k: d[k] for k in Hardware.__dataclass_fields__ if k in d})


def load_measured(path: str) -> Hardware:
    with open(path) as f:
        return from_dict(json.load(f))
