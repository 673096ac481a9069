"""Per-student variants of Lesson 25's numeric questions: drawn from a keyed seed, well-posed, graded
against the student's own parameters by the instructor-only solver, copies named; the solver stays out
of the students' environment."""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import stat
from pathlib import Path

import pytest
import secrets_helpers

from servelab import hardware, modelspec, simulate
from servelab.classroom import studentenv
from servelab.grading import checkers, keys, trusted
from servelab.paths import REPO_DIR
from servelab.variants import QUESTIONS, grading, lesson, questions, seeds

pytestmark = pytest.mark.unit

SECRET = b"0123456789abcdef0123456789abcdef-test-course"
CLASS = [f"student{i:02d}" for i in range(30)]
SOLVER = grading.load_solver()
SEEDS = 500


def _expected(part_id: str, params: dict):
    """The answer that earns full points: the key's value, or the expected fields."""
    key = grading.solution(part_id, params, SOLVER)["key"]
    if "fields" in key:
        return {name: want["expect"] for name, want in key["fields"].items()}
    return key["value"]


def _full(part_id: str, params: dict) -> float:
    return float(grading.solution(part_id, params, SOLVER)["key"].get("points", 1))


def _secret_file(path: Path) -> Path:
    """The test course's secret, written as the course keeps it (its owner's alone)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SECRET.decode() + "\n")
    path.chmod(0o600)
    return path


def _check(part_id, student, answer, **kw):
    return grading.check(part_id, student, answer, secret=SECRET, solver=SOLVER, **kw)


# --------------------------------------------------------------------------- seeds


def test_a_variant_is_the_same_every_time_and_differs_from_a_neighbours_and_under_another_secret():
    first = [seeds.params_for("warmup1", s, secret=SECRET) for s in CLASS]
    assert first == [seeds.params_for("warmup1", s, secret=SECRET) for s in CLASS]
    assert len({tuple(sorted(p.items())) for p in first}) == len(CLASS)
    # The key is the secret: the same names under another course secret are other variants.
    other = [seeds.params_for("warmup1", s, secret=b"another-course-secret-of-32-bytes!!") for s in CLASS]
    assert sum(a != b for a, b in zip(first, other)) >= len(CLASS) - 1
    # A part's id and its question's id name the same variant; the assignment and course are in the message.
    assert seeds.params_for("warmup1-batch", "student00", secret=SECRET) == first[0]
    assert seeds.seed("student00", "warmup1", secret=SECRET) != seeds.seed(
        "student00", "warmup1", secret=SECRET, assignment="lesson26"
    )
    with pytest.raises(ValueError):
        seeds.seed("bad\0name", "warmup1", secret=SECRET)


def test_a_released_variant_stays_what_it_was():
    """Students keep their numbers for the whole course: a generator that draws differently changes every
    student's variant, so it must come with a new seeds.VERSION (and a new release), not by accident."""
    assert seeds.VERSION == b"servelab-variant-v3"  # v3: practice 4 draws from 35 variants, where it drew from 23
    assert seeds.params_for("warmup1", "student00", secret=SECRET) == {
        "layers": 56,
        "kv_heads": 8,
        "heads": 16,
        "head_dim": 64,
        "dtype": "float16",
        "bytes_per_value": 2,
        "tokens_per_sequence": 22528,
        "batch": 219,
    }
    # Every question's, for the whole class: one digest (a changed draw anywhere changes it).
    drawn = json.dumps([seeds.all_params(s, secret=SECRET) for s in CLASS], sort_keys=True)
    assert hashlib.sha256(drawn.encode()).hexdigest()[:16] == "cb804e2bf6009d95"


