"""The class report: real gradings record the slips; a class of 60 with known slips gives them back exactly.

Seven sample submissions are graded for real through the pipeline's steps (the sandbox, the
checkers in trusted.py, nbgrader's SaveAutoGrades): that proves the recording end to end. The
class of 60 is made from lesson 25's four graded ones by grading.replicate (each one's grades
and record copied through nbgrader's Gradebook API), in a known mix, so every proportion on
the page is known before the report runs. About a minute on 2 cores, most of it the gradings.
"""

import csv
import io
import json
import math
import re
import runpy
import shutil
from fractions import Fraction
from types import SimpleNamespace

import pytest

from servelab import cli
from servelab.classroom import report
from servelab.grading import course, pipeline, replicate, samples, trusted

LESSON = course.get("lesson25")
GRADED = {
    "lesson25": ["perfect", "partial", "near_misses", "empty"],
    "lab25": ["perfect", "conclusion_contradicts"],
    "knoblab": ["perfect"],
}
MIX = {"perfect": 24, "partial": 18, "near_misses": 12, "empty": 6}  # the class of 60
N = sum(MIX.values())
# The slips each sample makes (samples.py says which slip each of its wrong answers is), by test.
SLIPS = {
    "partial": {
        "warmup1-per-token": {"kv-once", "no-bytes-per-value"},  # 65536: half, in bf16 both slips land there
        "warmup1-batch": {"kv-once"},
        "warmup3-tokens": {"all-accepted"},
        "practice1-test": {"verdict", "useful_batch_limit", "cap_explains_miss"},
        "practice2-missing": {"picked-gpu_count", "missed-on_off_measurement", "missed-slo_metric"},
        "practice5-test": {"chose-c"},
        # gpu_memory_utilization repeats the parallelism fault, so it is graded once, under parallelism: no slip of its own
        "rep1-test": {"batching-justified"},
        "rep3-test": {"no-drift-metric", "no-drift-trigger"},
    },
    "near_misses": {
        "warmup3-tokens": {"a-times-k"},
        "practice1-test": {"verdict", "cap_explains_miss"},
        "rep1-test": {"batching-no-reason"},  # "this looks fine to me" names no fact of the config
        "rep3-test": {"no-downstream-told", "no-canary"},  # a two-hour canary sees no daily peak
    },
}
EXPECTED = json.loads(samples.EXPECTED.read_text())
# The lesson's sample answers and what each earns (grading/samples/lesson25.py, instructor-only).
LESSON25_SAMPLES = SimpleNamespace(**runpy.run_path(str(samples.DEFINITIONS / "lesson25.py")))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A course with the GRADED samples graded for real, one nbgrader autograde each, in the sandbox."""
    root = course.make(tmp_path_factory.mktemp("class-report") / "course")
    subs = root.parent / "submissions"
    for name, students in GRADED.items():
        assignment = course.get(name)
        (subs / name).mkdir(parents=True)
        for student in students:
            shutil.copy(samples.SUBMISSIONS / name / f"{student}.ipynb", subs / name / f"{student}.ipynb")
        made = course.nbgrader(root, "generate_assignment", name, "--force", timeout=300)
        assert made.returncode == 0, made.stderr[-2000:]
        pipeline.collect(root, assignment, subs / name)
        for student in students:
            g = pipeline.grade_submission(root, assignment, student, cell_timeout=10, submission_timeout=240)
            assert g.status == "graded" and g.score == pytest.approx(EXPECTED[name][student]), (
                name,
                student,
                g.log_tail,
            )
    return root


@pytest.fixture(scope="module")
def lesson_class(graded, tmp_path_factory):
    """The class of 60: a copy of the graded course with lesson 25's samples copied to MIX students."""
    root = tmp_path_factory.mktemp("class-of-60") / "course"
    shutil.copytree(graded, root)
    mix = [(f"s{i:02d}_{kind}", kind) for i, kind in enumerate(k for k, n in MIX.items() for _ in range(n))]
    replicate.replicate(root, f"sqlite:///{root / 'gradebook.db'}", LESSON, mix)
    return root


# The sample class as `make grade` grades it: 11 lesson submissions, 7 of them the partial sample's score pattern
# (partial and the six hostile hand-ins built on it), two full ones, near_misses and empty: 4 score patterns.
SAMPLE_MIX = {"partial": 7, "perfect": 2, "near_misses": 1, "empty": 1}


@pytest.fixture(scope="module")
def sample_class(graded, tmp_path_factory):
    root = tmp_path_factory.mktemp("sample-class") / "course"
    shutil.copytree(graded, root)
    mix = [(f"s{i:02d}_{kind}", kind) for i, kind in enumerate(k for k, n in SAMPLE_MIX.items() for _ in range(n))]
    replicate.replicate(root, f"sqlite:///{root / 'gradebook.db'}", LESSON, mix)
    return root


def test_the_grader_records_each_tests_slips_and_whether_an_answer_came(graded):
    def record(student):
        path = graded / trusted.REPORT_DIR / "lesson25" / student / "lesson25.json"
        return json.loads(path.read_text())["tests"]

    partial, perfect, empty = record("partial"), record("perfect"), record("empty")
    for grade_id, slips in SLIPS["partial"].items():
        assert set(partial[grade_id]["slips"]) == slips, grade_id
    assert partial["warmup1-per-token"]["answer"] == "65536"
    assert "K and V" in partial["warmup1-batch"]["slips"]["kv-once"]
    assert all(not t["slips"] and t["answered"] for t in perfect.values())
    assert all(not t["answered"] and not t["slips"] and t["points"] == 0 for t in empty.values())
    lab = json.loads(
        (graded / trusted.REPORT_DIR / "lab25" / "conclusion_contradicts" / "spec_decode_lab.json").read_text()
    )["tests"]
    assert set(lab["rep2-test"]["slips"]) == {"against-own-pick"}


