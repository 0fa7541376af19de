"""lib.code_policy and lib.drawn_cases, through check()'s grader, for every function exercise in the
book: each route that hands in what does the exercise's work (issue 30) is refused with a message
naming what was found, honest solutions written with elementwise, reduction and shape operations
pass, and the hidden cases drawn afresh defeat a table of the declared ones."""

import contextlib
import importlib
import importlib.util
import inspect
import json
import math
import sys
import textwrap
import types

import pytest
import torch

import lib.attention
from lib.checks import CORRECT, INCORRECT, FunctionExercise, exercises, grade
from lib.code_policy import library_file, policy, refusal
from lib.drawn_cases import DRAWN, drawn_cases
from lib.safe_call import resolve_dotted

FUNCTIONS = [e for e in exercises().values() if isinstance(e, FunctionExercise)]


def _rope(x, positions, freqs):
    angles = positions[:, None] * freqs[None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    turned = torch.stack((even * angles.cos() - odd * angles.sin(), even * angles.sin() + odd * angles.cos()), -1)
    return turned.flatten(-2)


def _update(m, l, block):
    m_new = torch.maximum(m, block.amax(dim=-1))
    shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
    return torch.stack((m_new, l * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(dim=-1)))


def _softmax(scores):
    row_max = scores.amax(dim=-1, keepdim=True)
    exps = torch.exp(scores - torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max)))
    total = exps.sum(dim=-1, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))


def _sample(logits, temperature, top_k):
    scaled = logits / temperature
    if top_k:
        scaled = scaled.masked_fill(scaled < scaled.topk(top_k).values[:, -1:], -math.inf)
    return torch.softmax(scaled, dim=-1)  # softmax is not this exercise's work: chapter 1's is allowed here


def _patchify(x, p):
    b, c, h, w = x.shape
    return x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5).reshape(b, -1, c * p * p)


def _positions(n, m):
    return torch.arange(m)[None, :] <= torch.arange(n)[:, None] + (m - n)


HONEST = {  # each exercise solved with the allowed operations, as a learner would
    "1.stable-softmax": _softmax,
    "2.merge-heads": lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1),
    "2.causal-padding-mask": lambda lengths, n, m: (
        (torch.arange(m)[None, :] < lengths[:, None])[:, None, None, :] & _positions(n, m)
    ),
    "3.rope-pairs": _rope,
    "4.rms-norm": lambda x, w, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w,
    "5.online-softmax-update": _update,
    "6.decode-mask": lambda n, c: _positions(n, n + c),
    "8.patchify": _patchify,
    "8.conv-weight": lambda w, c, p: w.reshape(w.shape[0], c, p, p),
    "9.sample-probs": _sample,
}


def test_every_function_exercise_declares_what_it_forbids_and_how_to_draw_inputs():
    assert sorted(HONEST) == sorted(e.id for e in FUNCTIONS)
    for exercise in FUNCTIONS:
        assert exercise.stands_for and exercise.forbids and exercise.draw is not None, exercise.id
        for dotted in exercise.stands_for + exercise.forbids:
            resolve_dotted(dotted)  # every name resolves to an object


@pytest.mark.parametrize("exercise", FUNCTIONS, ids=lambda e: e.id)
def test_honest_solutions_pass_every_call_and_the_drawn_cases_differ(exercise):
    first, second = grade(exercise, HONEST[exercise.id]), grade(exercise, HONEST[exercise.id])
    assert first.status == second.status == CORRECT, (first, second)
    assert first.message == f"passes all {len(exercise.cases) + DRAWN} hidden cases."
    a, b = drawn_cases(exercise), drawn_cases(exercise)
    assert len(a) == len(b) == DRAWN and repr([c.args() for c in a]) != repr([c.args() for c in b])
    same, again = drawn_cases(exercise, seed=7), drawn_cases(exercise, seed=7)
    assert repr([c.args() for c in same]) == repr([c.args() for c in again])  # a recorded seed draws alike
    for case in same:
        exercise.reference(*case.args())  # every drawn input is in the reference's domain