def test_the_course_secret_is_made_once_private_and_refused_when_others_can_read_it(tmp_path):
    path = tmp_path / "servelab" / "variant-secret"
    made = seeds.course_secret(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(made) >= 64
    assert seeds.course_secret(path) == made
    os.chmod(path, 0o644)
    with pytest.raises(seeds.SecretError, match="every user"):
        seeds.course_secret(path)
    with pytest.raises(seeds.SecretError, match="no course secret"):
        seeds.course_secret(tmp_path / "absent", create=False)


# --------------------------------------------------------------------------- well-posed, for every generator


def _numbers(answer) -> list[float]:
    values = answer.values() if isinstance(answer, dict) else [answer]
    return [float(v) for v in values if not isinstance(v, bool)]


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.id)
def test_every_generator_gives_a_well_posed_question_over_many_seeds(question):
    """Answers finite, positive and in range; no known slip lands within the tolerance of the answer (the
    question tells the slip from the answer); distinct parameters give distinct answers; the text renders."""
    answers, texts = {}, set()
    for n in range(SEEDS):
        params = question.generate(random.Random(n))
        texts.add(questions.render(question.id, params))
        row = []
        for part in question.parts:
            answer = _expected(part.id, params)
            row.append(repr(answer))
            for x in _numbers(answer):
                assert math.isfinite(x) and part.low <= x <= part.high, (part.id, params, x)
                assert x > 0 or part.kind == "fields", (part.id, params, x)
            solved = grading.solution(part.id, params, SOLVER)
            for hint in solved["key"].get("hints", []):
                points, _ = getattr(checkers, solved["checker"])(hint["value"], solved["key"])
                assert points == 0, (part.id, params, hint["slip"])
            assert grading.grade(part.id, params, answer, SOLVER).points == _full(part.id, params)
        answers[tuple(sorted(params.items()))] = tuple(row)
    assert len(answers) >= min(SEEDS // 2, 6), "the generator draws too few variants"
    # Distinct variants differ in their answers (a copied answer can be told from one's own).
    assert len(set(answers.values())) >= 0.95 * len(answers)
    assert len(texts) == len(answers)


def test_the_bound_question_has_both_answers_and_the_met_slo_occurs():
    bounds = {_expected("warmup3-bound", questions.warmup3(random.Random(n))) for n in range(200)}
    assert bounds == {True, False}
    met = {_expected("practice1-test", questions.practice1(random.Random(n)))["slo_met"] for n in range(200)}
    assert met == {True, False}


def test_the_solver_agrees_with_the_fixed_lesson_at_the_lessons_own_numbers():
    """From first principles, the solver gives what servelab's presets and simulator give the fixed lesson."""
    llama, h200 = modelspec.preset("Llama-3.1-8B"), hardware.get("H200")
    shape = {
        "layers": llama.num_layers,
        "kv_heads": llama.num_kv_heads,
        "heads": llama.num_heads,
        "head_dim": llama.head_dim,
        "dtype": "bfloat16",
        "bytes_per_value": 2,
    }
    gpu = {"peak_tflops": h200.peak_tflops, "bandwidth_gb_s": h200.bandwidth_gb_s}
    w1 = {**shape, "tokens_per_sequence": 8192, "batch": 32}
    assert _expected("warmup1-per-token", w1) == keys.kv_bytes_per_token("Llama-3.1-8B")["value"]
    assert _expected("warmup1-batch", w1) == keys.kv_bytes("Llama-3.1-8B", 8192, 32)["value"]
    w2 = {**gpu, "dtype": "bfloat16", "bytes_per_param": 2}
    assert _expected("warmup2-ridge", w2) == pytest.approx(keys.ridge_flop_per_byte("H200")["value"])
    assert _expected("warmup2-tokens", w2) == pytest.approx(keys.ridge_tokens_per_step("H200")["value"])
    w3 = {**gpu, "k": 4, "a": 0.7, "batch": 64, "dtype": "bfloat16"}
    assert _expected("warmup3-tokens", w3) == pytest.approx(keys.tokens_per_verify_step(0.7, 4)["value"])
    assert _expected("warmup3-verified", w3) == keys.verified_tokens_per_step(64, 4)["value"]
    assert _expected("warmup3-bound", w3) is keys.is_compute_bound(64, 4, "H200")["value"]
    be = {**w2, "k": 4, "a": 0.7}
    sim = simulate.Simulator(llama, h200)
    assert _expected("break-even-batch", be) == pytest.approx(sim.break_even_batch(4, 0.7))
    assert _expected("break-even-ridge-batch", be) == pytest.approx(sim.ridge_batch(4))
    p1 = {"users": 20, "max_num_seqs": 256, "target_ms": 500, "measured_ms": 1200}
    fixed = trusted.load_tests("lesson25")["practice1-test"][1]["fields"]
    assert _expected("practice1-test", p1) == {f: fixed[f]["expect"] for f in _expected("practice1-test", p1)}
    llama70 = modelspec.preset("Llama-3.1-70B")
    e1 = {
        **shape,
        "layers": llama70.num_layers,
        "kv_heads": llama70.num_kv_heads,
        "head_dim": llama70.head_dim,
        "chats": 40,
        "old_context": 4096,
        "new_context": 32768,
    }
    assert _expected("capacity-context-per-seq", e1) == pytest.approx(llama70.kv_bytes(32768, 1, "bfloat16") / 1e9)


def test_the_tolerances_are_the_lessons_keys():
    """A variant is graded as the fixed lesson is: 1 % by default, three figures for the verify step."""
    w3 = questions.warmup3(random.Random(3))
    right = _expected("warmup3-tokens", w3)
    assert grading.grade("warmup3-tokens", w3, right * 1.0015, SOLVER).points == 1
    assert grading.grade("warmup3-tokens", w3, right * 1.003, SOLVER).points == 0
    w1 = questions.warmup1(random.Random(3))
    right = _expected("warmup1-per-token", w1)
    assert grading.grade("warmup1-per-token", w1, right * 1.009, SOLVER).points == 1
    assert grading.grade("warmup1-per-token", w1, right * 1.011, SOLVER).points == 0


# --------------------------------------------------------------------------- grading a class


def test_a_class_is_each_graded_right_against_their_own_parameters():
    for part in (
        "warmup1-per-token",
        "warmup1-batch",
        "warmup2-ridge",
        "warmup3-tokens",
        "practice1-test",
        "capacity-sessions-fit",
        "break-even-batch",
        "littles-law-tpot",
    ):
        for student in CLASS[:10]:
            own = seeds.params_for(part, student, secret=SECRET)
            graded = _check(part, student, _expected(part, own), roster=CLASS)
            assert graded.points == _full(part, own), (part, student, graded.feedback)
            assert graded.copied_from == () and graded.params == own
            # The feedback shows the student's parameters and the worked solution for them.
            assert "Your parameters:" in graded.feedback and "Worked solution:" in graded.feedback
            assert all(f"{name} = {value}" in graded.feedback for name, value in own.items())


def test_a_warm_up_computed_by_hand_from_the_students_own_numbers_scores():
    """The student's arithmetic, not the solver's, from the parameters their question shows."""
    for student in CLASS:
        p = seeds.params_for("warmup1", student, secret=SECRET)
        per_token = 2 * p["layers"] * p["kv_heads"] * p["head_dim"] * p["bytes_per_value"]
        assert _check("warmup1-per-token", student, per_token).points == 1
        assert _check("warmup1-batch", student, per_token * p["tokens_per_sequence"] * p["batch"]).points == 1
        # K and V counted once: the slip is named with the student's own numbers.
        slipped = _check("warmup1-per-token", student, per_token / 2)
        assert slipped.points == 0 and "kv-once" in slipped.slips


COPY_PARTS = (
    "warmup1-per-token",
    "warmup1-batch",
    "warmup2-ridge",
    "warmup2-tokens",
    "warmup3-tokens",
    "warmup3-verified",
    "practice1-test",
    "practice4-test",
)


def _hand_in(student, roster=CLASS):
    return {p: _expected(p, seeds.params_for(p, student, secret=SECRET)) for p in COPY_PARTS}


def test_the_same_answers_handed_in_by_two_students_score_only_for_the_one_whose_variant_they_fit():
    alice, bob = CLASS[0], CLASS[1]
    copied = _hand_in(alice)
    for part in COPY_PARTS:
        answer = copied[part]
        assert _check(part, alice, answer, roster=CLASS, hand_in=copied).copied_from == ()
        bobs = _check(part, bob, answer, roster=CLASS, hand_in=copied)
        assert bobs.points < _full(part, bobs.params) or answer == _expected(part, bobs.params), part
        assert bobs.copied_from in ((alice,), ()), part
        # The flag is for the instructor: the student's feedback names nobody.
        assert alice not in bobs.feedback
    named = [p for p in COPY_PARTS if _check(p, bob, copied[p], roster=CLASS, hand_in=copied).copied_from]
    assert len(named) >= 3, named
    # One number alone is no evidence; without a roster nothing is flagged; True/False is never flagged.
    answer = copied["warmup1-batch"]
    assert _check("warmup1-batch", bob, answer, roster=CLASS).copied_from == ()
    assert _check("warmup1-batch", bob, answer, hand_in=copied).copied_from == ()
    bound = _expected("warmup3-bound", seeds.params_for("warmup3", alice, secret=SECRET))
    assert _check("warmup3-bound", bob, not bound, roster=CLASS, hand_in=copied).copied_from == ()


BIG_CLASS = [f"stu{i:03d}" for i in range(100)]


def _honest_wrong(student, how, variants):
    """A hand-in that is the student's own work gone wrong: every number slipped by `how`, or the
    lesson's printed example numbers."""
    hand_in = {}
    for part in COPY_PARTS:
        own = _expected(part, variants.params(part, student))
        if how == "standard":
            hand_in[part] = _expected(part, questions.question_of(part).standard)
            continue

        def slip(x):
            return x if isinstance(x, bool) else x * how

        hand_in[part] = {k: slip(v) for k, v in own.items()} if isinstance(own, dict) else slip(own)
    return hand_in


@pytest.mark.unit(
    False
)  # a class of 100, each five ways wrong, checked against all: about 1 s of CPU, at the lane's limit
def test_honest_wrong_answers_are_not_called_copies_and_a_whole_copy_names_exactly_its_source():
    variants = grading.Variants(SOLVER, SECRET)
    flagged = total = 0
    for how in (0.5, 2, 1.07, 0.93, "standard"):
        for student in BIG_CLASS:
            hand_in = _honest_wrong(student, how, variants)
            total += 1
            flagged += variants.copy(student, hand_in, BIG_CLASS).classmate is not None
            if how == "standard":  # the lesson's numbers are the lesson's: said so, never a classmate's
                graded = grading.check(
                    "warmup2-tokens",
                    student,
                    hand_in["warmup2-tokens"],
                    roster=BIG_CLASS,
                    hand_in=hand_in,
                    variants=variants,
                )
                if graded.points == 0:
                    assert graded.copied_from == () and "lesson's printed example" in graded.feedback
    assert flagged / total < 0.01, (flagged, total)
    # A real whole copy names exactly the classmate copied, never a bystander.
    named = 0
    for source, copier in zip(BIG_CLASS[:50], BIG_CLASS[50:]):
        evidence = variants.copy(copier, _hand_in(source), BIG_CLASS)
        assert evidence.classmate in (source, None), (source, copier, evidence)
        named += evidence.classmate == source
        assert evidence.classmate is None or len(evidence.pieces) >= grading.COPY_PIECES
    assert named >= 45, named  # a copy whose numbers other classmates share too is left unnamed, not misnamed
    # The chance rate the instructor reads beside a flag: small in this class.
    assert variants.chance(BIG_CLASS[:40], parts=COPY_PARTS) < 0.05


def test_a_copy_of_a_classmate_who_slipped_names_them():
    """A copy of a classmate's hand-in that holds their slips (each number part at one of its named slips)
    answers their variant too; a student's own named slips are their own mistakes, never evidence."""
    variants = grading.Variants(SOLVER, SECRET)
    named = 0
    for source, copier in zip(BIG_CLASS[:30], BIG_CLASS[50:80]):
        slipped = {
            part: variants.answers(part, source, None)[-1] if variants.answers(part, source, None)[1:] else answer
            for part, answer in _hand_in(source).items()
        }
        evidence = variants.copy(copier, slipped, BIG_CLASS)
        assert evidence.classmate in (source, None), (source, copier, evidence)
        named += evidence.classmate == source
        own = {p: variants.answers(p, copier, None)[-1] for p in slipped if variants.answers(p, copier, None)[1:]}
        assert variants.copy(copier, own, BIG_CLASS).classmate is None
    assert named >= 24, named


def test_a_copy_taken_from_several_classmates_names_each_questions_source():
    """Each question copied whole from one classmate or another: the hand-in is named a copy, each part with the
    classmate whose variant it fits; honest wrong hand-ins still are not (the rate in the test above)."""
    variants = grading.Variants(SOLVER, SECRET)
    named = 0
    for i in range(20):
        copier, one, two = BIG_CLASS[60 + i], BIG_CLASS[i], BIG_CLASS[30 + i]
        first, second = _hand_in(one), _hand_in(two)
        mixed = {p: (first if p.startswith(("warmup1", "warmup2")) else second)[p] for p in first}
        evidence = variants.copy(copier, mixed, BIG_CLASS)
        if evidence.classmate is None:
            continue
        named += 1
        for part, who in evidence.sources:
            assert who == (one if part.startswith(("warmup1", "warmup2")) else two), (part, who, one, two)
        assert set(evidence.classmate.split(", ")) == {one, two}
    assert named >= 8, named  # half of them here: the rest leave too few questions theirs alone, unnamed


def test_a_hostile_answer_scores_nothing_and_an_unknown_part_is_named():
    class Always(float):
        def __eq__(self, other):
            return True

    for answer in (Always(1.0), "1e9", None, float("nan"), [1, 2], {"x": 1}):
        assert _check("warmup1-per-token", CLASS[0], answer, roster=CLASS).points == 0
    for unknown in ("warmup9", "warmup1"):  # a question's id is not a part's: name the parts
        with pytest.raises(KeyError, match="warmup1-per-token"):
            _check(unknown, CLASS[0], 1)


# --------------------------------------------------------------------------- the solver stays with the keys


def test_the_solver_lives_with_the_keys_which_the_students_wheel_is_built_without():
    """studentenv copies the checkout for the wheel through _not_for_the_wheel: it drops grading/ at the top."""
    solver = Path(trusted.KEYS_DIR) / f"{grading.SOLVER_NAME}.py"
    assert solver.is_file()
    parts = solver.relative_to(REPO_DIR).parts
    ignored = studentenv._not_for_the_wheel(str(REPO_DIR), [parts[0], "src", "data"])
    assert ignored == [parts[0]] == ["grading"]
    # The generators ship: nothing drops src/servelab/variants.
    package = REPO_DIR / "src" / "servelab" / "variants"
    assert studentenv._not_for_the_wheel(str(package), [p.name for p in package.glob("*.py")]) == []


def test_the_secrets_scan_finds_the_solver_and_not_the_shipped_generators():
    markers = secrets_helpers.markers()
    solver_markers = {m: o for m, o in markers.items() if grading.SOLVER_NAME in o}
    assert len(solver_markers) > 50
    assert secrets_helpers.hits(secrets_helpers.SOLVER.read_text(), markers)
    for path in (REPO_DIR / "src" / "servelab" / "variants").glob("*.py"):
        assert secrets_helpers.hits(path.read_text(), markers) == [], path
    # A solver copied into the package by mistake is caught, even re-indented.
    copied = "\n".join("    " + line for line in secrets_helpers.SOLVER.read_text().splitlines())
    assert secrets_helpers.hits(copied, markers)


def test_without_the_solver_grading_refuses(tmp_path):
    with pytest.raises(grading.SolverMissing, match="not in this installation"):
        grading.load_solver(tmp_path)


def test_grading_reads_the_release_secret_and_never_makes_one(tmp_path, monkeypatch):
    path = tmp_path / "variant-secret"
    monkeypatch.setenv("SERVELAB_VARIANT_SECRET_FILE", str(path))
    with pytest.raises(seeds.SecretError, match="no course secret"):
        grading.check("warmup1-per-token", "student00", 1, solver=SOLVER)
    assert not path.exists()
    secret = seeds.course_secret()  # the release makes it
    own = seeds.params_for("warmup1", "student00", secret=secret)
    assert (
        grading.check("warmup1-per-token", "student00", _expected("warmup1-per-token", own), solver=SOLVER).points == 1
    )


def test_a_students_released_parameters_render_their_questions():
    mine = seeds.all_params("student03", secret=SECRET)
    assert set(mine) == {q.id for q in QUESTIONS}
    assert mine["warmup1"] == seeds.params_for("warmup1", "student03", secret=SECRET)
    text = seeds.text_for("warmup1", "student03", secret=SECRET)
    assert text == questions.render("warmup1", mine["warmup1"]) and f"{mine['warmup1']['layers']} layers" in text
    namespace: dict = {}
    exec(questions.params_source(mine["break-even"]), namespace)
    assert namespace["params"] == mine["break-even"]


# --------------------------------------------------------------------------- the lesson and its grader


def _lesson_statement(question_id: str) -> str:
    """What the lesson states in a question's markdown cell, from its "Compute" on (the released notebook)."""
    import nbformat

    from servelab.grading import course

    nb = nbformat.read(course.get("lesson25").student, as_version=4)
    (cell,) = [c for c in nb.cells if c.get("id") == f"{question_id}-question"]
    if "Compute" in cell.source:
        return cell.source[cell.source.index("Compute") :]
    # a review: its numbers come after its number and before what to state
    return cell.source[cell.source.index("▢**") + 3 : cell.source.index("State")]


NUMBER = re.compile(r"(?<![\w.,-])\d+(?:[.,]\d+)*(?![\w.-]?\w)")


def _stated_numbers(text: str) -> list[str]:
    """The numbers a text states, "500ms" and "8-way" among them."""
    return NUMBER.findall(re.sub(r"(\d)(ms|-way)\b", r"\1 \2", text))


@pytest.mark.parametrize("question_id", lesson.LESSON_QUESTIONS)
def test_the_lessons_standard_numbers_are_the_ones_it_states_and_its_fixed_keys(question_id):
    question = questions.BY_ID[question_id]
    assert question.standard is not None
    rendered = questions.render(question_id, question.standard)
    stated = _stated_numbers(_lesson_statement(question_id))
    assert stated and all(n in _stated_numbers(rendered) for n in stated), (stated, rendered)
    if question_id.startswith("practice"):  # a review states all its numbers; the variant, no others
        given = rendered[: rendered.index("Fill")]  # what follows says what to fill, as the lesson's does
        assert set(stated) == set(_stated_numbers(given)), (stated, rendered)
    # Graded at its standard numbers, each part's key is the fixed lesson's: the samples' grades hold.
    fixed = trusted.load_tests("lesson25")
    for part in question.parts:
        key = fixed[part.id][1]
        if part.kind == "fields":  # the numeric fields: the fixed key's values, and its tolerances
            solved = grading.solution(part.id, question.standard, SOLVER)["key"]["fields"]
            assert set(solved) == set(part.fields) < set(key["fields"]), part.id
            for name, want in solved.items():
                assert want["expect"] == key["fields"][name]["expect"], (part.id, name)
                assert type(want["expect"]) is type(key["fields"][name]["expect"]), (part.id, name)
                assert want.get("rel_tol", 0.01) == key["fields"][name].get("rel_tol", 0.01), (part.id, name)
            continue
        want = key["value"]
        got = _expected(part.id, question.standard)
        assert got == pytest.approx(want) and type(got) is type(want) or isinstance(want, (int, float)), part.id


# The fixed key's judgement of each review, which every variant of its numbers keeps.
JUDGEMENT = {
    "practice1-test": {"knob": "batching", "verdict": "unjustified"},
    "practice4-test": {"knob": "parallelism", "verdict": "wrong"},
}


@pytest.mark.parametrize("question_id", ("practice1", "practice4"))
def test_every_variant_of_a_review_keeps_the_fixed_keys_judgement_and_one_answer(question_id):
    """Over many seeds a review's numbers keep its knob and verdict right (the fixed key grades them), its
    SLO met or missed by more than the tolerance, and its full answer earns the lesson's points."""
    question = questions.BY_ID[question_id]
    (part,) = question.parts
    key = trusted.load_tests("lesson25")[part.id][1]
    assert {f: key["fields"][f]["expect"] for f in JUDGEMENT[part.id]} == JUDGEMENT[part.id]
    for n in range(SEEDS):
        p = question.generate(random.Random(n))
        if question_id == "practice1":
            assert p["max_num_seqs"] >= 2 * p["users"], p  # the cap never binds: unjustified, never "wrong"
            assert abs(p["measured_ms"] - p["target_ms"]) > 0.05 * p["target_ms"], p  # met or missed, clearly
        else:
            assert p["tensor_parallel_size"] > p["gpus_per_node"], p  # more GPUs than the node has: wrong
        right = {**JUDGEMENT[part.id], **_expected(part.id, p)}
        assert grading.grade(part.id, p, right, SOLVER, key).points == key["points"], p
        wrong_knob = {**right, "knob": "quantization"}
        share = key["points"] / len(key["fields"])
        assert grading.grade(part.id, p, wrong_knob, SOLVER, key).points == pytest.approx(key["points"] - share)
        # A wrong verdict is told in the student's own numbers, not the lesson's.
        told = grading.grade(part.id, p, {**right, "verdict": "justified"}, SOLVER, key).feedback
        head = told.split("Your parameters")[0]  # the checker's words, before the parameters and worked solution
        if question_id == "practice1":
            assert f"with {p['users']} users" in head and f"{p['measured_ms']:g} ms" in head, head
        else:
            assert f"with {p['tensor_parallel_size']} on this one {p['gpus_per_node']}-GPU node" in head, head


def test_a_question_cell_prints_the_students_numbers_and_the_lessons_without_a_file(tmp_path, monkeypatch, capsys):
    path = tmp_path / "lesson25.json"
    monkeypatch.setenv("SERVELAB_VARIANT_PARAMS", str(path))
    lesson.show("warmup1")  # no file: the lesson's own numbers
    assert capsys.readouterr().out == questions.render("warmup1", questions.BY_ID["warmup1"].standard) + "\n"
    assert "32 sequences of 8,192 tokens" in questions.render("warmup1", questions.BY_ID["warmup1"].standard)
    path.write_text(json.dumps(seeds.all_params("student03", secret=SECRET)))
    for qid in lesson.LESSON_QUESTIONS:
        lesson.show(qid)
        assert capsys.readouterr().out == seeds.text_for(qid, "student03", secret=SECRET) + "\n"
    assert lesson.text("warmup1") != lesson.text("warmup1", tmp_path / "absent.json")
    path.write_text('{"warmup1": {"layers": 3}}')  # a file that does not fit the question: the lesson's numbers
    assert lesson.numbers("warmup1") == questions.BY_ID["warmup1"].standard


def nobodys_home(tmp_path):
    """(passwd entry, home): a home of the user nobody's own under tmp_path, as `servelab class up` finds a
    student's (the hand-out chowns to root and the student, so it runs as root, as class up does)."""
    if os.geteuid() != 0:
        pytest.skip("the hand-out chowns to root and the student, as `servelab class up` runs it (as root)")
    import pwd

    entry = pwd.getpwnam("nobody")
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, entry.pw_uid, entry.pw_gid)
    return entry, home