def test_a_class_of_60_gives_back_its_slips_proportions_exactly(lesson_class):
    r = report.build("lesson25", lesson_class)
    assert r.submissions == N
    by_id = {q.question.grade_id: q for q in r.questions}
    for grade_id in {g for slips in SLIPS.values() for g in slips}:
        want = Counter_of(grade_id)
        got = {s.slip: s for s in by_id[grade_id].slips}
        assert set(got) == set(want), grade_id
        for slip, count in want.items():
            assert got[slip].count == count and Fraction(got[slip].share).limit_denominator(N) == Fraction(count, N)
    for q in r.questions:
        if q.question.autograded:
            assert q.blank == MIX["empty"], q.question.grade_id
            assert q.graded == N
    # means from the samples' own expected points
    perfect_points = {q.question.grade_id: q.question.max_points for q in r.questions if q.question.autograded}
    partial = LESSON25_SAMPLES.LESSON25_PARTIAL_POINTS
    for grade_id, full in perfect_points.items():
        near = full - LESSON25_SAMPLES.LESSON25_NEAR_MISS_LOSSES.get(grade_id, 0)
        # the grader writes each test's points rounded to 3 decimals (trusted.ScoreAnswers)
        mean = (MIX["perfect"] * full + MIX["partial"] * round(partial[grade_id], 3) + MIX["near_misses"] * near) / N
        assert by_id[grade_id].mean == pytest.approx(mean), grade_id


def max_points():
    return {g: key.get("points", 1) for g, (_, key) in trusted.load_tests("lesson25").items()}


def Counter_of(grade_id):
    counts = {}
    for kind, tests in SLIPS.items():
        for slip in tests.get(grade_id, ()):
            counts[slip] = counts.get(slip, 0) + MIX[kind]
    return counts


def test_the_discrimination_index_matches_a_hand_computation(lesson_class):
    # warmup1-per-token is right (1) for perfect and near_misses, wrong (0) for partial and empty.
    # Point-biserial by its textbook formula: (M1 - M0) / s * sqrt(p q), s the population SD of the rest.
    totals = {k: EXPECTED["lesson25"][k] for k in MIX}
    item = {"perfect": 1, "near_misses": 1, "partial": 0, "empty": 0}
    rest = [totals[k] - item[k] for k in MIX for _ in range(MIX[k])]
    right = [totals[k] - item[k] for k in ("perfect", "near_misses") for _ in range(MIX[k])]
    wrong = [totals[k] - item[k] for k in ("partial", "empty") for _ in range(MIX[k])]
    p = len(right) / N
    mean = sum(rest) / N
    s = math.sqrt(sum((x - mean) ** 2 for x in rest) / N)
    by_hand = (sum(right) / len(right) - sum(wrong) / len(wrong)) / s * math.sqrt(p * (1 - p))
    r = report.build("lesson25", lesson_class)
    q = next(q for q in r.questions if q.question.grade_id == "warmup1-per-token")
    assert q.discrimination == pytest.approx(by_hand, abs=1e-9)


def test_discrimination_waits_for_hand_grading_on_the_autograded_points_only(tmp_path):
    qs = [
        report.Question("a", "nb", 1.0, True),
        report.Question("b", "nb", 4.0, True),
        report.Question("essay", "nb", 5.0, False),
    ]
    b = [4, 1, 3, 0, 2]
    essay = [5, None, 0, None, 5]  # two still to be graded by a person
    subs = [report.Submission(f"s{i}", {"a": float(i % 2 == 0), "b": float(b[i]), "essay": essay[i]}) for i in range(5)]
    data = report.ClassData("x", qs, subs, [])
    a = report.question_stats(data)[0]
    assert a.discrimination == pytest.approx(report.point_biserial([1, 0, 1, 0, 1], b))
    r = report.ClassReport(
        "x", 5, 10.0, 0.0, report.question_stats(data), [], 0, False, hand_grading_done=report.hand_grading_done(data)
    )
    assert "Hand\n  grading is not complete" in report.render_html(r, tmp_path)
    for s, score in zip(subs, [5, 1, 0, 2, 5]):
        s.points["essay"] = float(score)
    assert report.hand_grading_done(data)
    want = report.point_biserial([1, 0, 1, 0, 1], [x + e for x, e in zip(b, [5, 1, 0, 2, 5])])
    assert report.question_stats(data)[0].discrimination == pytest.approx(want) != pytest.approx(a.discrimination)


def test_point_biserial_on_a_small_case_and_without_spread():
    # Five students: item 1 0 1 0 1, rest 8 3 7 5 6. M1 = 7, M0 = 4, p = 0.6,
    # population SD of the rest = sqrt(14.8 / 5) = 1.720465, so r = 3 / 1.720465 * 0.489898 = 0.854242.
    assert report.point_biserial([1, 0, 1, 0, 1], [8, 3, 7, 5, 6]) == pytest.approx(0.854242, abs=1e-6)
    assert report.point_biserial([1, 1, 1], [3, 5, 9]) is None  # everyone right: no index
    assert report.point_biserial([1, 0, 1], [4, 4, 4]) is None
    assert report.point_biserial([1], [4]) is None


def test_the_reteach_list_is_the_costliest_three_with_their_lesson_sections(lesson_class, tmp_path):
    # An answer's lost points are shared equally among the slips named on it; a slip's, summed over its questions.
    lost, where, who, order = {}, {}, {}, [q for q in trusted.load_tests("lesson25")]
    points = {
        "partial": LESSON25_SAMPLES.LESSON25_PARTIAL_POINTS,
        "near_misses": {g: m - LESSON25_SAMPLES.LESSON25_NEAR_MISS_LOSSES.get(g, 0) for g, m in max_points().items()},
    }
    for kind, tests in SLIPS.items():
        for grade_id, slips in tests.items():
            for slip in slips:
                share = MIX[kind] * (max_points()[grade_id] - points[kind][grade_id]) / len(slips)
                lost[slip] = lost.get(slip, 0) + share
                where.setdefault(slip, set()).add(grade_id)
                who.setdefault(slip, set()).add(kind)
    count = {slip: sum(MIX[k] for k in kinds) for slip, kinds in who.items()}
    want = sorted(lost, key=lambda k: (-round(lost[k], 6), -count[k], min(order.index(g) for g in where[k]), k))[:3]
    r = report.build("lesson25", lesson_class)
    assert [s.slip for s in r.reteach] == want
    assert [s.points_lost for s in r.reteach] == [pytest.approx(lost[k]) for k in want]
    assert [set(s.grade_ids) for s in r.reteach] == [where[k] for k in want]
    assert [s.count for s in r.reteach] == [count[k] for k in want]
    md = report.reteach_markdown(r, tmp_path)
    for s in r.reteach:
        assert s.sections == list(dict.fromkeys(report.TEACHES[g] for g in s.grade_ids))
        assert report.lesson_link(s.section, tmp_path, r.lesson) in md
    assert (
        r.lesson == lesson_class / "release" / "lesson25" / "lesson25.ipynb"
    )  # inside the course: JupyterLab serves it


