"""lib.sealed_run: the teacher's grader runs each function in a child process sealed before the
function is loaded, so a hand-in that takes the in-process watch apart (switching it off for one
call and putting it back, as a fourth hostile batch did) still gets no credit.

Each hostile route below is written as a student who has read lib/call_watch.py and
lib/sealed_run.py would write it; each must end with "called what it may not use", while honest
functions, written with the allowed operations, pass every case."""

import sys

import cloudpickle
import pytest
import torch

from lib.exercises.ch01 import _SOFTMAXES
from lib.grading import CALLS_LIBRARY
from lib.hidden_runs import FunctionRun, run_functions
from lib.sealed_run import _filter, forbidden_ops, seccomp_available

pytestmark = pytest.mark.usefixtures("needs_sandbox")

ROWS = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, float("-inf")], [1000.0, 1001.0, 999.0]])
CASES = [(ROWS,), (ROWS[:1] * 3,)]


def _reference(scores):
    return torch.nan_to_num(torch.softmax(scores, -1), nan=0.0)


def _stable(scores):  # an honest answer: a helper, a comprehension, torch.where, math, a print
    import math

    def shifted(x):
        top = x.amax(dim=-1, keepdim=True)
        return x - torch.where(torch.isinf(top), torch.zeros_like(top), top)

    print("scores", scores, torch.broadcast_shapes(scores.shape, (1,)))  # a learner's debugging print
    e = shifted(scores).exp()
    total = e.sum(dim=-1, keepdim=True)
    rows = [row for row in (e / torch.where(total == 0, torch.ones_like(total), total))]
    return torch.stack(rows) * math.exp(0.0)


def _sneaky(kind):
    """A hostile answer of this kind (each body names nothing the code reading looks for)."""
    hidden = "soft" + "max"

    def switch_off(scores):  # the profile off for one call, then back
        import sys

        profile = sys.getprofile()
        sys.setprofile(None)
        y = getattr(torch, hidden)(scores, -1)
        sys.setprofile(profile)
        return torch.nan_to_num(y, nan=0.0)

    def private_name(scores):
        import sys

        functions = sys.modules["torch." + "_C"]._VariableFunctions
        return torch.nan_to_num(getattr(functions, hidden)(scores, -1), nan=0.0)

    def redispatch(scores):
        ops = getattr(torch, "ops")  # noqa: B009 (cloudpickle cannot send a function whose names hold torch.ops)
        op = getattr(ops.aten, "_" + hidden).default
        import sys

        C = sys.modules["torch." + "_C"]
        keys = C.DispatchKeySet(C.DispatchKey.CPU)
        return torch.nan_to_num(op.redispatch(keys, scores, -1, False), nan=0.0)

    def nested(scores):
        y = getattr(torch.nested.nested_tensor([scores]), hidden)(-1)
        return torch.nan_to_num(y.unbind()[0], nan=0.0)

    def refs(scores):
        import importlib

        R = importlib.import_module("torch." + "_refs")
        return torch.nan_to_num(getattr(R, hidden)(scores, -1), nan=0.0)

    def decomposition(scores):
        import importlib

        D = importlib.import_module("torch." + "_decomp.decompositions")
        return torch.nan_to_num(getattr(D, "_" + hidden)(scores, -1, False), nan=0.0)

    def source_again(scores):  # the library's softmax compiled again under another file name
        import builtins
        import inspect

        import lib.attention as A

        space = dict(vars(A))
        source = getattr(builtins, "comp" + "ile")(inspect.getsource(getattr(A, hidden)), "mine.py", "exec")
        getattr(builtins, "ex" + "ec")(source, space)
        return space[hidden](scores)

    def defaults(scores):  # empty the profile's tables
        import sys

        profile = sys.getprofile()
        profile.__defaults__ = tuple(frozenset() if isinstance(d, frozenset) else d for d in profile.__defaults__)
        return torch.nan_to_num(getattr(torch, hidden)(scores, -1), nan=0.0)

    def heap(scores):  # find the dispatcher's registrations and destroy them
        import gc

        for obj in gc.get_objects():
            if type(obj).__name__ == "_DispatchModule":
                del obj
        return torch.nan_to_num(getattr(torch, hidden)(scores, -1), nan=0.0)

    def thread(scores):  # a thread the profile does not follow, started from C (map)
        import _thread

        out = []
        list(map(_thread.start_new_thread, [lambda: out.append(getattr(torch, hidden)(scores, -1))], [()]))
        import time

        time.sleep(0.2)
        return torch.nan_to_num(out[0], nan=0.0)

    def write(scores):  # forge the results file the grader reads
        import os

        fd = os.open("/tmp/grading/results.jsonl", os.O_WRONLY | os.O_APPEND)
        list(map(os.write, [fd], [b"{}\n"]))
        return scores

    def other_package(scores):  # scipy's softmax, imported while the cases run
        import importlib

        special = importlib.import_module("scipy" + ".special")
        return torch.from_numpy(getattr(special, hidden)(scores.numpy(), axis=-1)).nan_to_num(0.0)

    def strhash(scores):  # a str subclass as a code's file name: its __hash__ would run unprofiled
        import sys

        out = []

        def poke():
            return None

        def blind_hash(self):
            if not out:
                out.append(getattr(sys.modules["lib.attention"], hidden)(scores))
            return str.__hash__(self)

        blind = type("Blind", (str,), {"__hash__": blind_hash})
        type(poke)(poke.__code__.replace(co_filename=blind("poke.py")), {})()
        return out[0]

    def renamed(scores):  # the library's code with one more name, built while the cases run
        import sys
        import types

        library = sys.modules["lib.attention"]
        code = getattr(library, hidden).__code__
        code = code.replace(co_names=code.co_names + ("unused",), co_filename="<cell>", co_name="mine")
        return types.FunctionType(code, vars(library))(scores)

    def lcse(scores):
        wide = scores.double()
        total = getattr(torch, "_logcumsum" + "exp")(wide, -1)[..., -1:]
        return torch.nan_to_num(torch.exp(wide - total), nan=0.0).float()

    def torchscript(scores):
        unit = torch.jit.CompilationUnit(f"def f(x):\n    return torch.{hidden}(x, -1)\n")
        return torch.nan_to_num(unit.f(scores), nan=0.0)

    return locals()[kind]


