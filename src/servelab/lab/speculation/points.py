"""What the spec-decode lab draws: measured points (recorded file + results store) and simulated curves.

Nothing here touches a widget or an engine. A chart setting (backend, method,
k, workload, output length) picks a series of measured points out of the
records, and a simulator turns the same setting into a curve. Both are cheap
to ask for again on every slider move: records are indexed once, simulators
are built once per backend and kept until new points arrive.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from ... import paths, simulate
from ...cpu_usage import is_contended
from ...measurement import Measurement
from ...results import ResultsStore

# --- where recorded measurements live ------------------------------------------------
RECORDED = Path("measurements") / "flip-cpu.jsonl"  # the full sweep, recorded on the 2-core CI machine
# the lab-cpu review example's records (each says how it was taken), for a data folder without the sweep
STAND_IN = Path("configs") / "lab-cpu" / "records.jsonl"

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # the batch slider: powers of two
OUTPUT_LENS = (16, 32, 64, 128)
# The context control: tokens each sequence attends over on the simulated GPUs (prompt + answer so far).
# Each sequence reads its own KV cache every step, so the context moves the crossover (servelab.simulate).
CONTEXTS = (256, 512, 1024, 2048, 4096, 8192)
CURVE_BATCHES = tuple(round(2 ** (i / 4), 4) for i in range(0, 8 * 4 + 1))  # 1 to 256, four per doubling
METHODS = {  # the method control: label -> Measurement.method
    "off": "none",
    "n-gram": "ngram",
    "draft model": "draft_model",
    "load-adaptive": "adaptive",
    "routed": "routed",
}
METHOD_LABELS = {v: k for k, v in METHODS.items()}
WORKLOADS = {"copy-heavy": "copy", "open-ended": "open"}
GPU_BACKENDS = ("H200", "H100", "A100")
SIMULATED_MODEL = "Llama-3.1-8B"  # what the simulated GPUs serve: the lesson's fleet, not the CPU's toy model
SIMULATED_DRAFT = "meta-llama/Llama-3.2-1B-Instruct"  # the simulated GPUs' draft model: the lesson's quiz's draft
# the verify-step benchmark, with hardware.probe_cpu in the engine's dtype
RIDGE_RESULT = "bench/results/ridge-cpu.json"


def recorded_path() -> Path:
    """The recorded sweep (data/measurements/flip-cpu.jsonl), or the lab-cpu example's records without it."""
    recorded = paths.data_dir() / RECORDED
    if recorded.exists():
        return recorded
    return paths.data_dir() / STAND_IN


# --- one chart setting ------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """Everything the controls set. Only method, k, model, draft and KV cache size change which engine runs."""

    batch_size: int = 8
    num_speculative_tokens: int = 4  # k
    method: str = "ngram"  # none | ngram | draft_model | adaptive | routed
    workload: str = "copy"
    output_len: int = 64
    backend: str = "local"  # local | remote | H200 | H100 | A100
    remote_off_url: str = ""
    remote_on_url: str = ""
    model: str = ""  # "" = the bundled SmolLM2-135M-Instruct (CPU); a folder or hub id on a GPU
    draft_model: str = ""  # "" = the bundled 6-layer draft
    kv_cache_gb: float = 2.0
    context_len: int = simulate.CONTEXT_LEN  # the simulated GPUs' context; this machine's comes from its records

    @property
    def simulated(self) -> bool:
        return self.backend in GPU_BACKENDS

    @property
    def k(self) -> int:
        return self.num_speculative_tokens

    def series_methods(self) -> list[str]:
        """The curves this setting draws: the baseline, and the chosen method unless it is off."""
        return ["none"] if self.method == "none" else ["none", self.method]


