"""What a review hands back: one Finding per knob, shown as a table, JSON, or HTML."""

from __future__ import annotations

import html
import io
import json
from dataclasses import asdict, dataclass, field

KNOBS = (
    "batching",
    "quantization",
    "dtype",
    "parallelism",
    "speculative_decoding",
    "prefix_caching",
    "max_model_len",
    "gpu_memory_utilization",
    "enforce_eager",
    "chunked_prefill",
    "lora",
    "benchmark_settings",
    "removed_flags",
    "flags_too_new",
    "unapplied_settings",
)
VERDICTS = ("justified", "unjustified", "wrong")

# Exit status of `servelab review`, for CI.
EXIT_CLEAN = 0  # every knob reviewed is justified
EXIT_FINDINGS = 1  # at least one knob is wrong or unjustified
EXIT_BAD_INPUT = 2  # the config or workload could not be read (the message says where)

_STYLE = {"justified": "green", "unjustified": "yellow", "wrong": "bold red"}
_HTML_COLOUR = {"justified": "#1a7f37", "unjustified": "#9a6700", "wrong": "#cf222e"}


@dataclass(frozen=True)
class Finding:
    """One knob's verdict, the reason in one sentence, what it rests on, and what to do."""

    knob: str  # one of KNOBS
    verdict: str  # justified | unjustified | wrong
    reason: str
    evidence: str  # the arithmetic and measurements it rests on, or the one missing
    fix: str
    setting: str = ""  # the knob as the config sets it, with its line

    def __post_init__(self):
        if self.knob not in KNOBS:
            raise ValueError(f"unknown knob {self.knob!r}; knobs are {', '.join(KNOBS)}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}; verdicts are {', '.join(VERDICTS)}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Report:
    """A reviewed config: findings in checklist order, and the numbers they used."""

    findings: list[Finding]
    config_name: str = ""
    workload_name: str = ""
    facts: dict = field(default_factory=dict)
    not_reviewed: list[str] = field(default_factory=list)  # flags vLLM accepts that no check weighs
    vllm_version: str = ""  # the vLLM release the config was judged as
    vllm_version_source: str = ""  # what said so (an image tag, a pip pin, --var), or why the default

    def verdicts(self) -> dict[str, str]:
        return {f.knob: f.verdict for f in self.findings}

    def finding(self, knob: str) -> Finding:
        for f in self.findings:
            if f.knob == knob:
                return f
        raise KeyError(f"no finding for {knob!r}; reviewed: {', '.join(self.verdicts())}")

    @property
    def exit_code(self) -> int:
        return EXIT_FINDINGS if any(f.verdict != "justified" for f in self.findings) else EXIT_CLEAN

    def counts(self) -> dict[str, int]:
        return {v: sum(f.verdict == v for f in self.findings) for v in VERDICTS}

    def to_dict(self) -> dict:
        return {
            "config": self.config_name,
            "workload": self.workload_name,
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "verdicts": self.verdicts(),
            "findings": [f.to_dict() for f in self.findings],
            "not_reviewed": list(self.not_reviewed),
            "vllm_version": self.vllm_version,
            "vllm_version_source": self.vllm_version_source,
            "facts": self.facts,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def headline(self) -> str:
        c, facts = self.counts(), self.facts
        what = ""
        if facts:
            what = (
                f" ({facts.get('model')}, {facts.get('weight_dtype')} weights, "
                f"{facts.get('gpus_used')} of {facts.get('gpus_available')} {facts.get('hardware')})"
            )
        judged = f", judged as vLLM {self.vllm_version}" if self.vllm_version else ""
        # the counts lead, so a long path that wraps the line never splits them
        return (
            f"{c['wrong']} wrong, {c['unjustified']} unjustified, {c['justified']} justified: "
            f"review of {self.config_name or 'config'} against {self.workload_name or 'workload'}{what}{judged}"
        )

    def __rich__(self):
        from rich.console import Group, RenderableType
        from rich.table import Table
        from rich.text import Text

        table = Table(show_lines=True, expand=True)
        table.add_column("knob", no_wrap=True, style="bold")
        table.add_column("verdict", no_wrap=True)
        table.add_column("finding", ratio=1)
        for f in self.findings:
            body = Text()
            body.append(f.reason)
            if f.setting:
                body.append("\nsetting: ", style="dim").append(f.setting)
            body.append("\nevidence: ", style="dim").append(f.evidence)
            body.append("\nfix: ", style="dim").append(f.fix)
            table.add_row(f.knob, Text(f.verdict, style=_STYLE[f.verdict]), body)
        status = "clean" if self.exit_code == EXIT_CLEAN else "knobs to fix or justify"
        parts: list[RenderableType] = [Text(self.headline(), style="bold"), table]
        if self.vllm_version_source:
            parts.insert(1, Text(f"vLLM {self.vllm_version}: {self.vllm_version_source}", style="dim"))
        if self.not_reviewed:
            parts.append(
                Text(
                    "not reviewed (vLLM accepts them; no check weighs them): " + ", ".join(self.not_reviewed),
                    style="dim",
                )
            )
        parts.append(Text(f"exit status {self.exit_code}: {status}", style="dim"))
        return Group(*parts)

    def __str__(self) -> str:
        from rich.console import Console

        console = Console(width=120, record=True, file=io.StringIO(), color_system=None)
        console.print(self)
        return console.export_text()

    def _repr_html_(self) -> str:
        e = html.escape
        rows = []
        for f in self.findings:
            colour = _HTML_COLOUR[f.verdict]
            rows.append(
                "<tr>"
                f"<td style='text-align:left;vertical-align:top'><code>{e(f.knob)}</code></td>"
                f"<td style='text-align:left;vertical-align:top;color:{colour};font-weight:bold'>{e(f.verdict)}</td>"
                f"<td style='text-align:left;vertical-align:top'>{e(f.reason)}"
                + (f"<br><small><b>setting</b>: {e(f.setting)}</small>" if f.setting else "")
                + f"<br><small><b>evidence</b>: {e(f.evidence)}</small>"
                f"<br><small><b>fix</b>: {e(f.fix)}</small></td>"
                "</tr>"
            )
        return (
            f"<div class='servelab-review'><p><b>{e(self.headline())}</b></p>"
            "<table><thead><tr><th style='text-align:left'>knob</th><th style='text-align:left'>verdict</th>"
            "<th style='text-align:left'>finding</th></tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table>"
            + (f"<p><small>not reviewed: {e(', '.join(self.not_reviewed))}</small></p>" if self.not_reviewed else "")
            + "</div>"
        )