def test_the_hand_out_is_the_students_to_read_and_nobodys_to_write(tmp_path):
    entry, home = nobodys_home(tmp_path)
    path = lesson.hand_out("nobody", secret=SECRET, home=home)
    assert path == home / ".servelab" / "variants" / "lesson25.json"
    st = path.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, entry.pw_gid, 0o440)
    folder = path.parent.stat()
    assert (folder.st_uid, stat.S_IMODE(folder.st_mode)) == (0, 0o755)  # nobody but root writes in it
    assert path.parent.parent.stat().st_uid == entry.pw_uid  # ~/.servelab stays the student's own
    assert lesson.mine(path) == {q: seeds.params_for(q, "nobody", secret=SECRET) for q in lesson.LESSON_QUESTIONS}
    lesson.hand_out("nobody", secret=SECRET, home=home)  # a second class up writes it again
    assert lesson.mine(path)["warmup1"] == seeds.params_for("warmup1", "nobody", secret=SECRET)
    shown = lesson.instructor_view("nobody", secret=SECRET, solver=SOLVER)
    assert seeds.text_for("warmup1", "nobody", secret=SECRET) in shown and "warmup1-batch:" in shown


def test_class_down_removes_the_hand_out_from_its_journal_also_after_a_crash(tmp_path):
    """The hand-out is written down before it is made (a "hand-out" entry naming the file and the folders
    it makes); a fresh reading of the journal (`class down` after a killed `class up`) removes the file
    and the folders it made, keeps what the student put beside them, and follows no link put in the way."""
    from servelab.classroom.journal import Journal

    entry, home = nobodys_home(tmp_path)
    journal = Journal(tmp_path / "changes.json")
    path = lesson.hand_out("nobody", secret=SECRET, home=home, record=journal.record)
    assert Journal(journal.path).entries == [
        {
            "kind": "hand-out",
            "home": str(home),
            "file": ".servelab/variants/lesson25.json",
            "made": [".servelab", ".servelab/variants"],
        }
    ]
    undone = Journal(journal.path).undo(log=lambda line: None)  # what `class down` reads after a crash
    assert not (home / ".servelab").exists() and not journal.path.exists() and str(path) in undone[0]
    # The student's own files in ~/.servelab stay, and the folder with them.
    (home / ".servelab").mkdir()
    (home / ".servelab" / "practice.json").write_text("{}")
    journal = Journal(tmp_path / "changes.json")
    lesson.hand_out("nobody", secret=SECRET, home=home, record=journal.record)
    assert journal.entries[0]["made"] == [".servelab/variants"]
    journal.undo(log=lambda line: None)
    assert sorted(p.name for p in (home / ".servelab").iterdir()) == ["practice.json"]
    # Killed before anything was made: the entry undoes nothing, and says nothing.
    journal = Journal(tmp_path / "changes.json")
    journal.record("hand-out", home=str(home), file=".servelab/variants/lesson25.json", made=[".servelab/variants"])
    assert Journal(journal.path).undo(log=lambda line: None) == []
    # A link put where ~/.servelab was: the file it leads to is not the hand-out's, and stays.
    journal = Journal(tmp_path / "changes.json")
    lesson.hand_out("nobody", secret=SECRET, home=home, record=journal.record)
    elsewhere = tmp_path / "elsewhere"
    (home / ".servelab").rename(elsewhere)
    (home / ".servelab").symlink_to(elsewhere)
    assert journal.undo(log=lambda line: None) == []
    assert (elsewhere / "variants" / "lesson25.json").exists()