HOSTILE = ["switch_off", "private_name", "redispatch", "nested", "refs", "decomposition", "source_again", "defaults",
           "heap", "thread", "torchscript", "other_package", "strhash", "renamed", "lcse"]  # fmt: skip


def _runs(functions):
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # sent by value, as a notebook's are
    return [
        FunctionRun(cloudpickle.dumps(f), CASES, list(_SOFTMAXES), ["lib.attention.softmax"], 5.0) for f in functions
    ]


def _copy_with_one_more_name():
    """The library's softmax, its code given one more (unused) name and a notebook's file name: the reading
    before the run compares names too, the sealed child's profile compares instructions."""
    import types

    import lib.attention

    code = lib.attention.softmax.__code__
    code = code.replace(co_names=(*code.co_names, "unused"), co_filename="<cell>", co_name="mine", co_qualname="mine")
    return types.FunctionType(code, {"torch": torch}, "mine", lib.attention.softmax.__defaults__)


def _forge(scores):  # right answers for every case written up the pipe, then torch's softmax
    import base64
    import json
    import os

    hidden = "soft" + "max"
    right = (scores - scores.amax(-1, keepdim=True)).exp()
    right = (right / right.sum(-1, keepdim=True)).nan_to_num(0.0).numpy()
    for fd in range(3, 64):
        try:
            os.fstat(fd)
        except OSError:
            continue
        for case in (0, 1):
            line = {"case": case, "problem": "", "typed": True, "dtype": "float32", "array": right.dtype.str,
                    "shape": list(right.shape), "data": base64.b64encode(right.tobytes()).decode()}  # fmt: skip
            os.write(fd, b"\n" + json.dumps(line).encode() + b"\n")
    return getattr(torch, hidden)(scores, -1)


def _fused(x, weight, eps):
    return getattr(torch, "_fused_rms" + "_norm")(x, [x.shape[-1]], weight, eps)[0]


def _grouped(x, weight, eps):  # group norm of [x, -x]: mean 0, variance mean(x²)
    flat = x.reshape(-1, 1, x.shape[-1])
    both = torch.cat([flat, -flat], -1)
    return getattr(torch, "group" + "_norm")(both, 1, None, None, eps)[..., : x.shape[-1]].reshape(x.shape) * weight


def _im2col(images, p):
    nn = getattr(torch, "_" + "C")._nn
    return getattr(nn, "im2" + "col")(images, [p, p], [1, 1], [0, 0], [p, p]).transpose(1, 2)


def _convolved(images, p):
    c = images.shape[1]
    w = torch.eye(c * p * p).reshape(c * p * p, c, p, p)
    out = getattr(torch, "convo" + "lution")(images, w, None, [p, p], [0, 0], [1, 1], False, [0, 0], 1)
    return out.flatten(2).transpose(1, 2)


