"""The reviewer's vLLM defaults against the installed vLLM's own EngineArgs.get_batch_defaults."""

from __future__ import annotations

import pytest

from servelab import hardware
from servelab.hardware import Hardware
from servelab.review import defaults

CPU = Hardware("Intel Xeon CPU (2 threads)", 16.0, 20, 0.1, dtype="float32")


class _Platform:
    """What get_batch_defaults asks of vLLM's current platform, for one device."""

    def __init__(self, hw: Hardware):
        self.hw = hw

    def get_device_total_memory(self, device_id: int = 0) -> int:
        return round(self.hw.memory_gb * 1e9)

    def get_device_name(self, device_id: int = 0) -> str:
        return f"NVIDIA {self.hw.name}"

    def is_tpu(self) -> bool:
        return False

    def is_cpu(self) -> bool:
        return defaults.is_cpu(self.hw)


@pytest.fixture(scope="module")
def vllm_batch_defaults():
    arg_utils = pytest.importorskip("vllm.engine.arg_utils")
    from vllm.usage.usage_lib import UsageContext

    def compute(hw: Hardware, world_size: int) -> tuple[int, int]:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(arg_utils, "current_platform", _Platform(hw))
            tokens, seqs = arg_utils.EngineArgs.get_batch_defaults(world_size)
        server = UsageContext.OPENAI_API_SERVER
        return seqs[server], tokens[server]

    return compute


@pytest.mark.parametrize("name", sorted(hardware.PRESETS))
@pytest.mark.parametrize("world_size", [1, 8])
def test_gpu_defaults_match_vllm(vllm_batch_defaults, name, world_size):
    hw = hardware.PRESETS[name]
    ours = defaults.batch_defaults(hw, world_size)
    assert (ours.max_num_seqs, ours.max_num_batched_tokens) == vllm_batch_defaults(hw, world_size)


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_cpu_defaults_match_vllm(vllm_batch_defaults, world_size):
    ours = defaults.batch_defaults(CPU, world_size)
    assert (ours.max_num_seqs, ours.max_num_batched_tokens) == vllm_batch_defaults(CPU, world_size)


@pytest.mark.unit
def test_worked_defaults():
    # H100: 81,559 MiB = 79.6 GiB, at least 70 and not an A100; H200 140.4 GiB, under 160.
    assert defaults.batch_defaults(hardware.get("H100")).max_num_seqs == 1024
    assert defaults.batch_defaults(hardware.get("H200")).max_num_batched_tokens == 8192
    # B200: 183,359 MiB = 179.1 GiB.
    assert defaults.batch_defaults(hardware.get("B200")).max_num_batched_tokens == 16384
    # A100 80GB: 80 GiB but excluded by name (vLLM PR #17885); L4: 22.5 GiB.
    assert defaults.batch_defaults(hardware.get("A100")).max_num_seqs == 256
    assert defaults.batch_defaults(hardware.get("L4")).max_num_batched_tokens == 2048
    assert defaults.batch_defaults(CPU, 2).max_num_seqs == 256


@pytest.mark.unit
def test_driver_reported_capacities():
    assert hardware.get("H200").memory_gb == 150.75  # 143,771 MiB
    assert hardware.get("H100").memory_gb == 85.52  # 81,559 MiB
    assert hardware.get("NVIDIA A100-SXM4-40GB").name == "A100-40GB"
    assert hardware.get("NVIDIA A100-SXM4-80GB").name == "A100"


@pytest.fixture(scope="module")
def vllm_serve_defaults():
    """The installed vLLM's _set_default_max_num_seqs_and_batched_tokens_args run on a stand-in for
    EngineArgs (only the fields it reads), for `vllm serve`'s usage context."""
    arg_utils = pytest.importorskip("vllm.engine.arg_utils")
    from types import SimpleNamespace

    from vllm.usage.usage_lib import UsageContext

    def compute(
        hw, world_size, *, seqs=None, tokens=None, max_model_len=8192, chunked=True, mode="balanced", batched_dp=False
    ):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(arg_utils, "current_platform", _Platform(hw))
            args = SimpleNamespace(
                pipeline_parallel_size=1,
                tensor_parallel_size=world_size,
                max_num_seqs=seqs,
                max_num_batched_tokens=tokens,
                performance_mode=mode,
                enable_chunked_prefill=chunked,
                get_batch_defaults=arg_utils.EngineArgs.get_batch_defaults,
            )
            model = SimpleNamespace(max_model_len=max_model_len, is_multimodal_model=False, model="m")
            arg_utils.EngineArgs._set_default_max_num_seqs_and_batched_tokens_args(
                args, UsageContext.OPENAI_API_SERVER, model, SimpleNamespace(use_batched_dp_moe=batched_dp)
            )
        return args.max_num_seqs, args.max_num_batched_tokens

    return compute


@pytest.mark.parametrize("name", ["H100", "A100", "B200", "L4"])
@pytest.mark.parametrize(
    "case",
    [
        {},
        {"mode": "throughput"},
        {"chunked": False, "max_model_len": 32768},
        {"batched_dp": True},
        {"max_model_len": 16, "mode": "throughput"},
        {"seqs": 64, "mode": "throughput"},
        {"tokens": 100},
    ],
)
def test_serve_defaults_match_vllm(vllm_serve_defaults, name, case):
    hw = hardware.PRESETS[name]
    ours = defaults.serve_defaults(
        hw,
        2,
        max_num_seqs=case.get("seqs"),
        max_num_batched_tokens=case.get("tokens"),
        max_model_len=case.get("max_model_len", 8192),
        chunked_prefill=case.get("chunked", True),
        performance_mode=case.get("mode", "balanced"),
        batched_dp_moe=case.get("batched_dp", False),
    )
    assert ours[:2] == vllm_serve_defaults(hw, 2, **case)


@pytest.mark.unit
def test_worked_serve_defaults():
    """H100: 1,024 sequences and 8,192 tokens; throughput mode doubles both; chunked prefill off raises the
    token default to max-model-len 32,768; DP + EP on deepep_low_latency takes 256 tokens, and max-num-seqs
    then falls to 256 (at most the token budget)."""
    h100 = hardware.get("H100")
    assert defaults.serve_defaults(
        h100, 1, max_num_seqs=None, max_num_batched_tokens=None, max_model_len=8192, performance_mode="throughput"
    )[:2] == (2048, 16384)
    assert defaults.serve_defaults(
        h100, 1, max_num_seqs=None, max_num_batched_tokens=None, max_model_len=32768, chunked_prefill=False
    )[:2] == (1024, 32768)
    assert defaults.serve_defaults(
        h100, 1, max_num_seqs=None, max_num_batched_tokens=None, max_model_len=8192, batched_dp_moe=True
    )[:2] == (256, 256)