@pytest.mark.parametrize("exercise", FUNCTIONS, ids=lambda e: e.id)
def test_a_lookup_table_of_the_declared_cases_fails(exercise):
    table = {repr(case.args()): exercise.reference(*case.args()) for case in exercise.cases}

    def looked_up(*args):
        return table.get(repr(args), torch.zeros(1))

    result = grade(exercise, looked_up)
    assert result.status == INCORRECT and "drawn at random" in result.message, result


def _library(exercise):
    """The library functions an exercise stands for, unwrapped (a staticmethod's function)."""
    found = []
    for dotted in exercise.stands_for:
        obj = resolve_dotted(dotted)[0]
        found.append((dotted, getattr(obj, "__func__", obj)))
    return found


def _exec_copy(function):
    """``exec(inspect.getsource(f))`` in the notebook: the library's code under the name <string>."""
    namespace = dict(function.__globals__)
    source = textwrap.dedent(inspect.getsource(function))
    source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("@"))
    exec(compile(source, "<string>", "exec", dont_inherit=True), namespace)
    return namespace[function.__name__]


@contextlib.contextmanager
def _reloaded(module_name):
    """``importlib.reload`` of a library module, put back as it was afterwards."""
    module = sys.modules[module_name]
    saved = dict(vars(module))
    try:
        yield importlib.reload(module)
    finally:
        vars(module).clear()
        vars(module).update(saved)


@pytest.mark.parametrize("exercise", FUNCTIONS, ids=lambda e: e.id)
def test_the_library_under_any_name_copied_or_reloaded_is_refused(exercise):
    for dotted, function in _library(exercise):
        module = sys.modules[function.__module__]
        relative = library_file(function.__code__.co_filename)
        assert relative and relative.startswith("lib/"), relative
        routes = {
            "itself": function,
            "a new function over its code": types.FunctionType(
                function.__code__, function.__globals__, None, function.__defaults__, function.__closure__
            ),
        }
        spec = importlib.util.spec_from_file_location("somewhere_else", module.__file__)
        elsewhere = importlib.util.module_from_spec(spec)
        sys.modules["somewhere_else"] = elsewhere  # as an import under that name leaves it (dataclasses look)
        try:
            spec.loader.exec_module(elsewhere)
        finally:
            del sys.modules["somewhere_else"]
        routes["its file loaded under another name"] = getattr(elsewhere, function.__qualname__.split(".")[0])
        if "." in function.__qualname__:
            routes["its file loaded under another name"] = getattr(
                routes["its file loaded under another name"], function.__name__
            )
        for route, answer in routes.items():
            result = grade(exercise, answer)
            assert result.status == INCORRECT, (exercise.id, route, result)
            assert relative in result.feedback or dotted in result.feedback, (exercise.id, route, result.feedback)
        copied = grade(exercise, _exec_copy(function))
        assert copied.feedback == f"this is {dotted}, copied: write it yourself", (exercise.id, copied)
        with _reloaded(function.__module__) as reloaded:
            again = reloaded
            for part in function.__qualname__.split("."):
                again = getattr(again, part)
            result = grade(exercise, getattr(again, "__func__", again))
            assert result.status == INCORRECT and relative in result.feedback, (exercise.id, result)


def _uses(dotted):
    """A learner's function that refers to ``dotted``: by its attribute chain from the top module, or,
    for a method, on the argument (``x.softmax(...)``)."""
    obj, owner, attribute = resolve_dotted(dotted)
    namespace = {"torch": torch, "lib": lib, "builtins": __import__("builtins")}
    namespace.setdefault(dotted.split(".")[0], sys.modules[dotted.split(".")[0]])  # scipy, sklearn: loaded by resolve
    for name in ("lib.online_softmax", "lib.masks", "lib.tiling", "lib.costs", "lib.blocks", "lib.vit", "lib.rope"):
        importlib.import_module(name)
    importlib.import_module("torch.nn.attention.bias")
    if isinstance(owner, type) and not dotted.startswith("lib.") and attribute not in vars(owner):
        source = f"def uses(x, *args):\n    return x.{attribute}(*args)\n"
    else:
        source = f"def uses(*args):\n    return {dotted}(*args)\n"
    exec(compile(source, "<cell>", "exec"), namespace)
    return namespace["uses"]