def test_one_slip_on_two_questions_is_one_entry_ranked_by_its_total():
    def slip(grade_id, name, lost, who):
        return report.SlipStats(
            grade_id, name, name, len(who), 1.0, lost, "", 0, section=report.TEACHES[grade_id], made_by=frozenset(who)
        )

    def question(grade_id, *slips):
        return report.QuestionStats(report.Question(grade_id, "lesson25", 1.0, True), 4, 0.5, {}, 0, None, list(slips))

    stats = [
        question(
            "warmup1-per-token",
            slip("warmup1-per-token", "kv-once", 0.75, "ab"),
            slip("warmup1-per-token", "no-bytes-per-value", 1.0, "cd"),
        ),
        question("warmup1-batch", slip("warmup1-batch", "kv-once", 0.75, "bc")),
        question("practice5-test", slip("practice5-test", "chose-c", 1.0, "abcd")),
    ]
    got = report.reteach(stats)
    assert [(r.slip, r.points_lost, r.count, r.grade_ids) for r in got] == [
        ("kv-once", 1.5, 3, ["warmup1-per-token", "warmup1-batch"]),
        ("chose-c", 1.0, 4, ["practice5-test"]),
        ("no-bytes-per-value", 1.0, 2, ["warmup1-per-token"]),
    ]
    assert got[0].sections == [report.RECAP] and got[1].section == report.PRIMARY_SOURCE


def test_the_pages_lesson_links_open_jupyterlab_at_the_section(tmp_path):
    lesson = tmp_path / "home" / "my course" / "release" / "lesson25" / "lesson25.ipynb"
    lesson.parent.mkdir(parents=True)
    lesson.write_text("{}")
    assert (
        report.lab_link(report.RECAP, lesson, "/user/ada/", tmp_path / "home")
        == "/user/ada/lab/tree/my%20course/release/lesson25/lesson25.ipynb#Recap:-what-this-lesson-leans-on"
    )
    assert report.lab_link(report.RECAP, lesson, "http://localhost:8888", tmp_path / "home").startswith(
        "http://localhost:8888/lab/tree/my%20course/"
    )
    assert report.lab_link(report.RECAP, lesson, "/", tmp_path / "elsewhere") is None
    data = one_question_class(["2 GB"] * 3, [])
    stats = report.question_stats(data)
    for root, want in ((tmp_path / "home", 'href="/user/ada/lab/tree/my%20course/'), (tmp_path / "x", 'href="../')):
        r = report.ClassReport(
            "lesson25", 3, 1.0, 0.0, stats, report.reteach(stats), 0, False, lesson, lab_url="/user/ada/", lab_root=root
        )
        page = report.render_html(r, tmp_path / "out")
        assert want in page
        in_lab = root.name == "home"
        assert ('target="_blank" rel="noopener">lesson25.ipynb' in page) == in_lab == ("new JupyterLab tab" in page)


def test_every_question_links_to_a_heading_of_the_lesson():
    nb = json.loads(report.LESSON.read_text())
    headings = {
        line.lstrip("#").strip()
        for c in nb["cells"]
        if c["cell_type"] == "markdown"
        for line in "".join(c["source"]).splitlines()
        if line.startswith("#")
    }
    assert set(report.TEACHES.values()) <= headings
    for name in GRADED:
        assert set(trusted.load_tests(name)) <= set(report.TEACHES), name


def test_hand_graded_cells_show_their_distribution_once_every_one_is_graded(lesson_class, tmp_path):
    from nbgrader.api import Gradebook

    root = tmp_path / "course"
    shutil.copytree(lesson_class, root)
    q = lambda r: next(q for q in r.questions if q.question.grade_id == "warmup1-explain")  # noqa: E731
    assert q(report.build("lesson25", root)).mean is None  # only the 6 unanswered ones are graded (0) so far
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        students = sorted(s.student.id for s in gb.find_assignment("lesson25").submissions)
        for i, student in enumerate(students):
            grade = gb.find_grade("warmup1-explain", "lesson25", "lesson25", student)
            grade.manual_score = float(i % 2)
        gb.db.commit()
    stats = q(report.build("lesson25", root))
    assert stats.distribution == {0.0: N // 2, 1.0: N // 2}
    assert not stats.question.autograded


def test_nothing_identifies_a_student_unless_names(lesson_class, tmp_path):
    page = report.render_html(report.build("lesson25", lesson_class), tmp_path)
    assert not re.search(r"s\d\d_(perfect|partial|near_misses|empty)", page)
    named = report.build("lesson25", lesson_class, names=True)
    assert "s30_partial" in report.render_html(named, tmp_path)
    assert "s30_partial" in report.render_csv(named)
    assert "s30_partial" not in report.render_csv(report.build("lesson25", lesson_class))


def one_question_class(answers, identities, slip="kv-once", about="K and V <counted> once"):
    """A class of len(answers) on one 1-point question, each answer recorded as the grader records it
    (JSON text, non-ASCII escaped), every one wrong with `slip`: students st0, st1, ..."""
    q = report.Question("warmup1-batch", "lesson25", 1.0, True)
    subs = [
        report.Submission(
            f"st{i}",
            {q.grade_id: 0.0},
            {q.grade_id: {"points": 0.0, "slips": {slip: about}, "answered": True, "answer": json.dumps(a)}},
        )
        for i, a in enumerate(answers)
    ]
    return report.ClassData("lesson25", [q], subs, identities)


def page_of(data, tmp_path):
    stats = report.question_stats(data)
    return report.render_html(
        report.ClassReport("lesson25", len(data.submissions), 1.0, 0.0, stats, report.reteach(stats), 0, False),
        tmp_path,
    ), stats


def test_a_hostile_answer_is_escaped_and_anonymised(tmp_path):
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)> ada_l wrote this, with bo_k; \u202egnp.exe"
    data = one_question_class([hostile] * 3, [("ada_l", "Ada", "Lovelace", "ada@example.edu"), "bo_k"])
    data.submissions[0].student, data.submissions[1].student = "ada_l", "bo_k"  # each wrote their own id
    page, _ = page_of(data, tmp_path)
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "K and V &lt;counted&gt; once" in page
    assert "ada_l" not in page and "bo_k" not in page and "\u202e" not in page
    assert "[a student] wrote this, with [a student]" in page


