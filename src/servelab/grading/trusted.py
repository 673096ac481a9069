"""The grader's side of the boundary: nbgrader preprocessors that run in nbgrader's own process.

`nbgrader autograde` (configured in grading/nbgrader_config.py) runs them around
the execution, which happens in the sandbox (sandbox.py), never here:

- `RestoreCells` (sanitizing): every nbgrader cell is put back as the gradebook
  holds it: test and other locked cells whole, answer cells' metadata; deleted
  ones are added back, unknown or duplicated graded cells lose their nbgrader
  metadata and run as plain cells. Each change is a flag for a person.
- `SandboxedExecute` (replaces nbgrader's Execute): runs the notebook in the
  sandbox and copies back each executed cell's outputs and the captured answers.
- `ScoreAnswers`: for each test cell, the checker named in the assignment's key
  file (grading/keys/<assignment>.py, instructor-only, never in a notebook a
  kernel runs) compares the captured answer with the key. The test cell's
  outputs become the checker's feedback and its points, which nbgrader's
  SaveAutoGrades then writes to the gradebook. Nothing the kernel printed counts.
  Where the course runs variants (`ScoreAnswers.variants`, on in a class `servelab class up` lays out,
  off by default), a part of a question the lesson asks each student with their own numbers
  (servelab.variants.lesson.LESSON_QUESTIONS: the warm-ups, the numeric fields of practice 1 and 4) is
  checked against the variant of nbgrader's student of the hand-in (servelab.variants.grading.check;
  a practice dict's knob and verdict by the fixed key), never a name the notebook gives; an answer that fits
  a classmate's variant instead is a flag for a person, and their names stay out of the feedback.

Each notebook's flags, status and per-test feedback go to a report file,
<report_dir>/<assignment>/<student>/<notebook>.json, which the pipeline reads.
"""

from __future__ import annotations

import copy
import json
import runpy
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from nbformat.v4 import new_output
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Integer, List, Unicode

from servelab.grading import capture, checkers, sandbox
from servelab.grading.console import printable
from servelab.paths import REPO_DIR

KEYS_DIR = REPO_DIR / "grading" / "keys"
REPORT_DIR = "servelab-reports"  # relative to the course directory
REPORT_ANSWER_CHARS = 300  # of each captured answer kept in the report: enough for the class report's example
# Errors in a cell that mean the submission ran into one of the sandbox's limits.
LIMIT_ERRORS = {
    "CellTimeoutError": "ran past the time limit for one cell",
    "MemoryError": "ran out of memory",
    "BlockingIOError": "could not start more processes",
    "RecursionError": "recursed too deeply",
}
LIMIT_MESSAGES = {
    "File too large": "wrote a file past the size limit",
    "Too many open files": "opened too many files",
    "No space left": "filled the sandbox's disk",
    "Resource temporarily unavailable": "could not start more processes",
    "Cannot allocate memory": "ran out of memory",
}


class Unreadable(ValueError):
    """A captured answer the grader does not read; the message says why."""


def read_answer(
    text: str, cap: int = capture.MAX_ANSWER_BYTES, max_depth: int = capture.MAX_DEPTH, constants: bool = False
):
    """A captured answer's JSON, read with bounds: its size, its nesting depth, and the JSON grammar alone.

    The text comes from the sandbox, where submission code can write it directly, so
    it is checked in one linear pass before json.loads (which recurses per level).
    Collection reads a whole notebook with it too, with its own caps (and NaN allowed,
    as nbformat writes it).
    """
    if len(text) > cap:
        raise Unreadable(f"it is {len(text):,} characters, more than the {cap:,} an answer may hold")
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth + 1:  # capture's depth counts from 0
                raise Unreadable(f"it is nested more than {max_depth} levels deep")
        elif ch in "]}":
            depth -= 1
    try:
        return json.loads(text, parse_constant=None if constants else _no_constant)
    except (ValueError, RecursionError) as exc:
        raise Unreadable(f"it is not plain JSON ({type(exc).__name__})") from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number the grader compares")


