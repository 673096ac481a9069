"""How numbers and measurements read in a finding: '1,200', '16.1 GB', 'p99 TPOT 42 ms at batch 8'."""

from __future__ import annotations


def describe_value(metric: str, value: float) -> str:
    v = fmt(value)
    return {
        "ttft_ms_p99": f"p99 TTFT {v} ms",
        "ttft_ms_p50": f"median TTFT {v} ms",
        "tpot_ms_p99": f"p99 TPOT {v} ms",
        "tpot_ms_p50": f"median TPOT {v} ms",
        "output_tok_s": f"{v} output tok/s",
        "request_throughput": f"{v} requests/s",
        "accuracy": f"accuracy {v}%",
        "accuracy_drop": f"an accuracy drop of {v} points",
    }[metric]


def describe_setting(setting: dict) -> str:
    if not setting:
        return "an unstated setting"
    parts = []
    for key, value in setting.items():
        if key == "speculative":
            parts.append(f"speculative decoding {'on' if value else 'off'}")
        elif key == "enable-prefix-caching":
            parts.append(f"prefix caching {'on' if value else 'off'}")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            parts.append(f"{key} {fmt(value)}")
        else:
            parts.append(f"{key} {value}")
    return ", ".join(parts)


def fmt(value: float) -> str:
    """1200 -> '1,200', 0.5 -> '0.5', 3.14159 -> '3.14'."""
    if isinstance(value, bool):
        return str(value).lower()
    if float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) < 1:
        return f"{value:.3g}"
    return f"{value:,.2f}".rstrip("0").rstrip(".") if abs(value) < 100 else f"{value:,.0f}"


def gb(value: float) -> str:
    """Gigabytes for a sentence: '16.1 GB', '0.05 GB'."""
    return f"{value:.2g} GB" if abs(value) < 1 else f"{value:,.1f} GB"