def _score(tmp_path, student, answers, variants=True, roster=("sl-ana", "sl-ben"), class_roster=(), points=None):
    """ScoreAnswers on a notebook of the warm-up 1 test cells (or of `answers`' cells, each worth
    `points[grade_id]`), as nbgrader runs it for `student`'s hand-in."""
    import nbformat

    secret_file = tmp_path / "secret"
    if not secret_file.exists():
        secret_file.write_text(SECRET.decode() + "\n")
        secret_file.chmod(0o600)
    cells = []
    for grade_id in ("warmup1-per-token", "warmup1-batch") if points is None else points:
        cell = nbformat.v4.new_code_cell("")
        cell.metadata["nbgrader"] = {
            "grade": True,
            "solution": False,
            "grade_id": grade_id,
            "points": 1 if points is None else points[grade_id],
        }
        cells.append(cell)
    nb = nbformat.v4.new_notebook(cells=cells)
    resources = {
        "nbgrader": {"assignment": "lesson25", "student": student, "notebook": "lesson25", "db_url": "sqlite://"},
        "servelab": {
            "answers": {i: json.dumps(answers[c.metadata.nbgrader["grade_id"]]) for i, c in enumerate(cells)},
            "status": "ok",
            "detail": "",
            "errors": {},
        },
    }
    scorer = trusted.ScoreAnswers(
        variants=variants,
        variant_secret_file=str(secret_file),
        variant_roster=list(class_roster),
        report_dir=str(tmp_path / "reports"),
    )
    original = grading.roster
    grading.roster = lambda db_url: list(roster)  # nbgrader's gradebook students
    try:
        nb, _ = scorer.preprocess(nb, resources)
    finally:
        grading.roster = original
    path = tmp_path / "reports" / "lesson25" / student / "lesson25.json"
    report = json.loads(path.read_text())
    path.unlink()  # the next hand-in's report starts afresh, as RestoreCells writes it
    return report, [c.outputs[0]["text"] for c in nb.cells]