def test_names_the_grader_escaped_are_found_and_a_lone_answer_is_never_shown(tmp_path):
    ids = [("jmuller", "José", "Müller", "jose.m@example.edu"), ("asmith", "Alice", "Smith")]
    # The grader records json.dumps(answer): "Jos\u00e9 M\u00fcller", "peak\nAlice\nasmith".
    assert report.answer_text(json.dumps("José Müller")) == "José Müller"
    assert report.answer_text(json.dumps({"k": "Zü"})) == '{"k": "Zü"}'
    assert report.answer_text('"cut off by the grader, Jos\\u00e9') == '"cut off by the grader, José'
    assert report.answer_text("[" * 100_000) == "[" * 100_000  # too deep: the text itself, no RecursionError
    scrub = report._scrubber(one_question_class([], ids))
    assert scrub("Ada Lovelace") == "Ada Lovelace"  # a name no student has
    assert scrub(report.answer_text(json.dumps("peak\nAlice\nasmith"))) == "peak [a student] [a student]"
    assert scrub("JOSE MULLER, jo\u200bse.m wrote it") == "[a student] [a student], [a student].m wrote it"
    assert scrub("Smith chart") == "[a student] chart"
    # three gave the same answer (spelt three ways): shown, scrubbed; the one-off answer never is
    answers = ["José Müller: 2 GB", "jose muller:  2 GB", "JOSÉ MÜLLER: 2 GB", "Alice asmith 7"]
    page, stats = page_of(one_question_class(answers, ids), tmp_path)
    assert stats[0].slips[0].example == "[a student] [a student]: 2 GB" and stats[0].slips[0].example_count == 3
    assert "asmith" not in page and "Alice" not in page and "Jos" not in page and "M&#252;ller" not in page
    page, stats = page_of(one_question_class(["Alice asmith 7", "José 3", "x"], ids), tmp_path)
    assert stats[0].slips[0].example == "" and "7" not in stats[0].slips[0].example
    assert f"no example shown: fewer than {report.EXAMPLE_MIN_STUDENTS} students gave the same answer" in page


def test_an_id_that_is_a_number_or_the_classs_word_does_not_rewrite_the_examples(tmp_path):
    ids = [("32",), ("Batching",), ("no",), ("zed_q",)]
    answers = ["no: 2.32 GB, batching"] * 3 + ["no batching here"] * 2 + ["zed_q says no"]
    data = one_question_class(answers, ids)
    data.submissions[-1].student = "zed_q"
    scrub = report._scrubber(data)
    # 32 is a number; batching and no are in the answers of at least K other students: the class's words
    assert scrub("no: 2.32 GB, Batching; zed_q") == "no: 2.32 GB, Batching; [a student]"
    assert report.question_stats(data)[0].slips[0].example == "no: 2.32 GB, batching"
    # a name only one other student wrote stays a name
    assert report._scrubber(one_question_class(["ask zed_q"], ids))("zed_q") == "[a student]"