def report_path(report_dir: str, resources: dict) -> Path:
    info = resources["nbgrader"]
    return Path(report_dir) / info["assignment"] / info["student"] / f"{info['notebook']}.json"


def read_report(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"flags": []}


def write_report(path: Path, report: dict) -> None:
    """Write a notebook's report; its flags quote what the submission raised or printed, so each is kept as
    printable text (console.printable), the form every later reader prints."""
    report["flags"] = [printable(f) for f in report.get("flags", [])]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")


def load_key_module(assignment: str, keys_dir: str | Path = KEYS_DIR) -> SimpleNamespace:
    """Everything an assignment's instructor-only key file defines (TESTS and the keys it is built from)."""
    path = Path(keys_dir) / f"{assignment}.py"
    if not path.exists():
        raise FileNotFoundError(
            f"No answer key for {assignment}: {path} is missing (the key files live in grading/keys/)."
        )
    return SimpleNamespace(**runpy.run_path(str(path)))


def load_tests(assignment: str, keys_dir: str | Path = KEYS_DIR) -> dict:
    """grade_id -> (checker name, key) for one assignment, from its instructor-only key file."""
    return load_key_module(assignment, keys_dir).TESTS


def _nbgrader_meta(cell) -> dict | None:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta if isinstance(meta, dict) else None


class RestoreCells(NbGraderPreprocessor):
    """Put every nbgrader cell back as the gradebook holds it, and flag what had changed."""

    report_dir = Unicode(REPORT_DIR, help="Where each notebook's grading report is written.").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            source_nb = gb.find_notebook(info["notebook"], info["assignment"])
            order = [c.name for c in source_nb.source_cells]
            source = {
                c.name: {"cell_type": c.cell_type, "source": c.source, "locked": bool(c.locked)}
                for c in source_nb.source_cells
            }
            points = {c.name: float(c.max_score) for c in source_nb.grade_cells}
            answers = {c.name for c in source_nb.solution_cells}
            tasks = {c.name for c in source_nb.task_cells}
        flags: list[str] = []
        nb.metadata.pop("servelab", None)
        seen: dict[str, int] = {}
        cells = []
        for cell in nb.cells:
            if "nbgrader" in cell.get("metadata", {}) and _nbgrader_meta(cell) is None:
                cell.metadata.pop("nbgrader")
                flags.append("a cell's nbgrader metadata was not a dict (removed; the cell ran as a plain cell)")
            meta = _nbgrader_meta(cell)
            if meta is None:
                cells.append(cell)
                continue
            grade_id = meta.get("grade_id")
            if not isinstance(grade_id, str) or grade_id not in source or grade_id in seen:
                cell.metadata.pop("nbgrader")
                if not isinstance(grade_id, str):  # a list or dict here would stop the whole submission
                    flags.append(
                        f"a cell's grade id was not text ({type(grade_id).__name__}; it ran as a plain cell, ungraded)"
                    )
                elif grade_id in seen:
                    flags.append(f"a second cell claimed to be {grade_id!r} (it ran as a plain cell, ungraded)")
                elif meta.get("grade") or meta.get("solution") or meta.get("locked") or meta.get("task"):
                    flags.append(
                        f"an extra graded cell {str(grade_id)[:40]!r} that the assignment does not have "
                        "(it ran as a plain cell, ungraded)"
                    )
                cells.append(cell)
                continue
            seen[grade_id] = len(cells)
            want = self._meta(grade_id, source, points, answers, tasks)
            had = {k: meta.get(k) for k in ("grade", "solution", "locked", "points", "task")}
            had["points"] = float(had["points"]) if isinstance(had["points"], (int, float)) else had["points"]
            changed = [
                k
                for k in ("grade", "solution", "locked", "points", "task")
                if bool(had[k]) != bool(want.get(k)) or (k == "points" and had[k] != want.get(k))
            ]
            restored = self._cell(grade_id, source[grade_id], want, keep=cell if grade_id in answers else None)
            if cell.cell_type != restored.cell_type:
                changed.append("cell type")
            if grade_id not in answers and source[grade_id]["locked"] and self._edited(cell, source[grade_id]):
                changed.append("source")
            if changed:
                what = "answer cell" if grade_id in answers else "test cell" if want.get("grade") else "locked cell"
                flags.append(f"{what} {grade_id!r} was changed ({', '.join(changed)}); restored from the gradebook")
            cells.append(restored)
        for position, grade_id in enumerate(order):
            if grade_id in seen or grade_id in tasks:
                continue
            want = self._meta(grade_id, source, points, answers, tasks)
            if not (want.get("grade") or source[grade_id]["locked"]):
                continue  # an answer cell without points: nothing to grade there
            before = [seen[g] for g in order[:position] if g in seen]
            at = max(before) + 1 if before else 0
            cells.insert(at, self._cell(grade_id, source[grade_id], want))
            seen = {g: (i + 1 if i >= at else i) for g, i in seen.items()}
            seen[grade_id] = at
            what = "test cell" if want.get("grade") and grade_id not in answers else "cell"
            flags.append(f"{what} {grade_id!r} was missing; restored from the gradebook")
        nb.cells = cells
        path = report_path(self.report_dir, resources)
        write_report(path, {"flags": flags})
        return nb, resources

    @staticmethod
    def _edited(cell, source) -> bool:
        """Whether a locked cell's source differs from the released one (the gradebook's, hidden tests removed)."""
        from nbgrader.preprocessors import ClearHiddenTests

        released = copy.deepcopy(cell)
        released.source = source["source"]
        ClearHiddenTests()._remove_hidden_test_region(released)
        return str(cell.get("source", "")).strip() != released.source.strip()

    @staticmethod
    def _meta(grade_id, source, points, answers, tasks) -> dict:
        meta = {
            "grade": grade_id in points,
            "grade_id": grade_id,
            "locked": source[grade_id]["locked"],
            "schema_version": 3,
            "solution": grade_id in answers,
        }
        if grade_id in points:
            meta["points"] = points[grade_id]
        if grade_id in tasks:
            meta["task"] = True
        return meta

    @staticmethod
    def _cell(grade_id, source, meta, keep=None):
        from nbformat.v4 import new_code_cell, new_markdown_cell

        text = keep.source if keep is not None else source["source"]
        cell = new_code_cell(text) if source["cell_type"] == "code" else new_markdown_cell(text)
        cell.id = keep.get("id", grade_id) if keep is not None else grade_id
        old = dict(keep.metadata) if keep is not None else {}
        old.pop("nbgrader", None)
        cell.metadata = {
            "tags": [t for t in old.get("tags", []) if isinstance(t, str)][:20] if keep is not None else [],
            "nbgrader": meta,
        }
        if not keep:
            cell.metadata["editable"] = False
            cell.metadata["deletable"] = False
        return cell