@pytest.fixture(scope="module")
def outcomes() -> dict:
    """Every answer of this file graded in one sandbox (one start of it, not one a test), by name."""
    from lib.exercises.ch04 import _NORMS
    from lib.exercises.ch08 import _PATCHES

    softmaxes = {"stable": _stable, "copy": _copy_with_one_more_name()} | {k: _sneaky(k) for k in (*HOSTILE, "write")}
    runs = dict(zip(softmaxes, _runs(list(softmaxes.values())), strict=True))
    runs["forge"] = FunctionRun(cloudpickle.dumps(_forge), [(ROWS[:2],), (ROWS[:2],)], list(_SOFTMAXES), [], 5.0)
    x, weight, images = torch.randn(3, 4), torch.rand(4) + 0.5, torch.randn(2, 3, 4, 6)
    for name, f in (("fused", _fused), ("grouped", _grouped)):
        runs[name] = FunctionRun(cloudpickle.dumps(f), [(x, weight, 1e-5)], list(_NORMS), [], 5.0)
    for name, f in (("im2col", _im2col), ("convolved", _convolved)):
        runs[name] = FunctionRun(cloudpickle.dumps(f), [(images, 2)], list(_PATCHES), [], 5.0)
    return dict(zip(runs, run_functions(list(runs.values())), strict=True))


def test_a_copy_of_the_librarys_code_is_refused_when_it_runs(outcomes):
    assert outcomes["copy"][-1][0].startswith(f"{CALLS_LIBRARY} a copy of lib.attention.softmax"), outcomes["copy"]


def test_the_other_exercises_forbidden_kernels_end_the_run(outcomes):
    for name in ("fused", "grouped", "im2col", "convolved"):
        assert outcomes[name][-1][0].startswith(CALLS_LIBRARY), (name, outcomes[name])


def test_honest_answers_pass_every_case_in_the_sealed_child(outcomes):
    stable = outcomes["stable"]
    assert [problem for problem, _, _ in stable] == ["", ""]
    for (_, got, _), (scores,) in zip(stable, CASES, strict=True):
        torch.testing.assert_close(got, _reference(scores))


def test_every_hostile_route_is_refused_in_the_sealed_child(outcomes):
    for kind in HOSTILE:
        outcome = outcomes[kind]
        passed = isinstance(outcome, list) and len(outcome) == len(CASES) and all(not o[0] for o in outcome)
        assert not passed, f"{kind} got credit: {outcome}"
        problems = [o[0] for o in outcome] if isinstance(outcome, list) else [outcome[1]]
        assert any(p.startswith(CALLS_LIBRARY) or "raised" in p for p in problems), (kind, problems)
    sealed = ("switch_off", "private_name", "redispatch", "nested", "refs", "decomposition", "defaults", "heap")
    for kind in (*sealed, "other_package", "source_again", "torchscript", "strhash", "renamed", "lcse"):
        assert outcomes[kind][-1][0].startswith(CALLS_LIBRARY), (kind, outcomes[kind])


def test_a_hand_in_cannot_write_the_results_file(outcomes):
    assert outcomes["write"][0][0].startswith(("raised PermissionError", CALLS_LIBRARY)), outcomes["write"]


def test_the_sealed_operators_cover_every_route_to_torchs_softmax():
    from lib.code_policy import policy

    found = {name for name, _ in forbidden_ops(policy([], list(_SOFTMAXES)).guarded)}
    for name in ("softmax.int", "_softmax", "_softmax.out", "_log_softmax", "_safe_softmax", "_masked_softmax",
                 "_sparse_softmax", "logsumexp", "_scaled_dot_product_flash_attention_for_cpu"):  # fmt: skip
        assert name in found


def test_a_refused_run_gets_no_credit_whatever_it_wrote_to_the_pipe_before(outcomes):
    assert outcomes["forge"][-1][0] == f"{CALLS_LIBRARY} torch.softmax", outcomes["forge"]


@pytest.mark.skipif(bool(seccomp_available()), reason="the kernel filter is Linux x86-64's")
def test_the_kernel_filter_refuses_writes_processes_and_threads_and_allows_reads(tmp_path):
    import subprocess

    probe = (
        "import os, _thread, sys\n"
        "from lib.sealed_run import _load_filter\n"
        f"target = {str(tmp_path / 'written')!r}\n"
        "_load_filter()\n"
        "said = [len(open('/etc/hostname').read()) >= 0]\n"  # reading works
        "for attempt in (lambda: open(target, 'w'), lambda: os.open(target, os.O_RDONLY | os.O_CREAT),\n"
        "                os.fork, lambda: _thread.start_new_thread(print, ()), lambda: os.unlink('/etc/hostname')):\n"
        "    try:\n        attempt()\n        said.append('allowed')\n"
        "    except (OSError, RuntimeError) as error:\n        said.append(type(error).__name__)\n"
        "print(said)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == str([True, "PermissionError", "PermissionError", "PermissionError", "RuntimeError",
                                       "PermissionError"]), done.stdout + done.stderr  # fmt: skip
    assert not (tmp_path / "written").exists()
    assert len(_filter()) // 8 < 256  # every jump fits its 8 bits