def class_defaults(environ=None) -> dict:
    """Settings a class's hub hands every student: its two shared servers, and the remote backend chosen.

    The hub sets SERVELAB_REMOTE_OFF_URL and SERVELAB_REMOTE_ON_URL (see class/jupyterhub_config.py).
    """
    env = os.environ if environ is None else environ
    off, on = env.get("SERVELAB_REMOTE_OFF_URL", "").strip(), env.get("SERVELAB_REMOTE_ON_URL", "").strip()
    if not off:
        return {}
    return {"backend": "remote", "remote_off_url": off, "remote_on_url": on}


def series_label(method: str, k: int) -> str:
    if method == "none":
        return "no speculation"
    return f"{METHOD_LABELS.get(method, method)} k={k}"


# --- measured points ----------------------------------------------------------------------
def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _source_of(record: dict) -> str:
    if record.get("backend") != "remote":
        return str(record.get("backend", "local"))
    config = record.get("engine_config") or {}
    routed_via = ((config.get("routing") or {}).get("speculating") or {}).get("url")
    return "remote:" + str(routed_via or config.get("url", ""))


class PointBook:
    """Measured records indexed by (source, method, k, workload, output_len) -> {batch: record}.

    The recorded file's records were taken on the course's machine: they are indexed
    under the source "recorded", drawn as such, and never count as a point measured
    here (so the first Measure measures this machine). The results store's records
    are the learner's own ("local" for this machine's engine). A record whose
    workload is "unrecorded" (the lab-cpu example's records) is shown for every workload.
    A contended point (servelab.cpu_usage) stays in the book, drawn apart and left out
    of the fit, until the learner drops it (drop_contended).
    """

    def __init__(self, recorded: Path | None = None, store: ResultsStore | None = None, read_store: bool = True):
        self.recorded = Path(recorded) if recorded is not None else recorded_path()
        self.store = store if store is not None else ResultsStore()
        self._lock = threading.RLock()
        self._index: dict[tuple, dict[int, dict]] = {}
        self.version = 0  # grows with every point added: simulators calibrated on older points are stale
        self.count = 0
        self.recorded_count = 0
        self.dropped: list[dict] = []  # contended points the learner dropped (still in the results store)
        if self.recorded.exists():
            for r in ResultsStore(self.recorded).read():
                self.add(r, source="recorded")
            self.recorded_count = self.count
        if read_store:
            for r in self.store.read():
                self.add(r, source="store")

    def add(self, record: Measurement | dict, source: str = "measured") -> None:
        r = record.to_dict() if isinstance(record, Measurement) else dict(record)
        if r.get("method") not in METHOD_LABELS or not r.get("batch_size") or not _finite(r.get("output_tok_s")):
            return  # not a Measurement this lab draws (a comparison, a damaged line)
        r.setdefault("_source", source)
        k = int(r.get("num_speculative_tokens") or 0) if r["method"] != "none" else 0
        schedule = _schedule(r)
        if r["method"] == "adaptive" and schedule:
            k = max(int(e[2]) for e in schedule)  # a schedule that never speculates is a k=0 run, not a k=4 one
        origin = "recorded" if r["_source"] == "recorded" else _source_of(r)
        key = (origin, r["method"], k, r.get("workload", ""), int(r.get("output_len") or 0))
        with self._lock:
            self._index.setdefault(key, {})[int(r["batch_size"])] = r
            self.count += 1
            self.version += 1

    def points(self, settings: Settings, method: str, source: str | None = None) -> dict[int, dict]:
        """{batch: record} for one curve of a setting (newest record per batch), measured by the learner."""
        if settings.simulated:
            return {}
        if source is None:
            source = "remote:" + _remote_url(settings, method) if settings.backend == "remote" else "local"
        k = 0 if method == "none" else settings.k
        out: dict[int, dict] = {}
        with self._lock:
            for workload in ("unrecorded", settings.workload):  # a named workload wins over an unnamed one
                out.update(self._index.get((source, method, k, workload, settings.output_len), {}))
        return dict(sorted(out.items()))

    def recorded_points(self, settings: Settings, method: str) -> dict[int, dict]:
        """{batch: record} recorded on the course's machine for this curve (this machine's backend only)."""
        return self.points(settings, method, "recorded") if settings.backend == "local" else {}

    def recorded_machine(self) -> str:
        """The CPU the recorded file was measured on, as its records name it."""
        with self._lock:
            names = sorted(
                {
                    str(r.get("hardware") or "")
                    for key, pts in self._index.items()
                    if key[0] == "recorded"
                    for r in pts.values()
                }
                - {""}
            )
        return ", ".join(names) or "unknown CPU"

    def has(self, settings: Settings, method: str, batch_size: int) -> bool:
        """Whether the learner measured this point (a recorded one from the course's machine does not count)."""
        return batch_size in self.points(settings, method)

    def local_records(self, include_contended: bool = False) -> list[dict]:
        """This machine's own records; contended ones only when asked (they stay out of the fit)."""
        with self._lock:
            return [
                r
                for key, pts in self._index.items()
                if key[0] == "local"
                for r in pts.values()
                if include_contended or not is_contended(r)
            ]

    def recorded_records(self) -> list[dict]:
        with self._lock:
            return [r for key, pts in self._index.items() if key[0] == "recorded" for r in pts.values()]

    def contended(self) -> list[dict]:
        """The learner's points measured while other work held the cores (servelab.cpu_usage)."""
        with self._lock:
            return [
                r for key, pts in self._index.items() if key[0] != "recorded" for r in pts.values() if is_contended(r)
            ]

    def drop_contended(self) -> int:
        """Take every contended point off the charts (the results store keeps them); Measure runs them again."""
        with self._lock:
            n = 0
            for pts in self._index.values():
                for b in [b for b, r in pts.items() if r.get("_source") != "recorded" and is_contended(r)]:
                    self.dropped.append(pts.pop(b))
                    n += 1
            if n:
                self.version += 1
            return n

    def all_records(self) -> list[dict]:
        with self._lock:
            return [r for pts in self._index.values() for r in pts.values()]