class SandboxedExecute(NbGraderPreprocessor):
    """Execute the notebook in the sandbox; copy back each cell's outputs and the captured answers."""

    timeout = Integer(sandbox.CELL_TIMEOUT_S, help="Seconds one cell may run before it is interrupted.").tag(
        config=True
    )
    run_timeout = Integer(
        sandbox.SUBMISSION_TIMEOUT_S,
        help="Seconds the whole notebook may run in the sandbox; past it the run is "
        "stopped and the answers captured before are graded.",
    ).tag(config=True)
    trusted = Bool(False, help="Run without the sandbox (only for submissions from a trusted source).").tag(config=True)
    report_dir = Unicode(REPORT_DIR, help="Where each notebook's grading report is written.").tag(config=True)

    def _variant_env(self, info) -> dict[str, str]:
        """The hand-in's owner's numbers of the lesson's variant questions, for the kernel (lesson.NUMBERS_ENV),
        where the course grades variants (ScoreAnswers' settings, one home): the question cells print theirs,
        and an answer computed from them at grading is computed with theirs, as in their own kernel."""
        config = self.config.ScoreAnswers
        if not config.get("variants") or info.get("assignment") != "lesson25":
            return {}
        from servelab.variants import course_secret
        from servelab.variants.lesson import NUMBERS_ENV, lesson_params

        secret_file = config.get("variant_secret_file")
        secret = course_secret(Path(secret_file) if secret_file else None, create=False)
        return {NUMBERS_ENV: json.dumps(lesson_params(info["student"], secret=secret))}

    def preprocess(self, nb, resources):
        run = sandbox.execute(
            nb,
            cell_timeout=self.timeout,
            run_timeout=self.run_timeout,
            trusted=self.trusted,
            extra_env=self._variant_env(resources["nbgrader"]),
        )
        if run.status == "did not start":
            raise sandbox.SandboxUnavailable(
                printable(
                    f"The sandbox did not start: {run.detail}. {sandbox.fix_for(run.detail)}\n{run.log[-2000:]}",
                    keep_newlines=True,
                )
            )
        flags = []
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            done = run.cells.get(index)
            cell.outputs = []
            cell.execution_count = None
            if not done:
                continue
            for out in done.get("outputs", []) if isinstance(done.get("outputs"), list) else []:
                try:
                    cell.outputs.append(new_output(**{k: v for k, v in out.items() if k != "transient"}))
                except Exception:  # noqa: BLE001 - an output that is not an output is dropped
                    continue
            cell.execution_count = done.get("execution_count") if isinstance(done.get("execution_count"), int) else None
            flags += self._limit_flags(cell, index, done)
        if run.memory_limit_hit:
            flags.append(
                f"the submission ran out of memory: it reached its memory limit ({sandbox.CGROUP_LIMITS.memory_bytes >> 20} "
                "MiB for all its processes and its /tmp together) and the kernel's out-of-memory killer stopped one of them"
            )
        if run.status != "ok":
            flags.append(
                f"the run ended early ({run.status}: {run.detail}); answers captured before it are "
                "graded, tests after it score 0"
            )
        resources["servelab"] = {
            "answers": run.answers,
            "status": run.status,
            "detail": run.detail,
            "errors": {i: c.get("error") for i, c in run.cells.items()},
        }
        path = report_path(self.report_dir, resources)
        report = read_report(path)
        report["flags"] = report.get("flags", []) + flags
        report["execution"] = {
            "status": run.status,
            "detail": run.detail,
            "seconds": round(run.seconds, 2),
            "sandboxed": run.sandboxed,
            "cells_run": len(run.cells),
            "limits": run.limits,
            "peak_memory": run.peak_memory,
            "peak_pids": run.peak_pids,
            "memory_limit_hit": run.memory_limit_hit,
        }
        write_report(path, report)
        return nb, resources

    def _limit_flags(self, cell, index, done) -> list[str]:
        where = cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {index}"
        flags = []
        if done.get("error") == "CellTimeoutError":
            flags.append(f"{where} {LIMIT_ERRORS['CellTimeoutError']} ({self.timeout} s) and was interrupted")
        for out in cell.outputs:
            if out.get("output_type") == "error":
                why = LIMIT_ERRORS.get(out.get("ename"))
                why = why or next((w for m, w in LIMIT_MESSAGES.items() if m in str(out.get("evalue", ""))), None)
                if why:
                    flags.append(f"{where} {why} ({out.get('ename')}: {str(out.get('evalue', ''))[:120]})")
            elif out.get("output_type") == "stream":
                text = str(out.get("text", ""))
                if "[output cut:" in text:
                    flags.append(f"{where} printed more than the grader keeps (output cut)")
                # A limit met by a forked child shows in the cell's stream, not as the cell's own error.
                why = next((w for m, w in LIMIT_MESSAGES.items() if m in text), None)
                if why and f"{where} {why}" not in " ".join(flags):
                    flags.append(f"{where} {why} (said in its output)")
        return flags