@pytest.mark.parametrize("exercise", FUNCTIONS, ids=lambda e: e.id)
def test_a_function_that_refers_to_what_does_the_work_is_refused_naming_it(exercise):
    for dotted in exercise.forbids + exercise.stands_for:
        result = grade(exercise, _uses(dotted))
        assert result.status == INCORRECT, (exercise.id, dotted, result)
        # named: what it refers to, or the forbidden class on the way to it (MultiHeadAttention.merge_heads)
        named = [n for n in exercise.forbids + exercise.stands_for if f" {n}," in result.feedback]
        obj = resolve_dotted(dotted)[0]  # or another name of the same object (torch.conv2d is F.conv2d)
        assert any(dotted.startswith(n) or resolve_dotted(n)[0] is obj for n in named), (exercise.id, dotted, result)
        assert result.mistake == result.feedback
    through_a_helper = _uses(exercise.forbids[0])
    helper = lambda *args: through_a_helper(*args)  # noqa: E731 (a notebook's lambda)
    assert exercise.forbids[0] in grade(exercise, helper).feedback
    unshown = grade(exercise, lambda *args: exec("1"))
    assert unshown.feedback == "your function runs code it does not show (builtins.exec): write the function out"


@pytest.mark.parametrize("exercise", FUNCTIONS, ids=lambda e: e.id)
def test_what_the_reading_cannot_see_refuses_while_the_cases_run(exercise):
    """getattr with a computed name passes the reading; the guard refuses it when it is called."""
    for dotted in exercise.forbids:
        obj, owner, attribute = resolve_dotted(dotted)
        head, tail = attribute[:2], attribute[2:]

        def hidden(*args, owner=owner, head=head, tail=tail):
            return getattr(owner, head + tail)(*args)

        rules = policy(exercise.stands_for, exercise.forbids)
        if rules.name_of(owner) is not None:  # the class it is read from is itself forbidden (CausalBias)
            continue
        assert refusal(hidden, rules) is None
        result = grade(exercise, hidden)
        assert result.status == INCORRECT, (exercise.id, dotted, result)
        assert dotted in result.feedback or "called what it may not use" in result.message, (exercise.id, result)
        assert resolve_dotted(dotted)[0] is obj and getattr(owner, attribute) is obj  # put back