def test_the_grader_scores_each_student_against_their_own_variant_and_flags_a_classmates(tmp_path):
    warmups = [p for p in COPY_PARTS if p.startswith("warmup")]
    points = dict.fromkeys(warmups, 1)

    def right(student):
        return {p: _expected(p, seeds.params_for(p, student, secret=SECRET)) for p in warmups}

    ana, ben = right("sl-ana"), right("sl-ben")
    assert ana != ben
    report, feedback = _score(tmp_path, "sl-ana", ana, points=points)
    assert {g: t["points"] for g, t in report["tests"].items()} == points
    params = seeds.params_for("warmup1", "sl-ana", secret=SECRET)
    assert f"layers = {params['layers']}" in feedback[0] and "Worked solution:" in feedback[0]
    assert report["flags"] == []
    # sl-ben hands in sl-ana's answers: nothing for him, and the instructor is told whose variant they fit,
    # with the chance an honest hand-in would be named so.
    report, feedback = _score(tmp_path, "sl-ben", ana, points=points)
    assert report["tests"]["warmup1-batch"]["points"] == 0
    assert report["tests"]["warmup1-batch"]["copied_from"] == ["sl-ana"]
    (flag,) = report["flags"]
    assert "sl-ana" in flag and "warmup1-batch" in flag and "of the time" in flag, flag
    assert not any("sl-ana" in text for text in feedback)  # the student's feedback names nobody
    report, _ = _score(tmp_path, "sl-ben", ben, points=points)
    assert all(t["points"] == 1 for t in report["tests"].values()) and report["flags"] == []
    # graded before sl-ana is in the gradebook: the class's roster still names her
    report, _ = _score(tmp_path, "sl-ben", ana, roster=(), class_roster=("sl-ana", "sl-ben"), points=points)
    assert report["tests"]["warmup1-batch"]["copied_from"] == ["sl-ana"]
    report, _ = _score(tmp_path, "sl-ben", ana, roster=(), points=points)
    assert report["tests"]["warmup1-batch"]["copied_from"] == []  # nobody to compare with, nobody named
    # The lesson's printed example numbers are recorded as such for the instructor, never as a copy.
    printed = {p: _expected(p, questions.question_of(p).standard) for p in warmups}
    report, feedback = _score(tmp_path, "sl-ben", printed, points=points)
    assert report["flags"] == [] and report["tests"]["warmup2-ridge"]["lesson_numbers"] is True
    assert all(t["copied_from"] == [] for t in report["tests"].values())
    assert "lesson's printed example" in feedback[warmups.index("warmup2-ridge")]
    # One question's numbers alone are no evidence (they follow from each other).
    only = {p: ana[p] for p in ("warmup1-per-token", "warmup1-batch")}
    report, _ = _score(tmp_path, "sl-ben", only)
    assert report["tests"]["warmup1-batch"]["copied_from"] == [] and report["flags"] == []


