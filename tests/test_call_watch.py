"""The watch on a learner's function while its hidden cases run (lib/call_watch.py): each route a
hostile batch took past the reading of the code, refused, and honest functions still pass."""

import importlib
import sys
import threading
import types

import pytest
import torch

import lib.attention
import lib.blocks
from lib.checks import INCORRECT, grade
from lib.exercises import find

SOFTMAX, NORM, MASK = find("1.stable-softmax"), find("4.rms-norm"), find("6.decode-mask")


def honest_softmax(s):
    e = (s - s.max(-1, keepdim=True).values).exp()
    return (e / e.sum(-1, keepdim=True)).nan_to_num(0.0)


def _attr(owner, *parts):  # a name the reading cannot see: built from strings when the case runs
    for part in parts:
        owner = getattr(owner, part)
    return owner


ROUTES = {
    "torch._C._VariableFunctions.softmax": (
        SOFTMAX,
        lambda s: _attr(torch, "_" + "C", "_VariableFunctions", "soft" + "max")(s, -1).nan_to_num(0.0),
    ),
    "TensorBase's own softmax": (SOFTMAX, lambda s: vars(torch.Tensor.__mro__[1])["soft" + "max"](s, -1)),
    "an operator handle built at run time": (
        SOFTMAX,
        lambda s: getattr(torch._ops._OpNamespace("aten"), "_soft" + "max")(s, -1, False).nan_to_num(0.0),
    ),
    "torch._C._nn's attention": (
        SOFTMAX,
        lambda s: _attr(torch, "_" + "C", "_nn", "scaled_dot_product_attention")(
            s.new_zeros(s.shape[:-1] + (1,)), s.new_zeros(s.shape[:-1] + (1,)), s
        ),
    ),
    "log-sum-exp": (SOFTMAX, lambda s: (s - _attr(torch, "log" + "sumexp")(s, -1, keepdim=True)).exp()),
    "torch.rms_norm": (NORM, lambda x, w, eps: _attr(torch, "rms" + "_norm")(x, (x.shape[-1],), w, eps)),
    "the library's code object as a default": (
        SOFTMAX,
        lambda s, _c=lib.attention.softmax.__code__: types.FunctionType(_c, lib.attention.__dict__)(s, -1),
    ),
    "the library's source run again": (
        NORM,
        lambda x, w, eps: _run_source(lib.blocks.__file__)["rms_norm"](x, w, eps),
    ),
    "a reloaded module": (
        MASK,
        lambda n, c: _attr(importlib, "rel" + "oad")(sys.modules["lib.masks"]).sliding_window_mask(n, c + n, c + n),
    ),
    "a thread of its own": (SOFTMAX, lambda s: _in_a_thread(lambda: torch.softmax(s, -1).nan_to_num(0.0))),
    "switching the watch off": (SOFTMAX, lambda s: (_attr(sys, "set" + "profile")(None), torch.softmax(s, -1))[1]),
    # a hostile function wrote another function's results into the hidden run's results file
    "writing a file": (SOFTMAX, lambda s: (open("results.jsonl", "a").write("{}\n"), honest_softmax(s))[1]),
    "reading the grader's frames": (SOFTMAX, lambda s: (_grader_frame(), honest_softmax(s))[1]),
    # a second hostile batch, having read lib/call_watch.py
    "taking the watch apart": (SOFTMAX, lambda s: (_dismantle(), torch.softmax(s, -1).nan_to_num(0.0))[1]),
    "a thread started by _thread": (
        SOFTMAX,
        lambda s: _in_a_raw_thread(lambda: _attr(torch, "_" + "C", "_VariableFunctions", "soft" + "max")(s, -1)),
    ),
    "log-cum-sum-exp": (SOFTMAX, lambda s: (s - _attr(torch, "logcum" + "sumexp")(s, -1)[..., -1:]).exp()),
    "torch._C._nn's cross entropy": (SOFTMAX, lambda s: _softmax_by_cross_entropy(s)),
    "writing through torch.from_file": (
        SOFTMAX,
        lambda s: (_attr(torch, "from" + "_file")("forged.bin", shared=True, size=4), honest_softmax(s))[1],
    ),
    # a third hostile batch
    "a private attention kernel's weights": (
        SOFTMAX,
        lambda s: (
            _attr(torch, "_scaled_dot_product_" + "attention_math")(
                s.new_zeros(s.shape[:-1] + (1, 1)),
                s.new_zeros(s.shape + (1,)),
                s.new_zeros(s.shape + (1,)),
                attn_mask=s.unsqueeze(-2),
            )[1]
            .squeeze(-2)
            .nan_to_num(0.0)
        ),
    ),
    "a child process": (SOFTMAX, lambda s: (_attr(sys.modules["_posix" + "subprocess"], "fork_exec")(), s)[1]),
    "code left for after the watch": (SOFTMAX, lambda s: (_attr(sys.modules["at" + "exit"], "register")(print), s)[1]),
    "a tensor subclass that acts when read": (SOFTMAX, lambda s: honest_softmax(s).as_subclass(_Later)),
}