def test_a_crafted_record_counts_as_none_and_never_stops_the_report(tmp_path):
    import os

    folder = tmp_path / "course" / trusted.REPORT_DIR / "lesson25"
    good = {"tests": {"q1": {"points": 1, "slips": {}, "answered": True, "answer": '"caf\\ud800"'}}}
    records = {
        "list": "[]",
        "null": "null",
        "deep": "[" * 100_000 + "]" * 100_000,
        "good": json.dumps(good),
        "bytes": "\udcff",
        "big": " " * (report.RECORD_BYTES + 1),
    }
    for student, text in records.items():
        (folder / student).mkdir(parents=True)
        (folder / student / "lesson25.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    (folder / "fifo").mkdir()
    os.mkfifo(folder / "fifo" / "lesson25.json")  # a plain open would wait for a writer forever
    (folder / "link").mkdir()
    (folder / "link" / "lesson25.json").symlink_to(folder / "good" / "lesson25.json")
    (folder / "linked").symlink_to(folder / "good")  # another student's folder
    read = {
        st: report._read_record(tmp_path / "course", "lesson25", st, "lesson25")
        for st in [*records, "fifo", "link", "linked"]
    }
    assert read.pop("good")["q1"]["answer"] == '"caf\\ud800"'  # the JSON text; its decoding is answer_text's
    assert read == {st: None for st in read}
    assert report._read_record(tmp_path / "course", "lesson25", "nobody", "lesson25") == {}
    # a lone surrogate the decoded answer holds cannot stop the page or the CSV being written whole
    data = one_question_class(["caf\ud800"] * 3, [], about="K and V \ud800")
    stats = report.question_stats(data)
    r = report.ClassReport("lesson25", 3, 1.0, 0.0, stats, report.reteach(stats), 1, False, unreadable_record=1)
    page, table = report.write(r, tmp_path / "out")
    assert "caf?" in page.read_text() and "K and V ?" in table.read_text()
    assert "1 of them because the record there could not be read" in page.read_text()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([page.name, table.name])  # no temporary


def test_a_record_outside_the_reports_folder_is_not_read(tmp_path):
    (tmp_path / "secret.json").write_text(json.dumps({"tests": {"q1": {"points": 1}}}))
    assert report._read_record(tmp_path / "course", "lesson25", "../..", "secret") == {}


def test_the_csv_holds_the_numbers_and_no_formula(lesson_class):
    rows = list(csv.DictReader(io.StringIO(report.render_csv(report.build("lesson25", lesson_class)))))
    kv = next(r for r in rows if r["grade_id"] == "warmup1-batch" and r["slip"] == "kv-once")
    assert int(kv["students_with_slip"]) == MIX["partial"] and float(kv["share"]) == MIX["partial"] / N
    cells = ('=HYPERLINK("a")', "-cmd", "-1.5", "@x", "plain", 3, "\n=1+1", "\t=1", "\r@")
    assert [report.csv_cell(v) for v in cells] == [
        '\'=HYPERLINK("a")',
        "'-cmd",
        "-1.5",
        "'@x",
        "plain",
        3,
        "'\n=1+1",
        "'\t=1",
        "'\r@",
    ]
    assert report.shown_id("\u202eevil\u200b\n=1") == "evil=1" and report.shown_id("\u202e") == "?"


def test_the_labs_reports(graded, tmp_path):
    lab = report.build("lab25", graded)
    rep2 = next(q for q in lab.questions if q.question.grade_id == "rep2-test")
    assert [(s.slip, s.count) for s in rep2.slips] == [("against-own-pick", 1)]
    assert any(not q.question.autograded for q in lab.questions)  # the fix, graded by a person
    knob = report.build("knoblab", graded)
    assert knob.submissions == 1 and knob.reteach == []


def test_the_command_writes_the_page_and_the_csv(lesson_class, tmp_path, capsys):
    assert cli.main(["class", "report", "lesson25", "--course", str(lesson_class), "--out", str(tmp_path)]) == 0
    assert "60 submissions of lesson25" in capsys.readouterr().out
    page = (tmp_path / "lesson25-class-report.html").read_text()
    assert "cdn" not in page.lower().split("<script>")[0] and 'src="http' not in page
    assert (tmp_path / "lesson25-class-report.csv").exists()
    assert cli.main(["class", "report", "nosuch", "--course", str(lesson_class), "--out", str(tmp_path)]) == 2
    assert "no assignment 'nosuch'" in capsys.readouterr().err
    assert cli.main(["class", "report", "lesson25", "--course", str(tmp_path / "nowhere")]) == 2
    assert "No gradebook at" in capsys.readouterr().err and not (tmp_path / "nowhere").exists()


def test_the_page_says_which_gradebook_and_refuses_another_courses(lesson_class, tmp_path, monkeypatch, capsys):
    assert report.shown_url("postgresql://grader:s3cret@db:5432/class") == "postgresql://grader:***@db:5432/class"
    # a course with the class's gradebook but none of its grader records: blanks are unknown, not 0
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(lesson_class / "gradebook.db", bare / "gradebook.db")
    r = report.build("lesson25", bare)
    assert all(q.blank is None for q in r.questions if q.question.autograded)
    page = report.render_html(r, tmp_path)
    assert f"Read from the gradebook <code>sqlite:///{bare / 'gradebook.db'}</code>" in page
    assert '<td class="n">unknown</td>' in page and ",unknown," in report.render_csv(r)
    # records there, but none for this gradebook's students: another course's gradebook
    (bare / trusted.REPORT_DIR / "lesson25" / "someone_else").mkdir(parents=True)
    with pytest.raises(report.ClassError, match="that gradebook is not this course's"):
        report.build("lesson25", bare)
    # both a course gradebook and SERVELAB_GRADEBOOK_URL: the page and the command say which is read
    monkeypatch.setenv("SERVELAB_GRADEBOOK_URL", f"sqlite:///{lesson_class / 'gradebook.db'}")
    assert cli.main(["class", "report", "lesson25", "--course", str(lesson_class), "--out", str(tmp_path)]) == 0
    assert f"(SERVELAB_GRADEBOOK_URL, not {lesson_class / 'gradebook.db'})" in capsys.readouterr().out


@pytest.mark.browser
@pytest.mark.slow
def test_the_page_opens_offline_reads_its_reteach_list_and_passes_axe(lesson_class, tmp_path):
    from browser_helpers import WCAG_TAGS, axe_audit, require_axe, require_chromium

    require_chromium()
    require_axe()
    from playwright.sync_api import sync_playwright

    r = report.build("lesson25", lesson_class)
    page_path, _ = report.write(r, tmp_path)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            online = []
            page.route(
                "**/*",
                lambda route: (
                    route.continue_()
                    if route.request.url.startswith("file:")
                    else (online.append(route.request.url), route.abort())
                ),
            )
            page.goto(page_path.as_uri())
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
            items = page.locator("#reteach li").all_inner_texts()
            assert len(items) == 3
            for item, slip in zip(items, r.reteach):
                assert f"{slip.count} of {N} students" in item and slip.section in item
            assert online == []
            # every node of the report is this project's, and best practice is held too
            violations = axe_audit(page, "body", WCAG_TAGS + ["best-practice"])
            assert violations == [], json.dumps(violations, indent=1)[:3000]
        finally:
            browser.close()


def test_the_instructor_notebook_runs_the_report(lesson_class, tmp_path, monkeypatch, capsys):
    """The notebook's one cell, as it is, on the sample course where `make grade` leaves it (grading/course:
    here a graded class in its place) for an instructor with no hub course in their home."""
    import jupytext

    from servelab.grading import pipeline

    nb = jupytext.read(report.REPO_DIR / "class" / "report.py")
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert len(code) == 2 and "COURSE = report.default_course()" in code[0]
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(pipeline, "COURSE", lesson_class)
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(code[0], scope)
    assert scope["COURSE"] == lesson_class
    shown = scope["Markdown"](report.reteach_markdown(scope["built"], tmp_path)).data
    assert shown.startswith("**What to re-teach in lesson25** (60 submissions)")
    assert (lesson_class / "class-reports" / "lesson25-class-report.html").exists()
    # Its second cell shows a student's numbers once STUDENT names one on the class's roster.
    exec(code[1], scope)  # no student named: it says what to set
    secret = tmp_path / "course-secret" / "variant-secret"
    secret.parent.mkdir()
    secret.write_text("ab" * 32 + "\n")
    secret.chmod(0o600)
    (secret.parent / "roster").write_text("ada\nbo\n")
    monkeypatch.setenv("SERVELAB_VARIANT_SECRET_FILE", str(secret))
    from servelab.variants import lesson, seeds

    capsys.readouterr()
    exec(code[1].replace('STUDENT = ""', 'STUDENT = "bo"'), scope)
    assert capsys.readouterr().out.strip() == lesson.instructor_view("bo", secret=seeds.course_secret(secret))
    with pytest.raises(lesson.NotOnRoster):
        exec(code[1].replace('STUDENT = ""', 'STUDENT = "cy"'), scope)


def test_the_default_course_is_the_hubs_then_the_checkouts_then_a_clear_error(tmp_path, monkeypatch):
    from servelab.grading import pipeline

    home, checkout = tmp_path / "home", tmp_path / "checkout" / "grading" / "course"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(pipeline, "COURSE", checkout)
    with pytest.raises(report.ClassError, match="make grade"):
        report.default_course()
    course.make(checkout)
    assert report.default_course() == checkout
    course.make(home / "servelab")
    assert report.default_course() == home / "servelab"


def test_checkers_name_their_slips_beside_the_points_and_feedback():
    from servelab.grading import checkers, keys

    result = checkers.number(65536, keys.kv_bytes_per_token("Llama-3.1-8B"))
    points, feedback = result  # still a (points, feedback) pair
    assert points == 0 and set(result.slips) == {"kv-once", "no-bytes-per-value"}
    assert checkers.number(131072, keys.kv_bytes_per_token("Llama-3.1-8B")).slips == {}
    assert checkers.number(99, keys.kv_bytes_per_token("Llama-3.1-8B")).slips == {}  # wrong, but no known slip
    tests = trusted.load_tests("lesson25")
    assert set(checkers.choice("c", tests["practice5-test"][1]).slips) == {"chose-c"}
    assert set(checkers.yes_no(False, tests["warmup3-bound"][1]).slips) == {"said-false"}
    assert set(checkers.selection(["batch_size", "gpu_count"], tests["practice2-missing"][1]).slips) == {
        "picked-gpu_count",
        "missed-bottleneck",
        "missed-on_off_measurement",
        "missed-slo_metric",
    }
    assert checkers.choice("zz", tests["practice5-test"][1]).slips == {}  # a malformed answer is not a slip
    assert set(checkers.rollout_plan({}, {"points": 5}).slips) == set(checkers.ROLLOUT_SLIPS)  # an empty plan
    assert set(checkers.measured_comparison({}, {"points": 4}).slips) == {"not-a-comparison"}


def test_a_small_class_says_it_is_too_small_to_judge_with_each_questions_interval(sample_class, tmp_path):
    """On the sample class the index is 0.84-0.85 on many questions only because of the one empty submission:
    the report shows each interval, says no question can be judged and why, and calls none of them good."""
    r = report.build("lesson25", sample_class)
    assert r.submissions == 11 and r.patterns == 4 and r.too_small
    auto = [q for q in r.questions if q.question.autograded and q.index.value is not None]
    high = [q for q in auto if 0.8 < q.discrimination < 0.9]
    assert len(high) >= 5  # what the bare index said
    for q in auto:
        assert not q.index.judged and q.index.low <= q.discrimination <= q.index.high, q.question.grade_id
        assert q.verdict.startswith("too few or too alike to judge (95% interval"), q.verdict
        assert "only 4 different score patterns, fewer than 10" in q.verdict
    # the empty submission carries those: without it they have no spread
    assert all(q.index.moved_by_one and q.index.without_one is None for q in high)
    assert all("leaving one submission out leaves no spread" in q.verdict for q in high)
    html, _ = report.write(r, tmp_path)
    page = " ".join(html.read_text().split())
    assert "too small or too alike to judge its questions by discrimination" in page
    assert "11 submissions with 4 different score patterns (fewer than 10" in page
    assert "separates the class" not in page
    rows = list(csv.DictReader(io.StringIO(report.render_csv(r))))
    row = next(row for row in rows if row["grade_id"] == high[0].question.grade_id and not row["slip"])
    assert float(row["discrimination_low"]) <= float(row["discrimination"]) <= float(row["discrimination_high"])
    assert float(row["sd"]) == pytest.approx(high[0].sd, abs=1e-4)


def test_the_class_of_60_copies_of_four_samples_is_too_alike_too(lesson_class):
    r = report.build("lesson25", lesson_class)
    assert r.submissions == 60 and r.patterns == 4 and r.too_small


def large_class(n=200, seed=7):
    """n students of spread ability; questions that follow it, go against it, ignore it, that nearly all or
    nearly none get."""
    import random

    rng = random.Random(seed)
    ability = [rng.random() for _ in range(n)]
    names = [f"follows{i}" for i in range(8)] + ["against", "coin", "easy", "none"]
    qs = [report.Question(g, "nb", 1.0, True) for g in names]
    subs = []
    for i, a in enumerate(ability):
        points = {f"follows{j}": float(a + rng.gauss(0, 0.15) > 0.2 + 0.08 * j) for j in range(8)}
        points["against"] = float(a + rng.gauss(0, 0.1) < 0.5)
        points["coin"] = float(rng.random() < 0.5)
        points["easy"] = float(i >= 3)  # all but three
        points["none"] = float(i < 3)  # three
        subs.append(report.Submission(f"s{i:03d}", points))
    return report.ClassData("x", qs, subs, [])


def test_a_large_class_judges_each_question_and_flags_those_that_need_a_look(tmp_path):
    data = large_class()
    stats = {q.question.grade_id: q for q in report.question_stats(data)}
    assert report.score_patterns(data) >= report.MIN_PATTERNS
    for j in range(8):
        q = stats[f"follows{j}"]
        assert q.index.judged and report.DISCRIMINATION_MIN < q.index.low <= q.discrimination <= q.index.high
        assert q.index.high - q.index.low < 0.3 and q.flags == [] and q.verdict.startswith("separates the class")
    against = stats["against"]
    assert against.index.judged and against.index.high < 0
    assert against.flags and against.flags[0].startswith("negative discrimination")
    assert against.verdict.startswith("low (95% interval")
    coin = stats["coin"]
    assert coin.index.low < report.DISCRIMINATION_MIN and "low discrimination (below 0.20)" in coin.flags
    assert stats["easy"].flags == ["nearly everyone scored full points (mean above 95%)"]
    assert stats["none"].flags[0].startswith("nearly nobody scored (mean below 5%)")
    # the SD is the sample SD of the question's points
    easy = [s.points["easy"] for s in data.submissions]
    m = sum(easy) / len(easy)
    assert stats["easy"].sd == pytest.approx(math.sqrt(sum((x - m) ** 2 for x in easy) / (len(easy) - 1)))
    r = report.ClassReport(
        "x", 200, 12.0, 0.0, list(stats.values()), [], 0, False, patterns=report.score_patterns(data)
    )
    assert not r.too_small
    page = " ".join(report.render_html(r, tmp_path).split())
    assert "too small or too alike" not in page and "PrairieLearn" in page
    assert "<strong>Needs a look:</strong> negative discrimination" in page


def test_the_flags_follow_prairielearns_thresholds():
    def stats(mean, value, low=0.5, high=0.9):
        q = report.QuestionStats(report.Question("q", "nb", 2.0, True), 100, mean, {}, 0, value)
        q.index = report.Discrimination(value, low, high)
        return q

    assert stats(1.0, 0.5).flags == []
    assert stats(1.0, 0.1, 0.0, 0.3).flags == ["low discrimination (below 0.20)"]
    assert "negative discrimination" in stats(1.0, -0.3, -0.5, -0.1).flags[0]
    assert stats(1.0, -0.3, -0.5, -0.1).verdict.startswith("low (95% interval -0.5 to -0.1)")
    assert stats(1.95, 0.1).flags == ["nearly everyone scored full points (mean above 95%)"]  # low index acceptable
    assert "nearly nobody scored" in stats(0.05, 0.5).flags[0]
    assert stats(1.0, 0.5, 0.3, 0.7).verdict == "separates the class (95% interval 0.3 to 0.7)"
    assert stats(1.0, 0.3, 0.1, 0.5).verdict.startswith("uncertain: the interval spans 0.20")


def test_the_discrimination_interval_is_a_seeded_bootstrap_that_the_one_outlier_cannot_hide():
    # ten students alike on the question and the rest, one who scored nothing: the index is 1 by that one alone
    xs, ys = [1.0] * 10 + [0.0], [5.0, 6.0] * 5 + [0.0]
    d = report.discrimination(xs, ys)
    assert d.value == pytest.approx(report.point_biserial(xs, ys)) and d.value > 0.8
    assert d.moved_by_one and d.without_one is None and not d.judged
    assert d.undefined == pytest.approx((10 / 11) ** 11, abs=0.05)  # resamples without the outlier: no spread
    assert report.discrimination(xs, ys) == d  # the same interval every run
    # a spread-out class of 200 whose question follows the rest: judged, interval around the point
    rest = [float(i % 20) for i in range(200)]
    item = [1.0 if r >= 10 else 0.0 for r in rest]
    item[:10] = [1 - x for x in item[:10]]  # a few who do not follow
    d = report.discrimination(item, rest)
    assert d.judged and d.low < d.value < d.high and d.low > report.DISCRIMINATION_MIN


def test_an_example_is_shortened_between_words():
    text = "the cap is not the cause because the cache holds both K and V for every token " * 4
    short = report.shorten(text, report.EXAMPLE_CHARS)
    assert len(short) <= report.EXAMPLE_CHARS and short.endswith("…")
    assert text.startswith(short[:-1]) and text[len(short) - 1] == " "  # the cut falls before a space
    assert report.shorten("x" * 400, 20) == "x" * 19 + "…"  # one long token: cut at the limit
    assert report.shorten("short answer", 20) == "short answer"


def test_a_long_slip_description_in_a_record_is_cut_between_words(tmp_path):
    about = "You counted one tensor per layer: the cache holds both K and V, so multiply by two. " * 12
    folder = tmp_path / "course" / trusted.REPORT_DIR / "lesson25" / "s1"
    folder.mkdir(parents=True)
    record = {"tests": {"q1": {"points": 0, "slips": {"kv-once": about}, "answered": True, "answer": '"1"'}}}
    (folder / "lesson25.json").write_text(json.dumps(record))
    shown = report._read_record(tmp_path / "course", "lesson25", "s1", "lesson25")["q1"]["slips"]["kv-once"]
    assert len(shown) <= 600 and shown.endswith("…") and about.startswith(shown[:-1])
    assert about[len(shown) - 1] in " ,.;:" or shown[-2] in ".,;:"  # no word is cut


# --------------------------------------------------------------------------- variant questions

VARIANT_SECRET = b"0123456789abcdef0123456789abcdef-report-course"


def variant_class(n, points_of, secret=VARIANT_SECRET):
    """n students (v00, v01, ...) on warmup1's two parts and warmup3's three, each part's points
    points_of(question, student, params): the params are the student's, from their id and the secret."""
    from servelab.variants import BY_ID, params_for

    qs = [report.Question(p.id, "lesson25", 1.0, True) for q in ("warmup1", "warmup3") for p in BY_ID[q].parts]
    subs = []
    for i in range(n):
        student = f"v{i:02d}"
        points = {}
        for q in ("warmup1", "warmup3"):
            score = points_of(q, student, params_for(q, student, secret=secret), i)
            points.update({p.id: score for p in BY_ID[q].parts})
        subs.append(report.Submission(student, points))
    return report.ClassData("lesson25", qs, subs, [])


@pytest.mark.unit
def test_a_variant_range_that_scores_lower_is_reported_harder_and_an_even_one_is_not(tmp_path):
    from servelab.variants import params_for

    n = 40
    tokens = sorted(params_for("warmup1", f"v{i:02d}", secret=VARIANT_SECRET)["tokens_per_sequence"] for i in range(n))
    cut = tokens[(n - 1) // 2]

    def points_of(q, student, params, i):
        if q == "warmup1":  # the long contexts get it wrong (a byte count past 2^31, say), but one
            return 0.0 if params["tokens_per_sequence"] > cut and i != 39 else 1.0
        return float(i % 3 != 0)  # warmup3: two students in three right, whatever their batch

    data = variant_class(n, points_of)
    stats = {v.question: v for v in report.variant_stats(data, VARIANT_SECRET, names=True)}
    assert set(stats) == {"warmup1", "warmup3"}  # the questions this assignment grades, and only those
    w1 = stats["warmup1"]
    low, high = w1.groups

    # grouped by the parameters the secret gives each id: the split params_for gives
    def split(secret):
        values = {f"v{i:02d}": params_for("warmup1", f"v{i:02d}", secret=secret) for i in range(n)}
        ordered = sorted(v["tokens_per_sequence"] for v in values.values())
        return sorted(s for s, v in values.items() if v["tokens_per_sequence"] <= ordered[(n - 1) // 2])

    assert low.students == split(VARIANT_SECRET) and low.n + high.n == n
    assert high.label.startswith("tokens_per_sequence ") and w1.harder == high.label
    assert high.mean < 0.2 < 0.8 < low.mean and low.low <= low.mean <= low.high
    assert w1.difference[0] > 0 and w1.verdict.startswith(f"{high.label} is harder: mean")
    w3 = stats["warmup3"]
    assert w3.harder is None and w3.verdict.startswith("no range is clearly harder")
    assert w3.difference[0] < 0 < w3.difference[1]
    # another course secret gives other variants, so another grouping: the params come from id and secret
    another = b"another-course-secret-of-32-bytes!!"
    other = report.variant_stats(variant_class(n, points_of), another, names=True)[0]
    assert other.groups[0].students == split(another) != low.students
    r = report.ClassReport("lesson25", n, 5.0, 0.0, [], [], 0, False, variants=list(stats.values()))
    page = " ".join(report.render_html(r, tmp_path).split())
    assert 'id="variants-heading"' in page and f"{high.label} is harder" in page
    assert f"(`warmup1`): {report._md(high.label)} is harder" in report.variants_markdown(r)
    assert report.variants_markdown(report.ClassReport("lesson25", n, 5.0, 0.0, [], [], 0, False)) == ""
    rows = [row for row in csv.DictReader(io.StringIO(report.render_csv(r))) if row["kind"] == "variant range"]
    assert len(rows) == 4 and {row["range"] for row in rows[:2]} == {low.label, high.label}
    assert float(rows[1]["range_low"]) <= float(rows[1]["range_mean"]) <= float(rows[1]["range_high"])


@pytest.mark.unit
def test_a_class_of_three_is_too_small_to_judge_its_variant_ranges():
    data = variant_class(3, lambda q, s, params, i: float(i == 0))
    for v in report.variant_stats(data, VARIANT_SECRET):
        assert v.harder is None and v.difference is None
        assert v.verdict.startswith("too few or too alike to judge ("), v.verdict
        assert f"fewer than {report.VARIANT_MIN_GROUP} in a range" in v.verdict or "same value" in v.verdict


@pytest.mark.unit
def test_the_groups_follow_the_parameter_low_and_high_or_by_value():
    halves = report.variant_groups({"a": 10, "b": 20, "c": 30, "d": 40, "e": 40})
    assert halves == [("10 to 30", ["a", "b", "c"]), ("40 to 40", ["d", "e"])]
    assert report.variant_groups({"a": "fp8", "b": "bfloat16", "c": "fp8"}) == [
        ("= bfloat16", ["b"]),
        ("= fp8", ["a", "c"]),
    ]
    assert report.variant_groups({"a": 2, "b": 4, "c": 2}) == [("= 2", ["a", "c"]), ("= 4", ["b"])]


@pytest.mark.unit
def test_without_variants_the_report_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVELAB_VARIANT_SECRET_FILE", str(tmp_path / "none"))
    assert report.course_variant_secret() is None
    data = variant_class(12, lambda q, s, params, i: 1.0)
    assert report.variant_stats(data, None) == [] and report.copied_answers(data) == []
    stats = report.question_stats(data)
    r = report.ClassReport("lesson25", 12, 5.0, 5.0, stats, report.reteach(stats), 0, False)
    page = report.render_html(r, tmp_path)
    assert "Variant questions" not in page and "variants-heading" not in page
    assert next(csv.reader(io.StringIO(report.render_csv(r)))) == list(report.CSV_FIELDS)
    # a secret there, read (never made) as the grader reads it: the variant section's input
    secret = tmp_path / "secret"
    secret.write_text("f" * 64 + "\n")
    secret.chmod(0o600)
    monkeypatch.setenv("SERVELAB_VARIANT_SECRET_FILE", str(secret))
    assert report.course_variant_secret() == b"f" * 64


@pytest.mark.unit
def test_an_answer_flagged_copied_from_is_listed_and_names_only_with_names(tmp_path):
    folder = tmp_path / "course" / trusted.REPORT_DIR / "lesson25"
    tests = {
        "warmup1-batch": {"points": 0, "slips": {}, "answered": True, "answer": "1", "copied_from": ["v07", "v09"]},
        "warmup1-per-token": {"points": 0, "slips": {}, "answered": True, "answer": "2", "copied_from": {"x": 1}},
        "warmup3-tokens": {"points": 1, "slips": {}, "answered": True, "answer": "3", "copied_from": [5, ""]},
    }
    (folder / "v03").mkdir(parents=True)
    (folder / "v03" / "lesson25.json").write_text(json.dumps({"tests": tests}))
    record = report._read_record(tmp_path / "course", "lesson25", "v03", "lesson25")
    assert [record[g]["copied_from"] for g in tests] == [["v07", "v09"], [], []]  # only a list of ids is one
    data = variant_class(12, lambda q, s, params, i: 1.0)
    data.submissions[3].tests = record
    copied = report.copied_answers(data)
    assert copied == [report.CopiedAnswer("warmup1-batch", "v03", ("v07", "v09"))]
    for names in (False, True):
        r = report.ClassReport("lesson25", 12, 5.0, 5.0, [], [], 0, names, copied=copied)
        page = " ".join(report.render_html(r, tmp_path).split())
        assert "Answers that fit a classmate's variant" in page and "1 answers missed their own variant" in page
        assert ("v03" in page and "v07, v09" in page) == names and ("v07" in page) == names
        shown = report.variants_markdown(r)
        assert "1 answers fit a classmate's variant" in shown and ("v03" in shown) == names
        assert shown.endswith("v07, v09" if names else "2 classmates")


@pytest.mark.unit
def test_ranges_that_differ_by_chance_alone_are_not_called_harder_across_the_questions(monkeypatch):
    """300 students scoring 0 or 1 at random on every part of the 11 variant questions: at 95% each, one of the
    11 comparisons (capacity-sessions, on this seed) calls a range harder; read together, none does."""
    import random

    from servelab.variants import QUESTIONS

    qs = [report.Question(p.id, "lesson25", 1.0, True) for q in QUESTIONS for p in q.parts]
    rng = random.Random(10)  # a seed whose scores make one uncorrected comparison call a range harder
    subs = [report.Submission(f"s{i:03d}", {q.grade_id: float(rng.random() < 0.6) for q in qs}) for i in range(300)]
    data = report.ClassData("lesson25", qs, subs, [])
    stats = report.variant_stats(data, VARIANT_SECRET)
    assert len(stats) == len(QUESTIONS)
    assert [v.question for v in stats if v.harder] == []
    assert all("% interval over 11 questions" in v.verdict for v in stats)
    each = report._verdict
    monkeypatch.setattr(report, "_verdict", lambda groups, draws, compared: each(groups, draws, 1))
    assert [v.question for v in report.variant_stats(data, VARIANT_SECRET) if v.harder] == ["capacity-sessions"]


@pytest.mark.unit
def test_the_commands_summary_cuts_a_long_slip_between_words(tmp_path, monkeypatch, capsys):
    """`servelab class report` prints each re-teach item in one line: a long description ends at a word, with "…"."""
    about = (
        "Reads the KV cache as one tensor for K and V together, so weight each token's bytes by one, not two, "
        "and the budget comes out twice what fits"
    )
    item = report.Reteach("kv-once", about, 7, 5.5, ["warmup3-tokens", "warmup3-batch"], ["The checklist"])
    built = report.ClassReport("lesson25", 12, 5.0, 3.0, [], [item], 0, False, gradebook="sqlite:///g.db")
    monkeypatch.setattr(report, "build", lambda *a, **k: built)
    monkeypatch.setattr(report, "write", lambda r, out: (out / "page.html", out / "table.csv"))
    assert cli.main(["class", "report", "lesson25", "--course", str(tmp_path), "--out", str(tmp_path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  re-teach 1: "))
    shown = line.removeprefix("  re-teach 1: ").split(" (warmup3-tokens, warmup3-batch, 7 students")[0]
    assert shown.endswith("…") and len(shown) <= 90, line
    assert about.startswith(shown[:-1]) and about[len(shown) - 1] == " ", line  # a whole word, then the cut
    assert line.endswith("5.5 points) -> The checklist")