def test_a_review_is_graded_on_the_students_own_numbers_and_the_fixed_keys_judgement(tmp_path):
    """Practice 1 and 4 with variants on: the numeric fields against the hand-in owner's numbers, the knob
    and verdict by the lesson's key, the lesson's points; the lesson's own numbers score only as far as
    they are the student's; a classmate's numbers are named for the instructor."""
    fixed = trusted.load_tests("lesson25")
    points = {g: fixed[g][1]["points"] for g in JUDGEMENT}

    def right(student):
        return {g: {**JUDGEMENT[g], **_expected(g, seeds.params_for(g, student, secret=SECRET))} for g in JUDGEMENT}

    report, feedback = _score(tmp_path, "sl-ana", right("sl-ana"), points=points)
    assert {g: t["points"] for g, t in report["tests"].items()} == points and report["flags"] == []
    mine = seeds.params_for("practice4", "sl-ana", secret=SECRET)
    assert f"gpus_per_node = {mine['gpus_per_node']}" in feedback[1] and "Worked solution:" in feedback[1]
    judged_wrong = {g: {**a, "verdict": "justified"} for g, a in right("sl-ana").items()}
    report, _ = _score(tmp_path, "sl-ana", judged_wrong, points=points)
    for g, t in report["tests"].items():
        assert t["points"] == pytest.approx(points[g] * (1 - 1 / len(fixed[g][1]["fields"]))), g
    # The lesson's own numbers: full marks where they are the student's, not otherwise.
    standard = {g: {**JUDGEMENT[g], **_expected(g, questions.question_of(g).standard)} for g in JUDGEMENT}
    report, _ = _score(tmp_path, "sl-ana", standard, points=points)
    for g, t in report["tests"].items():
        own = _expected(g, seeds.params_for(g, "sl-ana", secret=SECRET))
        assert (t["points"] == points[g]) is (own == _expected(g, questions.question_of(g).standard)), g
    # A classmate hands in sl-ana's reviews (their numbers hers, not his, in both): the flag names her.
    ana = right("sl-ana")
    ben = next(name for name in (f"sl-b{i}" for i in range(200)) if all(right(name)[g] != ana[g] for g in JUDGEMENT))
    report, feedback = _score(tmp_path, ben, ana, points=points, roster=("sl-ana", ben))
    assert report["tests"]["practice1-test"]["points"] < points["practice1-test"]
    assert report["tests"]["practice1-test"]["copied_from"] == ["sl-ana"]
    assert not any("sl-ana" in text for text in feedback)


def test_without_variants_the_grader_keeps_the_lessons_own_numbers(tmp_path):
    standard = questions.BY_ID["warmup1"].standard
    answers = {p: _expected(p, standard) for p in ("warmup1-per-token", "warmup1-batch")}
    report, feedback = _score(tmp_path, "sl-ben", answers, variants=False)
    assert all(t["points"] == 1 and "copied_from" not in t for t in report["tests"].values())
    assert not any("Your parameters" in text for text in feedback)


def test_the_solver_is_read_from_the_folder_the_grader_reads_every_key_from():
    assert grading.KEYS_DIR == Path(trusted.KEYS_DIR)


def test_a_class_turns_variants_on_for_its_grader_and_the_course_leaves_them_off(tmp_path):
    """What `servelab class up` writes for the instructors' nbgrader, read as nbgrader reads it, turns the
    variants on with the class's secret; the course's own config (a course graded offline) leaves them off."""
    from traitlets.config.loader import PyFileConfigLoader

    from servelab.classroom import hub

    settings = hub.ClassSettings(state=tmp_path / "class", instructors=["root"], students=["sl-ana"])
    (tmp_path / "nbgrader_config.py").write_text(hub.python_config(hub.nbgrader_settings(settings, "instructor")))
    scorer = trusted.ScoreAnswers(config=PyFileConfigLoader("nbgrader_config.py", str(tmp_path)).load_config())
    assert scorer.variants and scorer.variant_secret_file == str(settings.variant_secret)
    assert scorer.variant_roster == ["sl-ana"]  # copies are looked for among the whole class, graded or not
    assert settings.variant_secret.parent == settings.course_dir  # the instructors' alone (mode 700)
    assert "SERVELAB_VARIANT_SECRET_FILE" not in hub.lab_environment(settings, "student")
    course = PyFileConfigLoader("nbgrader_config.py", str(REPO_DIR / "grading")).load_config()
    assert not trusted.ScoreAnswers(config=course).variants


def test_an_answer_past_floats_range_or_of_the_wrong_sign_is_told_so_and_grading_does_not_fail():
    student = CLASS[0]
    own = _expected("warmup1-per-token", seeds.params_for("warmup1", student, secret=SECRET))
    huge = _check("warmup1-per-token", student, 10**400, roster=CLASS)
    assert huge.points == 0 and "not a finite number" in huge.feedback
    negative = _check("warmup1-per-token", student, -own, roster=CLASS)
    assert negative.points == 0 and "wrong sign" in negative.feedback and "factor of -" not in negative.feedback
    hand_in = {"warmup1-per-token": 10**400, "warmup2-ridge": 10**400}
    assert grading.Variants(SOLVER, SECRET).copy(student, hand_in, CLASS).classmate is None


