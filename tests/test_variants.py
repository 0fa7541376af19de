"""Numbers of one's own (lib/variants.py): each student's variant is drawn from their name alone,
every variant of every varied exercise keeps its answer and named mistakes apart, and check()
grades a student copy against that student's numbers."""

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from lib import variants
from lib.checks import check, exercises, grade
from lib.value_grading import tolerance

VARIED = [e for e in exercises().values() if getattr(e, "params", ())]
CHAPTERS = sorted(Path(__file__).parent.parent.joinpath("chapters").glob("*.ipynb"))  # appendices ask questions too


def every_variant(exercise):
    names = [p.name for p in exercise.params]
    for values in itertools.product(*(p.choices for p in exercise.params)):
        chosen = dict(zip(names, values, strict=True))
        yield chosen, variants.exercise_in(exercise, chosen)


def same_answer(a, b, atol=1e-8, rtol=1e-5) -> bool:
    """Whether two answers are the same: the same shape (a variant's answer may be longer than the book's,
    and a mistake need not have the answer's shape) and close entry by entry."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, atol=atol, rtol=rtol))


def test_same_answer_tells_shapes_apart():
    assert same_answer([1, 0], [1, 0]) and not same_answer([1, 0], [1, 0, 0]) and not same_answer([1], 1)
    assert not same_answer([[1, 1]], [1, 1]) and not same_answer([1, 1, 1], [1])  # no broadcasting


def test_some_exercises_are_varied():
    assert VARIED, "no value exercise declares params"


@pytest.mark.parametrize("exercise", VARIED, ids=lambda e: e.id)
def test_the_book_shows_the_defaults(exercise):
    made = exercise.make(**variants.defaults(exercise))
    assert made.id == exercise.id and made.question == exercise.question
    assert same_answer(made.expected, exercise.expected)
    assert [w.feedback for w in made.wrong_answers] == [w.feedback for w in exercise.wrong_answers]


@pytest.mark.parametrize("exercise", VARIED, ids=lambda e: e.id)
def test_every_variant_accepts_its_answer_and_names_each_mistake_apart(exercise):
    for chosen, variant in every_variant(exercise):
        assert grade(variant, variant.expected).correct, variant.question
        rule = tolerance(variant)
        points = [variant.expected] + [w.value for w in variant.wrong_answers]
        for i, a in enumerate(points):
            for b in points[i + 1 :]:
                assert not same_answer(a, b, atol=2 * rule.atol, rtol=rule.rtol), (variant.question, a, b)
        for wrong in variant.wrong_answers:
            # (a mistake of another shape than the answer is never named: the grader reads it as misshapen)
            assert grade(variant, wrong.value).mistake == wrong.feedback, (variant.question, wrong.value)
        for param in exercise.params:  # the question shows the numbers the answer is computed from
            assert param.shown(chosen[param.name]) in variant.question, (param.name, variant.question)


def test_a_name_always_draws_the_same_numbers_and_two_names_mostly_differ():
    assert variants.variant_for("ada") == variants.variant_for("ada") == variants.variant_for(" ada ")
    names = [f"student{i}" for i in range(30)]
    drawn = [variants.variant_for(n) for n in names]
    differing = [sum(a[i] != b[i] for i in a) / len(a) for a, b in itertools.combinations(drawn, 2)]
    assert np.mean(differing) > 0.6, np.mean(differing)
    for one in drawn:  # a variant never hands out the book's own numbers for a whole exercise
        for exercise in VARIED:
            assert one[exercise.id] != variants.defaults(exercise)


def test_bad_names_and_values_are_refused():
    with pytest.raises(ValueError, match="variant name"):
        variants.variant_for("  ")
    exercise = VARIED[0]
    with pytest.raises(ValueError, match="no param"):
        variants.exercise_in(exercise, {"nope": 1})
    with pytest.raises(ValueError, match="is not one of"):
        variants.exercise_in(exercise, {exercise.params[0].name: 10**9})
    with pytest.raises(ValueError, match="default"):
        variants.Param("x", 5, (1, 2))


def test_each_chapter_question_writes_its_numbers_as_substitutions_with_the_book_defaults():
    defaults = variants.substitutions(None)
    found = {}
    for chapter in CHAPTERS:
        notebook = json.loads(chapter.read_text())
        text = "".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
        for key, value in notebook["metadata"].get("myst", {}).get("substitutions", {}).items():
            assert "{{ " + key + " }}" in text, (chapter.name, key)
            found[key] = value
    assert found == defaults


def test_check_grades_a_copy_against_its_students_numbers(tmp_path, monkeypatch):
    monkeypatch.delenv(variants.VARIANT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    own = {name: variants.exercises_for(name) for name in ("ada", "grace")}
    book = exercises()
    for exercise in VARIED:
        ada, grace = own["ada"][exercise.id], own["grace"][exercise.id]
        (tmp_path / variants.VARIANT_FILE).write_text("ada\n")
        assert check(exercise.id, ada.expected).correct
        if not same_answer(ada.expected, grace.expected, atol=2 * tolerance(ada).atol):
            assert not check(exercise.id, grace.expected).correct  # a classmate's answer is wrong for you
        (tmp_path / variants.VARIANT_FILE).unlink()
        assert check(exercise.id, book[exercise.id].expected).correct  # the book's numbers outside a copy
        monkeypatch.setenv(variants.VARIANT_ENV, "grace")
        assert check(exercise.id, grace.expected).correct
        monkeypatch.delenv(variants.VARIANT_ENV)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapters_copy_asks_each_student_their_own_numbers(chapter, tmp_path):
    """A student's copy of a chapter is the book's text with that student's numbers written into
    every question (nothing left as {{ }}); two students' copies differ wherever a question is varied."""
    import nbformat

    from lib.student import make_student_copy

    book = nbformat.read(chapter, as_version=4)
    varied = {c.id: c.source for c in book.cells if c.cell_type == "markdown" and "{{ ex_" in c.source}
    texts = {}
    for name in ("ada", "grace"):
        copy, _ = make_student_copy(chapter, tmp_path / name, variant=name)
        cells = {c.id: c.source for c in nbformat.read(copy, as_version=4).cells if c.cell_type == "markdown"}
        numbers = variants.substitutions(name)
        assert all("{{ ex_" not in source for source in cells.values())
        for cell_id, source in varied.items():
            assert cells[cell_id] == variants.render(source, numbers), (name, cell_id)
        texts[name] = [cells[cell_id] for cell_id in varied]
    differing = sum(a != b for a, b in zip(texts["ada"], texts["grace"], strict=True))
    assert differing >= 0.6 * len(varied), (differing, len(varied))


def test_no_student_is_handed_the_books_answer_and_classmates_mostly_differ():
    """A hostile batch handed in the book's answers and scored where a student's numbers gave the
    book's answer; and copied a classmate who had drawn the same numbers."""
    names = [f"student{i}" for i in range(40)]
    answers = {name: variants.exercises_for(name) for name in names}
    for exercise in VARIED:
        for name in names:
            assert not same_answer(answers[name][exercise.id].expected, exercise.expected, atol=1e-9), (
                exercise.id,
                name,
            )
    same = [
        np.mean([same_answer(answers[a][e.id].expected, answers[b][e.id].expected) for e in VARIED])
        for a, b in itertools.combinations(names, 2)
    ]
    assert np.mean(same) < 0.25, np.mean(same)  # a classmate's answer is wrong for you in most exercises
