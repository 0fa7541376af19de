"""lib.answer_records: in a grading run check() records answers as data (numbers as .npy, a
function's bytes, the line that says why an answer is not numbers), and the grader reads them
back without pickle, dropping anything check() could not have made."""

import json

import cloudpickle
import numpy as np
import torch

from lib import answer_records
from lib.answer_records import KINDS_FILE, RECORD_ENV, read_records
from lib.checks import check
from lib.grading import INCORRECT, RECORDED


def _recording(tmp_path, monkeypatch):
    (tmp_path / KINDS_FILE).write_text(json.dumps({"1.equal-scores": "value", "1.stable-softmax": "function"}))
    monkeypatch.setenv(RECORD_ENV, str(tmp_path))


def test_check_records_answers_as_data_and_grades_nothing(tmp_path, monkeypatch):
    _recording(tmp_path, monkeypatch)
    told = check("1.equal-scores", torch.tensor([1.0, 2.0]))
    assert told.status == RECORDED and "recorded for the grader" in told.message
    check("1.equal-scores", "one, two")
    check("1.equal-scores", ...)
    check("1.stable-softmax", lambda scores: scores.softmax(-1))
    check("1.stable-softmax", 3)
    unknown = check("1.equal-score", [1, 2])  # a typo: nothing recorded, and a suggestion
    assert unknown.status == INCORRECT and "did you mean '1.equal-scores'" in unknown.message
    records = read_records(tmp_path)
    assert [(r["id"], r["answer"]) for r in records] == [
        ("1.equal-scores", "numbers"),
        ("1.equal-scores", "problem"),
        ("1.equal-scores", "none"),
        ("1.stable-softmax", "function"),
        ("1.stable-softmax", "not a function"),
    ]
    assert records[0]["numbers"].tolist() == [1.0, 2.0]
    assert records[1]["problem"].startswith("expected numbers but got the text 'one, two'")
    assert cloudpickle.loads(records[3]["pickle"])(torch.zeros(2)).tolist() == [0.5, 0.5]
    assert records[4]["type"] == "int"


def test_the_grader_drops_what_check_could_not_have_made(tmp_path, monkeypatch):
    _recording(tmp_path, monkeypatch)
    answer_records.record(tmp_path, "1.equal-scores", [1, 2], "value", "request-1")
    np.save(tmp_path / "pickled.npy", np.array([object()]), allow_pickle=True)  # an object array: pickle inside
    forged = {
        "00900.json": {"id": "1.equal-scores", "request": "r", "answer": "numbers", "file": "pickled.npy"},
        "00901.json": {"id": "1.equal-scores", "request": "r", "answer": "numbers", "file": "missing.npy"},
        "00902.json": {"id": 3, "request": "r", "answer": "none"},
        "00903.json": "not a record",
    }
    for name, entry in forged.items():
        (tmp_path / name).write_text(json.dumps(entry))
    (tmp_path / "00904.json").symlink_to(tmp_path / "00900.json")
    (tmp_path / "00905.json").write_text("{cut off")
    records = read_records(tmp_path)
    assert [(r["id"], r["request"], r["answer"]) for r in records] == [("1.equal-scores", "request-1", "numbers")]


def test_read_plain_refuses_what_a_sandbox_could_leave_instead_of_a_file(tmp_path):
    import os

    import pytest

    from lib.answer_records import read_plain

    (tmp_path / "file").write_bytes(b"0123456789")
    assert read_plain(tmp_path / "file", 10) == b"0123456789"
    assert read_plain(tmp_path / "file", 4, whole=False) == b"0123"
    with pytest.raises(OSError, match="over the 4"):
        read_plain(tmp_path / "file", 4)
    os.mkfifo(tmp_path / "fifo")  # opening it for reading would wait for a writer forever
    with pytest.raises(OSError, match="not a regular file"):
        read_plain(tmp_path / "fifo", 10)
    (tmp_path / "link").symlink_to(tmp_path / "file")
    with pytest.raises(OSError):
        read_plain(tmp_path / "link", 10)


def test_forged_records_cannot_stall_or_flood_the_grader(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(answer_records, "MAX_TOTAL_BYTES", 3 * 8 * 1000 + 3 * 128)
    os.mkfifo(tmp_path / "00001.json")  # a FIFO where a record should be: skipped, not waited on
    for n in range(2, 8):  # six answers of 8 kB each: the first three fit the budget
        np.save(tmp_path / f"{n:05d}.npy", np.zeros(1000), allow_pickle=False)
        entry = {"id": "1.equal-scores", "request": "r", "answer": "numbers", "file": f"{n:05d}.npy"}
        (tmp_path / f"{n:05d}.json").write_text(json.dumps(entry))
    os.mkfifo(tmp_path / "00009.npy")
    entry = {"id": "1.equal-scores", "request": "r", "answer": "numbers", "file": "00009.npy"}
    (tmp_path / "00009.json").write_text(json.dumps(entry))
    records = read_records(tmp_path)
    assert [r["answer"] for r in records] == ["numbers"] * 3 + ["problem"] * 3
    assert "too large in all" in records[-1]["problem"]