def test_a_part_asked_to_three_figures_takes_any_answer_right_to_three_and_no_slip():
    """Warm-up 3's tokens per verify step and the break-even batch ask for three significant figures or more:
    every variant's answer rounded to three (or four) figures is right, whatever its leading digit, and no named
    slip nor an answer 1 % off is, rounded so too."""
    parts = questions.PARTS
    figured = [
        p
        for p, (q, _) in parts.items()
        if "figures" in grading.solution(p, q.generate(random.Random(0)), SOLVER)["key"]
    ]
    assert {"warmup3-tokens", "break-even-batch"} <= set(figured), figured
    for part_id in figured:
        question = parts[part_id][0]
        for n in range(SEEDS):
            key = grading.solution(part_id, question.generate(random.Random(n)), SOLVER)["key"]
            value, points = key["value"], key.get("points", 1)
            for written in (f"{value:.3g}", f"{value:.4g}", f"{value:.6g}"):
                assert checkers.number(float(written), key).points == points, (part_id, n, value, written)
            for wrong in [h["value"] for h in key["hints"]] + [value * 1.01, value * 0.99]:
                assert checkers.number(float(f"{wrong:.3g}"), key).points == 0, (part_id, n, value, wrong)


def test_a_count_of_tokens_or_sequences_is_right_rounded_either_way_and_no_slip_is():
    """The ridge in tokens (warm-up 2) and the batch where speculation reaches it are counts: a whole number
    either side is right, as "the tokens a step must carry" is read, for every variant; no named slip is."""
    import math

    for part_id in ("warmup2-tokens", "break-even-ridge-batch"):
        question = questions.PARTS[part_id][0]
        for n in range(SEEDS):
            key = grading.solution(part_id, question.generate(random.Random(n)), SOLVER)["key"]
            value, points = key["value"], key.get("points", 1)
            for whole in (math.floor(value), math.ceil(value), round(value)):
                assert checkers.number(whole, key).points == points, (part_id, n, value, whole)
            for hint in key["hints"]:
                assert checkers.number(hint["value"], key).points == 0, (part_id, n, value, hint)


def test_the_instructors_view_refuses_an_id_not_on_the_class_roster(tmp_path, capsys):
    import argparse

    secret_file = _secret_file(tmp_path / "secret")
    roster_file = tmp_path / "roster.txt"
    roster_file.write_text("sl-ana\nsl-ben\n")
    for roster in ("sl-ana,sl-ben", str(roster_file)):
        args = argparse.Namespace(student="sl-anna", secret_file=secret_file, roster=roster)
        assert lesson.run(args) == 2
        out = capsys.readouterr().out
        assert "not on the class's roster" in out and "warmup1" not in out
        assert lesson.run(argparse.Namespace(student="sl-ana", secret_file=secret_file, roster=roster)) == 0
        assert seeds.text_for("warmup1", "sl-ana", secret=SECRET) in capsys.readouterr().out


def test_the_instructors_view_reads_the_roster_written_beside_the_course_secret(tmp_path, capsys, monkeypatch):
    """`class up` writes the roster beside the secret, in the instructors' course folder; the class's class.json is
    root's (it holds the gradebook's password), so an instructor who cannot read it still has the roster."""
    import argparse

    secret_file = _secret_file(tmp_path / "course" / "variant-secret")
    state = tmp_path / "state"
    state.mkdir()
    (state / "class.json").write_text('{"students": ["sl-cat"]}')
    monkeypatch.setenv("SERVELAB_CLASS_STATE", str(state))
    assert lesson.roster_of(None) == ["sl-cat"]  # no secret named, none beside the default one: the class's
    assert lesson.roster_of(None, secret_file) is None  # a secret named: only the roster beside it is its course's
    written = lesson.write_roster(["sl-ana", "sl-ben"], secret_file)
    assert written == secret_file.with_name("roster") and oct(written.stat().st_mode & 0o777) == "0o600"
    assert lesson.roster_of(None, secret_file) == ["sl-ana", "sl-ben"]
    args = argparse.Namespace(student="sl-cat", secret_file=secret_file, roster=None, notebook=None, out=None)
    assert lesson.run(args) == 2 and "not on the class's roster" in capsys.readouterr().out
    # a roster named that is no text is a clear refusal, not a traceback
    bad = tmp_path / "roster.json"
    bad.write_text("[1, 2")
    args = argparse.Namespace(student="sl-ana", secret_file=secret_file, roster=str(bad), notebook=None, out=None)
    assert lesson.run(args) == 2 and "cannot be read" in capsys.readouterr().out
    # with no roster anywhere, the view says it checked no roster
    written.unlink()
    (state / "class.json").unlink()
    args = argparse.Namespace(student="anyone", secret_file=secret_file, roster=None, notebook=None, out=None)
    assert lesson.run(args) == 0 and "No class roster known" in capsys.readouterr().out


def test_an_id_that_is_no_file_name_needs_out_for_the_copy(tmp_path, capsys):
    import argparse

    secret_file = _secret_file(tmp_path / "variant-secret")
    released = tmp_path / "lesson25.ipynb"
    released.write_text("{}")
    args = argparse.Namespace(
        student="../sl-ana", secret_file=secret_file, roster="../sl-ana", notebook=released, out=None
    )
    assert lesson.run(args) == 2 and "pass --out" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lesson25.ipynb", "variant-secret"]


def test_every_variant_is_a_deployment_that_exists_over_5000_seeds():
    """The KV cache a question's batch holds fits one node of 8 H200s beside the weights; a review of a
    tensor-parallel setting is one of 35 (two given students share one about one time in 35: its two small
    integers are all it has to vary), each a degree vLLM would accept for some model's heads."""
    node = 8 * 141e9  # one node of 8 H200s, 141 GB each (datasheet)
    worst = {"warmup1-batch": 0.0, "capacity-context-all": 0.0}
    practice4 = set()
    for n in range(5000):
        rng = random.Random(n)
        worst["warmup1-batch"] = max(worst["warmup1-batch"], _expected("warmup1-batch", questions.warmup1(rng)))
        gb = _expected("capacity-context-all", questions.capacity_context(rng))
        worst["capacity-context-all"] = max(worst["capacity-context-all"], gb * 1e9)
        practice4.add(tuple(sorted(questions.practice4(rng).items())))
    assert all(v <= min(node, questions.NODE_KV_BYTES) for v in worst.values()), worst
    assert len(practice4) >= 35, len(practice4)
    assert all(dict(p)["tensor_parallel_size"] in questions.TENSOR_PARALLEL_DEGREES for p in practice4)