def _schedule(record: dict) -> list:
    config = record.get("engine_config") or {}
    return list(config.get("num_speculative_tokens_per_batch_size") or [])


def _remote_url(settings: Settings, method: str) -> str:
    from ...remote import RemoteError, normalize_url

    url = settings.remote_off_url if method == "none" else settings.remote_on_url
    try:
        return normalize_url(url)
    except RemoteError:
        return url


# --- simulated curves -----------------------------------------------------------------------
@dataclass(frozen=True)
class Curve:
    """A simulated curve over CURVE_BATCHES, the same metrics a record carries."""

    batch: tuple[float, ...]
    output_tok_s: tuple[float, ...]
    tpot_ms: tuple[float, ...]
    acceptance_rate: tuple[float | None, ...]


class Simulators:
    """One simulator per backend: GPU presets as published, this CPU calibrated on the measured points."""

    def __init__(self, book: PointBook):
        self.book = book
        self._lock = threading.RLock()
        self._cache: dict[str, tuple[int, simulate.Simulator | None, str]] = {}

    def get(self, backend: str, refresh: bool = False) -> tuple[simulate.Simulator | None, str]:
        """(simulator, what it is) for a backend; None when there is nothing to simulate with."""
        with self._lock:
            version = self.book.version if backend == "local" else 0
            cached = self._cache.get(backend)
            if cached and (cached[0] == version or not refresh):
                return cached[1], cached[2]
            sim, about = self._build(backend)
            self._cache[backend] = (version, sim, about)
            return sim, about

    def stale(self, backend: str) -> bool:
        cached = self._cache.get(backend)
        return backend == "local" and cached is not None and cached[0] != self.book.version

    def _build(self, backend: str) -> tuple[simulate.Simulator | None, str]:
        from ... import hardware, modelspec

        if backend in GPU_BACKENDS:
            target = modelspec.preset(SIMULATED_MODEL)
            draft = modelspec.from_catalogue(SIMULATED_DRAFT)
            sim = simulate.Simulator(target, hardware.get(backend), draft=draft)
            return sim, (
                f"{SIMULATED_MODEL} in bf16 on {backend}, a {draft.name} draft model ({hardware.get(backend).source})"
            )
        if backend != "local":
            return None, "no simulator for a remote server"
        records = [r for r in self.book.local_records() if r.get("method") in simulate.FIT_METHODS]
        where = "measured points (contended ones left out)" if self.book.contended() else "measured points"
        if not records:  # nothing of the learner's yet: the course machine's recording, said as such
            records = [r for r in self.book.recorded_records() if r.get("method") in simulate.FIT_METHODS]
            where = f"points recorded on the course's machine ({self.book.recorded_machine()})"
        if not records:
            return None, "no measured points to calibrate the CPU simulator on"
        try:
            sim = _engine_dtype_simulator(records) or simulate.for_record(records[0], records)
            if sim.draft is None:
                sim = replace(sim, draft=simulate.draft_for("SmolLM2-135M-Instruct-draft-6L", sim.model))
        except (ValueError, KeyError, ZeroDivisionError, ImportError) as exc:
            return None, f"the CPU simulator could not be calibrated ({exc})"
        return sim, f"roofline model of {sim.hardware.name}, calibrated on {len(records)} {where}"