class ScoreAnswers(NbGraderPreprocessor):
    """Compare each captured answer with its key, here in the grader's process; write feedback and points."""

    keys_dir = Unicode(str(KEYS_DIR), help="Folder of the instructor-only key files, <assignment>.py.").tag(config=True)
    report_dir = Unicode(REPORT_DIR, help="Where each notebook's grading report is written.").tag(config=True)
    variants = Bool(
        False,
        help="Grade the lesson's variant questions against each student's own numbers (the course's secret); "
        "off: against the lesson's own numbers, as a learner on their own is asked them.",
    ).tag(config=True)
    variant_secret_file = Unicode(
        "",
        help="The course secret the variants were handed out under (default: servelab.variants.seeds.secret_path()).",
    ).tag(config=True)

    variant_roster = List(
        Unicode(),
        help="The class's student ids, whose variants a copied answer is looked for among (with the gradebook's "
        "students, which are only those graded so far).",
    ).tag(config=True)

    def _variant_grader(self, info, tests) -> tuple[dict, Callable[[], tuple[dict, str, tuple]] | None]:
        """(grade_id -> a function of the answer that grades it against this student's own variant, the
        whole hand-in's copy evidence once every part is graded); ({}, None) when off.

        `tests`: the lesson's keys; a practice dict's knob and verdict are graded by its fixed key."""
        if not self.variants or info["assignment"] != "lesson25":
            return {}, None
        from servelab.variants import PARTS, course_secret
        from servelab.variants import grading as vgrading
        from servelab.variants.lesson import LESSON_QUESTIONS

        student = info["student"]  # nbgrader's student of the hand-in: the collected folder's verified owner
        secret = course_secret(Path(self.variant_secret_file) if self.variant_secret_file else None, create=False)
        solver = vgrading.load_solver(self.keys_dir)
        try:
            graded = vgrading.roster(info["db_url"])
        except Exception:  # noqa: BLE001 - without the gradebook's, the class's roster names the copies alone
            graded = []
        roster = sorted({*self.variant_roster, *graded})
        variants = vgrading.Variants(solver, secret)
        answers: dict = {}  # grade_id -> the answer, for the hand-in's copy evidence (copies_in)

        def grader(grade_id):
            def check(answer):
                answers[grade_id] = answer
                graded = vgrading.check(
                    grade_id,
                    student,
                    answer,
                    roster=roster,
                    variants=variants,
                    fixed_key=tests[grade_id][1] if grade_id in tests else None,
                )
                return graded.points, graded.feedback, "", dict(graded.slips)

            return check

        def copies_in() -> tuple[dict, str, tuple]:
            """After every part is graded: grade_id -> the classmate the hand-in's numbers fit, on the
            evidence of the whole hand-in (vgrading.Variants.copy), and the instructor's flag with the
            chance an honest hand-in is named so in this class."""
            evidence = variants.copy(student, answers, roster)
            if evidence.classmate is None:
                return {}, "", evidence.standard
            chance = variants.chance(roster, parts=list(answers))
            parts = sorted({p for p, _f in evidence.pieces})
            several = len({who for _p, who in evidence.sources}) > 1
            whose = (
                f"the variants of {evidence.classmate}, each question one's" if several else f"{evidence.classmate}'s"
            )
            flag = (
                f"{', '.join(parts)}: {len(evidence.pieces)} numbers miss {student}'s own variant and fit only "
                f"{whose}, within {vgrading.COPY_REL_TOL:.1%} (an honest wrong hand-in is named "
                f"so in this class {chance:.1%} of the time)"
            )
            return {p: [who] for p, who in evidence.sources}, flag, evidence.standard

        return {g: grader(g) for g, (q, _part) in PARTS.items() if q.id in LESSON_QUESTIONS}, copies_in

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        tests = load_tests(info["assignment"], self.keys_dir)
        variant, copies_in = self._variant_grader(info, tests)
        run = resources.get("servelab", {"answers": {}, "status": "not run", "detail": "", "errors": {}})
        results, flags = {}, []
        for index, cell in enumerate(nb.cells):
            if not (cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell)):
                continue
            grade_id = cell.metadata.nbgrader["grade_id"]
            max_points = float(cell.metadata.nbgrader.get("points", 0))
            if grade_id not in tests:
                raise KeyError(
                    f"{grade_id!r} has no entry in {Path(self.keys_dir) / (info['assignment'] + '.py')}: "
                    "every autograded test needs a checker and a key there."
                )
            slips: dict = {}
            try:
                points, feedback, flag, slips = self._score(
                    tests[grade_id], run, grade_id, index, cell, variant.get(grade_id)
                )
                points = min(max(float(points), 0.0), max_points) if points == points else 0.0
            except Exception as exc:  # noqa: BLE001 - one test's failure costs that test, never the submission
                points, flag = 0.0, f"{grade_id}: scoring failed ({type(exc).__name__}); scored 0"
                feedback = f"{grade_id}: the grader could not score this answer; a person will look at it."
            if flag:
                flags.append(flag)
            form = [o for o in cell.outputs if o.get("output_type") == "error" and o.get("ename") != "CellTimeoutError"]
            if form and index in run["answers"]:
                feedback += (
                    f"\n(The form check in this cell said: {form[0].get('ename')}: {str(form[0].get('evalue'))[:300]})"
                )
            cell.outputs = [
                new_output("stream", name="stdout", text=feedback + "\n"),
                new_output(
                    "execute_result",
                    data={"text/plain": repr(round(points, 3))},
                    execution_count=cell.get("execution_count"),
                ),
            ]
            # slips and the answer (cut to REPORT_ANSWER_CHARS) are for the class report (classroom/report.py)
            results[grade_id] = {
                "points": round(points, 3),
                "max_points": max_points,
                "feedback": feedback,
                "slips": slips,
                "answered": index in run["answers"],
                "answer": str(run["answers"].get(index) or "")[:REPORT_ANSWER_CHARS],
            }
            if grade_id in variant:  # for the instructor (the class report): whose variant the answer fits
                results[grade_id]["copied_from"] = []
        if copies_in is not None:
            named, flag, printed = copies_in()
            for grade_id, whose in named.items():
                if grade_id in results:
                    results[grade_id]["copied_from"] = whose
            for grade_id in printed:  # the lesson's printed example numbers: the lesson's, never a classmate's
                if grade_id in results:
                    results[grade_id]["lesson_numbers"] = True
            if flag:
                flags.append(flag)
        path = report_path(self.report_dir, resources)
        report = read_report(path)
        report["tests"] = results
        report["flags"] = report.get("flags", []) + flags
        write_report(path, report)
        return nb, resources

    @staticmethod
    def _score(spec, run, grade_id, index, cell, variant=None) -> tuple[float, str, str, dict]:
        """(points, feedback, a flag for a person or "", the slips the checker named) for one test; with
        `variant` (a function of the answer: _variant_grader's), the answer is graded by it instead of the key."""
        check_name, key = spec
        name = key.get("name", grade_id)
        text = run["answers"].get(index)
        if text is None:
            error = next((o for o in cell.outputs if o.get("output_type") == "error"), None)
            if error is not None:
                why = (
                    f"the test cell stopped before it could hand the answer over ({error.get('ename')}: "
                    f"{str(error.get('evalue', ''))[:200]})"
                )
            elif run["errors"].get(index) is None and index not in run["errors"]:
                why = f"the notebook stopped before this test ran ({run['status']})"
            else:
                why = "the test cell handed no answer over"
            return 0.0, f"{name}: no answer reached the grader: {why}.", "", {}
        if text.startswith("!"):
            return (
                0.0,
                f"{name}: the answer must be built from plain numbers, strings, lists and dicts ({text[1:200]}).",
                f"{grade_id}: the answer was not a plain value ({text[1:200]}); scored 0",
                {},
            )
        try:
            answer = read_answer(text)
        except Unreadable as exc:
            return (
                0.0,
                f"{name}: the answer could not be read as plain values: {exc}.",
                f"{grade_id}: the captured answer was not read ({exc}); scored 0",
                {},
            )
        check = getattr(checkers, check_name)
        try:
            if variant is not None:
                return variant(answer)
            result = check(answer, key)
            points, feedback = result
            return points, feedback, "", dict(getattr(result, "slips", {}))
        except Exception as exc:  # noqa: BLE001 - a checker bug must not cost the submission its other grades
            return (
                0.0,
                f"{name}: the checker failed ({type(exc).__name__}); a person will look at it.",
                f"{grade_id}: the checker failed ({type(exc).__name__}: {str(exc)[:200]}); scored 0",
                {},
            )