def test_the_routes_the_issue_lists():
    """Issue 30's list, one by one, with the message each gets."""
    import torch.nn.functional as F
    from torch import nn

    import lib.blocks
    import lib.masks
    import lib.online_softmax
    import lib.tiling
    from lib.exercises import find

    softmax, norm, mask = find("1.stable-softmax"), find("4.rms-norm"), find("6.decode-mask")
    uses = "your function uses {}, which does this exercise's work: write it yourself"
    assert grade(softmax, lib.online_softmax.online_softmax).feedback.startswith(
        "that is lib.online_softmax.online_softmax itself"
    )
    assert grade(softmax, lambda s: torch.softmax(s, -1).nan_to_num(0)).feedback == uses.format("torch.softmax")
    assert grade(softmax, lambda s: F.softmax(s, -1)).feedback == uses.format("torch.nn.functional.softmax")
    assert grade(softmax, lambda s: s.softmax(-1)).feedback == uses.format("torch.Tensor.softmax")
    sdpa = lambda s: F.scaled_dot_product_attention(s, s, s, s)  # noqa: E731
    assert grade(softmax, sdpa).feedback == uses.format("torch.nn.functional.scaled_dot_product_attention")
    assert grade(norm, lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps)).feedback == uses.format(
        "torch.nn.functional.rms_norm"
    )
    layer = nn.RMSNorm(4)
    assert grade(norm, lambda x, w, eps: layer(x)).feedback == uses.format("a torch.nn.RMSNorm")
    assert grade(norm, lambda x, w, eps: lib.blocks.RMSNorm(x.shape[-1])(x)).feedback == uses.format(
        "lib.blocks.RMSNorm"
    )
    assert "lib.blocks.make_norm" in grade(norm, lambda x, w, eps: lib.blocks.make_norm("rms", 4)(x)).feedback
    assert grade(mask, lambda n, c: lib.masks.sliding_window_mask(n, c + n, c + n)).feedback == uses.format(
        "lib.masks.sliding_window_mask"
    )
    band = lambda n, c: lib.tiling.Tiling.band(None, 0, n, 0, n + c, n, n + c, None)  # noqa: E731
    assert grade(mask, band).feedback == uses.format("lib.tiling.Tiling.band")
    table = {json.dumps(case.args()): mask.reference(*case.args()) for case in mask.cases}
    assert grade(mask, lambda n, c: table[json.dumps((n, c))]).status == INCORRECT  # drawn cases: no table passes
    # A table of the whole domain the cases were once drawn from (n_new <= 6, n_cached <= 10) fails too.
    whole = {(n, c): mask.reference(n, c) for n in range(1, 7) for c in range(11)}
    assert grade(mask, lambda n, c: whole[n, c]).status == INCORRECT


def test_torchs_softmax_under_private_operator_and_sparse_names_is_refused():
    """The routes a hostile batch found past the public names: read, or caught while the cases run."""
    from lib.exercises import find

    softmax = find("1.stable-softmax")
    uses = "your function uses {}, which does this exercise's work: write it yourself"
    routes = {
        "torch._softmax": lambda s: torch._softmax(s, -1, False).nan_to_num(0.0),
        "torch._log_softmax": lambda s: torch._log_softmax(s, -1, False).exp().nan_to_num(0.0),
        "torch._safe_softmax": lambda s: torch._safe_softmax(s, -1),
        "torch.ops.aten._softmax": lambda s: torch.ops.aten._softmax.default(s, -1, False).nan_to_num(0.0),
        "torch.ops.aten.log_softmax": lambda s: torch.ops.aten.log_softmax.int(s, -1).exp().nan_to_num(0.0),
        "torch.sparse.softmax": lambda s: torch.sparse.softmax(s.to_sparse(), -1).to_dense().nan_to_num(0.0),
    }
    for name, route in routes.items():
        assert grade(softmax, route).feedback in (uses.format(name), uses.format("torch.Tensor.log_softmax")), name
    hidden = grade(softmax, lambda s: getattr(torch.ops.aten, "_soft" + "max")(s, -1, False).nan_to_num(0.0))
    assert hidden.status == INCORRECT and "torch.ops.aten._softmax" in hidden.feedback


def test_a_learner_class_and_a_closure_are_read_too():
    from torch import nn

    from lib.exercises import find

    norm = find("4.rms-norm")

    class Mine:  # a callable object of the learner's, holding torch's norm
        def __init__(self):
            self.inner = nn.RMSNorm(3)

        def __call__(self, x, w, eps):
            return self.inner(x)

    assert "torch.nn.RMSNorm" in grade(norm, Mine()).feedback

    class Honest:
        def __call__(self, x, w, eps):
            return HONEST["4.rms-norm"](x, w, eps)

    assert grade(norm, Honest()).status == CORRECT
    hidden = torch.nn.functional.rms_norm
    assert "torch.nn.functional.rms_norm" in grade(norm, lambda x, w, eps: hidden(x, (x.shape[-1],), w, eps)).feedback
    assert library_file("<string>") is None and library_file(lib.attention.__file__) == "lib/attention.py"
    assert library_file(torch.nn.functional.__file__) == "torch/nn/functional.py"
