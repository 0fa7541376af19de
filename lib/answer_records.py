"""Answers as data: what ``check()`` records in a grading run, and how the grader reads it back.

In a grading run (``lib.grading_process`` sets ``RECORD_ENV`` to a folder) ``check()`` grades
nothing in the kernel: the answer key is not there to grade with. It records the answer in
that folder and says so. A value leaves as plain numbers (an ``.npy`` file, read back without
pickle), or as the one line that says why it is not numbers; a function leaves by value, with
what it needs from the notebook (``cloudpickle``), and is only ever loaded again in a sandbox
(``lib.hidden_runs``), never by the grader. Each record names the exercise, the request that
ran the cell (which says which cell recorded it) and its kind::

    00003.json   {"id": "1.longer-query", "request": "...", "answer": "numbers", "file": "00003.npy"}
    00004.json   {"id": "1.stable-softmax", "request": "...", "answer": "function", "file": "00004.pkl"}

The grader writes ``exercises.json`` there first: each exercise's id and kind, nothing more,
so that ``check()`` knows what to record without the answer key.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "RECORD_ENV",
    "KINDS_FILE",
    "recording_folder",
    "exercise_kinds",
    "record",
    "read_records",
    "read_plain",
    "encode_output",
    "decode_output",
]

RECORD_ENV = "LIB_CHECKS_RECORD"
KINDS_FILE = "exercises.json"
VALUE, FUNCTION = "value", "function"
MAX_RECORDS = 2000  # a notebook that records more (a loop over candidates) keeps its first ones
MAX_FILE_BYTES = 20 * 1024**2  # an answer larger than this is not read back
MAX_TOTAL_BYTES = 64 * 1024**2  # nor are answers past this much in all (a notebook can forge records)
_counter = itertools.count(1)


def recording_folder() -> Path | None:
    """The folder check() records answers in during a grading run, else None."""
    folder = os.environ.get(RECORD_ENV)
    return Path(folder) if folder else None


def exercise_kinds(folder: Path) -> dict[str, str]:
    """Every exercise's id and kind ("value" or "function"), as the grader wrote them."""
    try:
        kinds = json.loads((folder / KINDS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return kinds if isinstance(kinds, dict) else {}


def _payload(answer: Any, kind: str, base: Path) -> dict[str, str]:
    """Write the answer's data beside its record; what the record says of it."""
    from lib.safe_call import GradingTimeout, call_with_timeout, describe_error, read_numbers

    if answer is ... or answer is None:
        return {"answer": "none"}
    if kind == FUNCTION:
        if not callable(answer):
            return {"answer": "not a function", "type": type(answer).__name__[:80]}
        import cloudpickle

        try:
            data = call_with_timeout(cloudpickle.dumps, (answer,), 10.0)
        except (Exception, SystemExit, GeneratorExit, GradingTimeout) as error:  # the learner's objects pickle
            return {
                "answer": "problem",
                "problem": f"could not send your function to the grader ({describe_error(error)})",
            }
        base.with_suffix(".pkl").write_bytes(data)
        return {"answer": "function", "file": base.with_suffix(".pkl").name}
    try:  # reading a value runs the learner's code (__array__, __len__): timed, as check() times it
        numbers, problem = call_with_timeout(read_numbers, (answer,), 2.0)
    except GradingTimeout:
        numbers, problem = None, "could not read the answer as numbers within 2 s (does its __array__ or __len__ loop?)"
    if numbers is None:
        return {"answer": "problem", "problem": problem}
    np.save(base.with_suffix(".npy"), numbers, allow_pickle=False)
    return {"answer": "numbers", "file": base.with_suffix(".npy").name}


def record(folder: Path, exercise_id: str, answer: Any, kind: str, request: str) -> None:
    """Record ``answer`` to ``exercise_id`` (of ``kind``) in ``folder``, made by the cell that
    ``request`` ran. The record's JSON is written last, so a record the grader sees is whole."""
    number = next(_counter)
    if number > MAX_RECORDS:
        return
    base = folder / f"{number:05d}"
    entry = {"id": exercise_id, "request": request, **_payload(answer, kind, base)}
    partial = base.with_suffix(".part")
    partial.write_text(json.dumps(entry))
    partial.rename(base.with_suffix(".json"))


def read_plain(path: Path, limit: int, *, whole: bool = True) -> bytes:
    """The bytes of ``path`` if it is a regular file, read without trusting whoever wrote it.

    A sandboxed notebook can leave a link, a FIFO or a device where a file should be: the
    open neither follows a link (``O_NOFOLLOW``) nor waits for a FIFO's writer
    (``O_NONBLOCK``), and anything but a regular file is refused. A file over ``limit``
    bytes is refused too, or with ``whole=False`` read up to ``limit``. Raises OSError.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        if whole and info.st_size > limit:
            raise OSError(f"{path.name} holds {info.st_size} bytes, over the {limit} read")
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1024**2))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_entry(folder: Path, path: Path, budget: list[int]) -> dict | None:
    """One record as plain data: its fields checked, its numbers read without pickle, its
    function's bytes kept as bytes. None when it is not a record check() could have made.
    ``budget`` holds the bytes of answers still allowed to be read in this folder."""
    try:
        entry = json.loads(read_plain(path, 100_000))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("id", "request", "answer")):
        return None
    plain = {key: value for key, value in entry.items() if isinstance(value, str)}
    if plain["answer"] in ("numbers", "function"):
        file = folder / Path(plain.get("file", "")).name
        try:
            size = file.lstat().st_size
        except OSError:
            return None
        if size > MAX_FILE_BYTES:
            return {**plain, "answer": "problem", "problem": "the answer was too large to grade"}
        if size > budget[0]:
            return {**plain, "answer": "problem", "problem": "the notebook's answers were too large in all to grade"}
        try:
            data = read_plain(file, MAX_FILE_BYTES)
            budget[0] -= len(data)
            if plain["answer"] == "numbers":
                plain["numbers"] = np.load(io.BytesIO(data), allow_pickle=False)
            else:
                plain["pickle"] = data
        except (OSError, ValueError, EOFError):
            return None
    return plain


def read_records(folder: Path) -> list[dict]:
    """The records in ``folder`` in the order they were made (the grader's side: nothing here
    runs the learner's code)."""
    paths = sorted(folder.glob("[0-9][0-9][0-9][0-9][0-9].json"))[:MAX_RECORDS]
    budget = [MAX_TOTAL_BYTES]
    entries = [_read_entry(folder, path, budget) for path in paths]
    return [entry for entry in entries if entry is not None]


def encode_output(got: Any, limit: int) -> dict:
    """A case's output (a tensor) as a sealed grading child (lib.hidden_runs) sends it up its pipe: its
    dtype, shape and bytes (base64)."""
    import torch

    dtype = str(got.dtype).removeprefix("torch.")
    if got.dtype in (torch.bfloat16, torch.float16):
        got = got.float()  # numpy has no bfloat16: widened here, narrowed again by the grader
    elif got.dtype == torch.complex32:
        got = got.to(torch.complex64)
    array = np.ascontiguousarray(got.numpy())
    if array.nbytes > limit:
        return {"problem": f"returned {array.nbytes} bytes, more than the grader reads ({limit})"}
    data = base64.b64encode(array.tobytes()).decode("ascii")
    return {"dtype": dtype, "array": array.dtype.str, "shape": list(array.shape), "data": data}


def decode_output(entry: dict, limit: int) -> Any:
    """The output a child's line carries, as a tensor of its dtype; None when it carries none a grader
    reads (no numbers, an odd dtype, a shape that does not match its bytes)."""
    import torch

    try:
        kind, dtype = np.dtype(str(entry["array"])), getattr(torch, str(entry["dtype"]))
        data = base64.b64decode(str(entry["data"]), validate=True)
        if kind.kind not in "biufc" or not isinstance(dtype, torch.dtype) or len(data) > limit:
            return None
        array = np.frombuffer(data, dtype=kind).reshape(tuple(int(n) for n in entry["shape"]))
        return torch.from_numpy(array.copy()).to(dtype)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError):
        return None
