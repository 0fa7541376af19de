"""lib.hidden_runs: a recorded function runs on hidden inputs in a sandbox of its own, and only
its outputs come back, as arrays; a function that ends the process ends only its own run."""

import cloudpickle
import pytest
import torch

from lib.hidden_runs import FunctionRun, run_functions

CASES = [(torch.tensor([[1.0, 2.0]]),), (torch.tensor([[3.0, -1.0]], dtype=torch.float64),)]


class _Trojan:  # an answer whose pickle, loaded naively, disarms the policy and hands back torch.softmax
    def __reduce__(self):
        source = "import lib.code_policy as P, torch\nP.refusal = lambda *a, **k: None\nf = torch.softmax\n"
        return (eval, (f"(exec({source!r}, g := {{}}), g['f'])[1]",))


def _run(function, forbids=()) -> FunctionRun:
    return FunctionRun(cloudpickle.dumps(function), CASES, list(forbids), [], 2.0)


@pytest.mark.usefixtures("needs_sandbox")
def test_functions_run_in_a_sandbox_and_only_their_outputs_come_back():
    import lib.attention

    def _leaves(scores):  # defined here, so that cloudpickle sends it by value, as it sends a notebook's
        import os

        if scores.dtype == torch.float64:
            os._exit(3)  # ends the process on the second case
        return scores

    runs = [
        _run(lambda scores: (scores * 2).to(torch.bfloat16)),
        _run(_leaves),
        _run(lib.attention.softmax, forbids=["lib.attention.softmax"]),
        _run(lambda scores: open("/etc/hostname").read() and __import__("socket").create_connection(("1.1.1.1", 53))),
        FunctionRun(b"not a pickle", CASES, [], [], 2.0),
        FunctionRun(cloudpickle.dumps(_Trojan()), CASES, ["torch.softmax"], [], 2.0),
    ]
    doubled, leaves, library, network, broken, trojan = run_functions(runs)
    assert [outcome[0] for outcome in doubled] == ["", ""]
    assert doubled[0][1].dtype == torch.bfloat16 and doubled[0][1].tolist() == [[2.0, 4.0]] and doubled[0][2]
    assert leaves[0][0] == "" and leaves[1] == ("ended the process that ran it (exit status 3)", None, False)
    assert library == ("refused", "that is lib.attention.softmax itself, not a function of yours: write it yourself")
    assert network[0][0].startswith("raised OSError") or network[0][0].startswith("raised FileNotFoundError")
    assert broken[0] == "problem" and broken[1].startswith("could not load your function for grading")
    assert trojan == (
        "problem",
        "your answer is not a plain function the grader can load: it brings a call to builtins.eval while loading",
    )


def test_results_or_outputs_left_as_fifos_do_not_stall_the_grader(tmp_path):
    import os

    from lib.hidden_runs import _output, _read_results

    os.mkfifo(tmp_path / "results.jsonl")  # the learner's function replaced the results file
    assert _read_results(tmp_path) == []
    os.mkfifo(tmp_path / "out-0-0.npy")
    assert _output({"file": "out-0-0.npy", "dtype": "float32"}, tmp_path) is None


def test_the_worker_reads_a_function_before_running_it_as_check_does():
    """The teacher's worker applies check()'s code policy: a copy of the library's code object,
    a function that refers to torch's softmax, and one that calls it by a name the reading cannot
    see (refused while it runs) are all refused, naming what was found; an honest one runs."""
    import types

    import lib.attention

    softmax = lib.attention.softmax
    copy = types.FunctionType(softmax.__code__, softmax.__globals__, None, softmax.__defaults__)
    hidden = "soft" + "max"
    forbids = ["torch.softmax", "torch.Tensor.softmax"]
    runs = [
        FunctionRun(cloudpickle.dumps(f), CASES, forbids, ["lib.attention.softmax"], 2.0)
        for f in (copy, lambda s: torch.softmax(s, -1), lambda s: getattr(torch, hidden)(s, -1), lambda s: s.exp())
    ]
    copied, named, dynamic, honest = run_functions(runs, sandboxed=False)
    assert copied[0] == "refused" and ("lib/attention.py" in copied[1] or "lib.attention.softmax" in copied[1]), copied
    assert named == ("refused", "your function uses torch.softmax, which does this exercise's work: write it yourself")
    assert dynamic[0][0] == "called what it may not use: torch.softmax", dynamic
    assert [outcome[0] for outcome in honest] == ["", ""]
