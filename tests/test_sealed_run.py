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


def _stable(scores):  # an honest answer: a helper, a comprehension, torch.where, math
    import math

    def shifted(x):
        top = x.amax(dim=-1, keepdim=True)
        return x - torch.where(torch.isinf(top), torch.zeros_like(top), top)

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

    def torchscript(scores):
        unit = torch.jit.CompilationUnit(f"def f(x):\n    return torch.{hidden}(x, -1)\n")
        return torch.nan_to_num(unit.f(scores), nan=0.0)

    return locals()[kind]


HOSTILE = ["switch_off", "private_name", "redispatch", "nested", "refs", "decomposition", "source_again", "defaults",
           "heap", "thread", "torchscript", "other_package"]  # fmt: skip


def _runs(functions):
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # sent by value, as a notebook's are
    return [
        FunctionRun(cloudpickle.dumps(f), CASES, list(_SOFTMAXES), ["lib.attention.softmax"], 5.0) for f in functions
    ]


def test_honest_answers_pass_every_case_in_the_sealed_child():
    (stable,) = run_functions(_runs([_stable]))
    assert [problem for problem, _, _ in stable] == ["", ""]
    for (_, got, _), (scores,) in zip(stable, CASES, strict=True):
        torch.testing.assert_close(got, _reference(scores))


def test_every_hostile_route_is_refused_in_the_sealed_child():
    outcomes = run_functions(_runs([_sneaky(kind) for kind in HOSTILE]))
    for kind, outcome in zip(HOSTILE, outcomes, strict=True):
        passed = isinstance(outcome, list) and len(outcome) == len(CASES) and all(not o[0] for o in outcome)
        assert not passed, f"{kind} got credit: {outcome}"
        problems = [o[0] for o in outcome] if isinstance(outcome, list) else [outcome[1]]
        assert any(p.startswith(CALLS_LIBRARY) or "raised" in p for p in problems), (kind, problems)
    by_kind = dict(zip(HOSTILE, outcomes, strict=True))
    sealed = ("switch_off", "private_name", "redispatch", "nested", "refs", "decomposition", "defaults", "heap")
    for kind in (*sealed, "other_package", "source_again", "torchscript"):
        assert by_kind[kind][-1][0].startswith(CALLS_LIBRARY), (kind, by_kind[kind])


def test_a_hand_in_cannot_write_the_results_file():
    (outcome,) = run_functions(_runs([_sneaky("write")]))
    assert outcome[0][0].startswith(("raised PermissionError", CALLS_LIBRARY)), outcome


def test_the_sealed_operators_cover_every_route_to_torchs_softmax():
    from lib.code_policy import policy

    found = {name for name, _ in forbidden_ops(policy([], list(_SOFTMAXES)).guarded)}
    for name in ("softmax.int", "_softmax", "_softmax.out", "_log_softmax", "_safe_softmax", "_masked_softmax",
                 "_sparse_softmax", "logsumexp", "_scaled_dot_product_flash_attention_for_cpu"):  # fmt: skip
        assert name in found


def test_the_kernel_filter_is_well_formed():
    program = _filter()
    assert len(program) % 8 == 0 and 60 < len(program) // 8 < 256  # jumps are 8-bit
    assert seccomp_available() in ("", f"the filter is written for x86-64 ({__import__('os').uname().machine})")