def _student_notebook():
    import nbformat

    from servelab.grading import course

    return nbformat.read(course.get("lesson25").student, as_version=4)


def test_the_lesson_states_each_variant_question_once_with_its_own_numbers_between_the_markers():
    """What a learner on their own reads is the lesson's example, stated by the same text a student's copy is
    written with (questions.render_stated): a stale or hand-edited block fails here."""
    found: dict[str, list[str]] = {}
    for cell in _student_notebook().cells:
        for qid, text in lesson.blocks(cell.source):
            assert cell.cell_type == "markdown" and "nbgrader" not in cell.metadata, cell.source[:80]
            found.setdefault(qid, []).append(text)
    reveals = [f"{q}{questions.REVEAL}" for q in lesson.LESSON_QUESTIONS if questions.BY_ID[q].reveal]
    assert reveals and sorted(found) == sorted([*lesson.LESSON_QUESTIONS, *reveals]), sorted(found)
    for qid, texts in found.items():
        stated = questions.render_block(qid, questions.BY_ID[questions.block_question(qid)].standard)
        assert len(texts) == 1 and " ".join(texts[0].split()) == " ".join(stated.split()), (
            f"{qid}: grading/source/lesson25/lesson25.py states {' '.join(texts[0].split())!r} between its markers, "
            f"the lesson's numbers read {stated!r} (servelab.variants.questions); edit one, then run make notebooks"
        )


def test_a_students_copy_states_their_numbers_in_the_questions_and_nothing_else_changes():
    import copy

    released = _student_notebook()
    mine = {q: p for q, p in seeds.all_params("student07", secret=SECRET).items() if q in lesson.LESSON_QUESTIONS}
    theirs = copy.deepcopy(released)
    assert sorted(lesson.personalise(theirs, mine)) == sorted(lesson.LESSON_QUESTIONS)
    text = "\n".join(c.source for c in theirs.cells)
    for qid, params in mine.items():
        assert questions.render_stated(qid, params) in text, qid
    w1 = mine["warmup1"]
    assert f"a batch of {w1['batch']} sequences of {w1['tokens_per_sequence']:,} tokens" in text
    assert questions.practice1_reveal(mine["practice1"]) in text  # the reveal works their case
    changed = [i for i, (a, b) in enumerate(zip(released.cells, theirs.cells)) if a.source != b.source]
    assert len(changed) == len(lesson.LESSON_QUESTIONS) + 1  # each question's cell, and practice 1's reveal
    for i in changed:  # outside the markers each changed cell is the lesson's, word for word
        outside = lesson.BLOCK.sub("", theirs.cells[i].source)
        assert " ".join(outside.split()) == " ".join(lesson.BLOCK.sub("", released.cells[i].source).split())
        assert "nbgrader" not in theirs.cells[i].metadata
    # Numbers a question cannot be stated with, or none, leave that question as the lesson states it.
    odd = copy.deepcopy(released)
    assert lesson.personalise(odd, {"warmup1": {"layers": 3}, "warmup2": "x", "nope": {}}) == []
    assert [c.source for c in odd.cells] == [c.source for c in released.cells]


def test_practice_1s_reveal_works_the_students_case_whether_it_misses_or_meets_its_target():
    missed = {"users": 20, "max_num_seqs": 256, "target_ms": 500, "measured_ms": 1200}
    assert questions.practice1_reveal(missed).startswith(
        "Take 20 users under `max-num-seqs` 256, missing a 500 ms p99 TTFT target with 1,200 ms: 256 and 32 "
    )
    met = questions.practice1_reveal({"users": 64, "max_num_seqs": 128, "target_ms": 1500, "measured_ms": 900})
    assert "meeting a 1,500 ms p99 TTFT target with 900 ms: 128 and 64 schedule" in met and "missing" not in met
    for n in range(SEEDS):  # the smaller cap still holds every user, and is smaller than theirs
        p = questions.practice1(random.Random(n))
        smaller = int(re.search(r"and (\d+) schedule", questions.practice1_reveal(p))[1])
        assert p["users"] <= smaller < p["max_num_seqs"], p


def test_personalise_file_leaves_a_notebook_alone_without_numbers(tmp_path):
    import nbformat

    path = tmp_path / "lesson25.ipynb"
    nbformat.write(_student_notebook(), str(path))
    before = path.read_bytes()
    assert lesson.personalise_file(path, {}) == []
    assert path.read_bytes() == before
    mine = {"practice4": {"gpus_per_node": 8, "tensor_parallel_size": 24}}
    assert lesson.personalise_file(path, mine) == ["practice4"]
    written = nbformat.read(str(path), as_version=4)
    nbformat.validate(written)
    assert '"tensor parallelism: 24-way, on 8 GPUs."' in "\n".join(c.source for c in written.cells)


def test_the_instructor_writes_any_students_copy_of_the_lesson(tmp_path, capsys, monkeypatch):
    """The copy goes where the instructor is (or --out), 0600, never beside the released notebook: nbgrader
    releases that whole folder, and would hand the student's copy to the class."""
    import argparse

    import nbformat

    secret_file = _secret_file(tmp_path / "variant-secret")
    (tmp_path / "release").mkdir()
    released = tmp_path / "release" / "lesson25.ipynb"
    nbformat.write(_student_notebook(), str(released))
    here = tmp_path / "instructor"
    here.mkdir()
    monkeypatch.chdir(here)
    parser = argparse.ArgumentParser()
    lesson.add_arguments(parser)
    args = parser.parse_args(
        [
            "show",
            "student05",
            "--secret-file",
            str(secret_file),
            "--roster",
            ",".join(CLASS),
            "--notebook",
            str(released),
        ]
    )
    assert lesson.run(args) == 0
    out = here / "lesson25-student05.ipynb"
    assert "state student05's numbers" in capsys.readouterr().out
    assert [p.name for p in released.parent.iterdir()] == ["lesson25.ipynb"] and stat.S_IMODE(
        out.stat().st_mode
    ) == 0o600
    text = "\n".join(c.source for c in nbformat.read(str(out), as_version=4).cells)
    for qid in lesson.LESSON_QUESTIONS:
        assert questions.render_stated(qid, seeds.params_for(qid, "student05", secret=SECRET)) in text, qid


def test_a_numbers_file_nested_past_the_parsers_depth_is_none_to_read(tmp_path):
    """A student owns ~/.servelab: a file they made there nested 100,000 deep reads as no numbers (the lesson's
    own are stated), never a RecursionError that stops their fetch."""
    deep = tmp_path / "lesson25.json"
    deep.write_text("[" * 100_000)
    assert lesson.mine(deep) == {}
    assert lesson.numbers("warmup1", deep) == questions.BY_ID["warmup1"].standard