class _Later(torch.Tensor):  # its own __torch_function__ would run when the grader reads it
    pass


def _dismantle():
    watch = sys.modules["lib.call_" + "watch"]
    for cell in sys.getprofile().__closure__ or ():
        value = cell.cell_contents
        if type(value) is list and value == [True]:
            value[0] = False
    getattr(watch, "_AC" + "TIVE").clear()
    for mode in torch.overrides._get_current_function_mode_stack():
        mode.watch = watch.Watch([])


def _in_a_raw_thread(work):
    raw, box = sys.modules["_" + "thread"], []
    lock = raw.allocate_lock()
    lock.acquire()

    def run():
        box.append(work().nan_to_num(0.0))
        lock.release()

    getattr(raw, "start_new_" + "thread")(run, ())
    lock.acquire()
    return box[0]


def _softmax_by_cross_entropy(s):
    loss = _attr(torch, "_" + "C", "_nn", "cross_entropy_loss")
    n, rows = s.shape[-1], s.reshape(-1, s.shape[-1])
    picked = loss(rows.repeat_interleave(n, 0), torch.arange(n).repeat(rows.shape[0]), None, 0, -100, 0.0)
    return torch.exp(-picked).reshape(s.shape).nan_to_num(0.0)


def _grader_frame():
    try:
        raise ValueError
    except ValueError as error:
        return getattr(error.__traceback__, "tb_" + "frame").f_back.f_locals


def _run_source(path):
    namespace = {}
    getattr(sys.modules["builtins"], "ex" + "ec")(open(path).read(), namespace)
    return namespace


def _in_a_thread(work):
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", work()))
    thread.start()
    thread.join()
    return out.get("value")


@pytest.mark.parametrize("route", ROUTES, ids=list(ROUTES))
def test_a_route_past_the_reading_is_refused_while_the_cases_run(route):
    exercise, function = ROUTES[route]
    result = grade(exercise, function)
    assert result.status == INCORRECT, (route, result)
    refused = "may not use" in result.message or "does this exercise's work" in result.feedback
    assert refused or "a subclass of torch.Tensor: return a plain tensor" in result.message, (route, result)


def test_honest_functions_still_pass_and_the_watch_leaves_nothing_behind():
    before = (sys.getprofile(), threading.getprofile())
    assert grade(SOFTMAX, honest_softmax).correct
    assert grade(NORM, lambda x, w, eps: x * (x.pow(2).mean(-1, keepdim=True) + eps).rsqrt() * w).correct
    assert (sys.getprofile(), threading.getprofile()) == before
    from lib import call_watch

    assert call_watch._ACTIVE == []
    exec("x = 1", {})  # with no watch on, exec is the notebook's business