def _engine_dtype_simulator(records: list[dict]) -> simulate.Simulator | None:
    """The CPU simulator on the roofline of the dtype the engine ran (engine_roofline), calibrated on the records."""
    hw = engine_roofline(records)
    if hw is None:
        return None
    first = records[0]
    model = simulate.model_for(first.get("model", ""))
    draft = simulate.draft_for(first.get("draft_model", ""), model)
    context = simulate.context_from_records(records)
    return simulate.calibrate(records, model, hw, dtype=hw.dtype, draft=draft, context_len=context)


def engine_roofline(records: list[dict]):
    """This CPU's roofline in the dtype the engine ran, where the records' own roofline is another dtype.

    A record carries the roofline its run measured (hardware.this_machine, the one probe: hardware.probe_cpu,
    in the engine's dtype); records from before it followed the engine's dtype carry a float32 one, while
    vLLM-cpu ran the lab's model in bfloat16. For those, where bench/results/ridge-cpu.json recorded the same
    probe in the engine's dtype on the same CPU (its GEMM peak and read bandwidth), the dashed curves use it;
    elsewhere None, and the records' own roofline stands.
    """
    import json

    first = records[0]
    roofline = first.get("roofline") or (first.get("engine_config") or {}).get("roofline") or {}
    engine_dtype = simulate._dtype(first.get("dtype"), simulate.DESIGN_CPU)
    path = paths.REPO_DIR / RIDGE_RESULT
    if not roofline or roofline.get("dtype") == engine_dtype or not paths.IN_CHECKOUT or not path.is_file():
        return None
    try:
        ridge = json.loads(path.read_text())
        probe = ridge["roofline_probe"]
        if probe.get("dtype") != engine_dtype or ridge["machine"]["cpu"] != first.get("hardware"):
            return None
        return replace(
            simulate.hardware_for(first),
            bandwidth_gb_s=float(probe["read_gb_s"]),
            peak_tflops=float(probe["gemm_tflops"]),
            dtype=engine_dtype,
            source=f"{RIDGE_RESULT}: {engine_dtype} GEMM {probe['gemm_tflops'] * 1000:.0f} GFLOP/s, "
            f"reads {probe['read_gb_s']:.1f} GB/s, recorded on {ridge['machine']['cpu']}",
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def acceptance_for(book: PointBook, settings: Settings, method: str) -> tuple[float, float | None, str]:
    """(alpha, n-gram match rate, where they came from) for a simulated curve of this setting.

    Acceptance belongs to the workload and the drafter, not to the hardware, so
    measured records of the same workload inform every backend's curve.
    """
    drafter = "ngram" if method in ("ngram", "adaptive", "routed") else method
    candidates = []
    for r in book.all_records():
        if (
            r.get("method") == drafter
            and int(r.get("num_speculative_tokens") or 0) > 0
            and r.get("workload") in (settings.workload, "unrecorded")
            and r.get("backend") != "simulated"
        ):
            if r.get("num_draft_tokens") or r.get("acceptance_rate") is not None:
                candidates.append(r)
    if not candidates:
        return simulate.ACCEPTANCE_RATE, None, f"assumed acceptance {simulate.ACCEPTANCE_RATE:g} (none measured)"
    alphas = sorted(simulate.acceptance_from_record(r) for r in candidates)
    rates = sorted(m for m in (simulate.match_rate_from_record(r) for r in candidates) if m is not None)
    alpha = alphas[len(alphas) // 2]
    match = rates[len(rates) // 2] if rates else None
    return alpha, match, f"acceptance {alpha:.2f} per draft token, from {len(candidates)} measured points"


def adaptive_schedule(k: int, threshold: int) -> tuple[tuple[int, int, int], ...]:
    """vLLM's num_speculative_tokens_per_batch_size: k up to the threshold batch, 0 above it."""
    top = BATCHES[-1]  # the largest batch the lab's engines form (max_num_seqs)
    if threshold < 1:
        return ((1, top, 0),)
    if threshold >= top:
        return ((1, top, k),)
    return ((1, threshold, k), (threshold + 1, top, 0))


def curve(
    sim: simulate.Simulator,
    method: str,
    k: int,
    alpha: float,
    match: float | None,
    schedule=None,
    prompt_len: float | None = None,
    output_len: int = 64,
    k0_overhead: bool = False,
) -> Curve:
    """A simulated curve for one method: routed is the better of none and n-gram at each batch.

    It ends at the largest batch whose KV caches fit the simulated memory (Simulator.fits).
    """
    if match is not None:
        sim = replace(sim, ngram_match_rate=match)
    if method == "adaptive":
        sim = replace(sim, adaptive_schedule=schedule, spec_overhead_at_k0=k0_overhead)
    xs, tok, tpot, acc = [], [], [], []
    for b in CURVE_BATCHES:
        if not sim.fits(b, "ngram" if method == "routed" else method):
            continue  # its KV caches do not fit the memory: no operating point, so no point on the curve
        if method == "routed":
            options = [
                _point(sim, b, 0, "none", alpha, prompt_len, output_len),
                _point(sim, b, k, "ngram", alpha, prompt_len, output_len),
            ]
            best = max(options, key=lambda p: p[0])
        else:
            sim_method = "none" if method == "none" else method
            best = _point(sim, b, 0 if method == "none" else k, sim_method, alpha, prompt_len, output_len)
        xs.append(b)
        tok.append(best[0])
        tpot.append(best[1])
        acc.append(best[2])
    return Curve(tuple(xs), tuple(tok), tuple(tpot), tuple(acc))


def _point(sim, b, k, method, alpha, prompt_len, output_len):
    step = sim.step(b, k, method, alpha)
    if prompt_len:
        tok_s = sim.batch_tok_s(b, prompt_len, output_len, k, method, alpha)
    else:
        tok_s = step.output_tok_s
    used_k = step.num_speculative_tokens
    rate = (simulate.expected_tokens_per_step(alpha, used_k) - 1) / used_k if used_k else None
    return tok_s, step.tpot_ms, rate


def prompt_len_for(book: PointBook, settings: Settings) -> float | None:
    """Mean prompt tokens per request on this workload, from records that carry it (None if none do)."""
    lens = sorted(
        r["prompt_tokens"] / r["num_requests"]
        for r in book.all_records()
        if r.get("workload") == settings.workload and r.get("prompt_tokens") and r.get("num_requests")
    )
    return lens[len(lens) // 2] if lens else None
