"""What the reviewer's example tests share."""


def assert_mentions(report, expected: dict, case: str) -> None:
    """Each knob's finding names every phrase the expected file lists for it."""
    for knob, phrases in (expected.get("mentions") or {}).items():
        finding = report.finding(knob)
        text = " ".join([finding.reason, finding.evidence, finding.fix, finding.setting])
        for phrase in phrases:
            assert phrase in text, f"{case}/{knob}: {phrase!r} not in {text!r}"
