"""The serving-config reviewer: Lesson 25's checklist as code.

Give it a serving config as the team keeps it (a `vllm serve` command line or launch
script, a Kubernetes manifest, production-stack or llm-d Helm values, a SkyPilot task, an
NVIDIA Dynamo vLLM worker, or the YAML `--config` takes) and the workload it claims to serve (load, lengths, SLOs, and the measurements the
team cites). For each knob it answers the lesson's question, "is this choice traced
back to the workload?", with a verdict, a one-sentence reason, the evidence, and a fix.

    >>> from servelab import review
    >>> report = review.review_files("data/configs/practice-1-batch-256.yaml",
    ...                              "data/configs/practice-1-batch-256-workload.yaml")
    >>> report.verdicts()["batching"]
    'unjustified'

From a shell (exit status 0 clean, 1 findings, 2 bad input):

    servelab review CONFIG --workload WORKLOAD.yaml [--gpu H100 --gpus-per-node 8] [--var NAME=VALUE] [--json]

CONFIG is vLLM's YAML, a `vllm serve ...` command line or launch script (SLURM job scripts
included), a Python script building vllm.LLM / AsyncEngineArgs / a Ray Serve LLMConfig, a
docker compose file, a SageMaker SM_VLLM_* environment, a systemd unit, a Kubernetes manifest,
or production-stack / llm-d Helm values (forms.FORMS_READ lists them). It is judged as the
vLLM it pins (versions.py), else 0.32.0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import hardware
from . import forms, versions, vllm_flags
from .arithmetic import Facts
from .checks import adaptive_schedule, run_checks
from .report import EXIT_BAD_INPUT, EXIT_CLEAN, EXIT_FINDINGS, KNOBS, VERDICTS, Finding, Report
from .schema import Doc, ReviewInputError, load_yaml
from .serving import ServingConfig, read_config
from .workload_spec import WorkloadSpec, read_workload

__all__ = [
    "review",
    "review_files",
    "Report",
    "Finding",
    "ReviewInputError",
    "KNOBS",
    "VERDICTS",
    "EXIT_CLEAN",
    "EXIT_FINDINGS",
    "EXIT_BAD_INPUT",
    "add_arguments",
    "run",
    "adaptive_schedule",
    "ServingConfig",
    "WorkloadSpec",
    "Facts",
]


def review_files(
    config_path: str | Path,
    workload_path: str | Path,
    *,
    select: str | None = None,
    deployment: dict | None = None,
    variables: dict[str, str] | None = None,
) -> Report:
    """Review the serving config in config_path against the workload in workload_path.

    The config may be vLLM's YAML, a `vllm serve` command line, a Kubernetes manifest or
    production-stack Helm values (see forms). select names the model or workload to review
    where the file holds several; deployment ({gpu, gpus-per-node, nodes}) fills in what it does not say;
    variables ({"TP_SIZE": "8"}) are the environment a shell script's $VARIABLES resolve from.
    """
    config_doc = forms.load(config_path, select=select, deployment=deployment, variables=variables)
    workload_doc = load_yaml(workload_path, "workload")
    return _review(config_doc, workload_doc)


def review(
    config: dict, workload: dict, *, config_name: str = "", base_dir: str | Path | None = None, workload_name: str = ""
) -> Report:
    """Review a config and a workload given as dicts (as YAML would load them).

    Relative paths inside them (deployment.model-config, records) are taken from base_dir.
    """
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    config_doc = Doc(name=config_name or "config", data=config, role="serving config", base_dir=base)
    workload_doc = Doc(name=workload_name or "workload", data=workload, role="workload", base_dir=base)
    return _review(config_doc, workload_doc)


def _review(config_doc: Doc, workload_doc: Doc) -> Report:
    cfg = read_config(config_doc)
    wl = read_workload(workload_doc)
    findings, facts = run_checks(cfg, wl)
    return Report(
        findings=findings,
        config_name=config_doc.name,
        workload_name=workload_doc.name,
        facts=facts.to_dict(),
        not_reviewed=list(cfg.not_reviewed),
        vllm_version=config_doc.vllm_version or vllm_flags.version(),
        vllm_version_source=config_doc.vllm_version_source or versions.default().source,
    )


# --- command line: `servelab review` ---------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `servelab review`."""
    parser.description = (
        "Review a vLLM serving config against the workload it serves: each knob is "
        "justified, unjustified (no evidence cited) or wrong (contradicted by arithmetic "
        "or a measurement)."
    )
    parser.epilog = (
        "exit status: 0 every knob justified, 1 a knob is wrong or unjustified, 2 the input could not be read"
    )
    parser.add_argument(
        "config",
        metavar="CONFIG",
        help="the serving config: vLLM's YAML (with a deployment block), a `vllm serve` command "
        "line or launch script (SLURM included), a Python script (vllm.LLM, AsyncEngineArgs, Ray Serve "
        "LLMConfig), docker compose, a SageMaker SM_VLLM_* environment, a systemd unit, a Kubernetes "
        "manifest, or production-stack / llm-d Helm values",
    )
    parser.add_argument(
        "--workload",
        required=True,
        metavar="WORKLOAD",
        help="the workload YAML: concurrency, lengths, SLOs, cited measurements",
    )
    parser.add_argument("--gpu", help="GPU type, where the config does not say (" + ", ".join(hardware.PRESETS) + ")")
    parser.add_argument("--gpus-per-node", type=int, metavar="N", help="GPUs per node, where the config does not say")
    parser.add_argument("--nodes", type=int, metavar="N", help="nodes one server spans, where the config does not say")
    parser.add_argument(
        "--select",
        metavar="NAME",
        help="the model (Helm modelSpec name) or workload (manifest name) to review, where the file holds several",
    )
    parser.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a shell variable the config's script uses but does not assign ($TP_SIZE), or "
        "VLLM_VERSION=0.10.0 to judge the config as that vLLM release; repeatable",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    """Run `servelab review`; returns the exit status."""
    try:
        given = {
            "gpu": getattr(args, "gpu", None),
            "gpus-per-node": getattr(args, "gpus_per_node", None),
            "nodes": getattr(args, "nodes", None),
        }
        variables = {}
        for item in getattr(args, "var", None) or []:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ReviewInputError(f"--var {item!r}: write it as NAME=VALUE (--var TP_SIZE=8)")
            variables[name.strip()] = value
        report = review_files(
            args.config,
            args.workload,
            select=getattr(args, "select", None),
            deployment={k: v for k, v in given.items() if v is not None},
            variables=variables,
        )
    except ReviewInputError as exc:
        print(f"servelab review: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(report.to_json())
    else:
        from rich.console import Console

        Console().print(report)
    return report.exit_code
