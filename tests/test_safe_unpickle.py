"""lib.safe_unpickle: a function answer loads as cloudpickle loads it, and a pickle that would
run, alter or reach anything while loading is refused before any of it runs."""

import math
import os
import pickle
import sys

import cloudpickle
import pytest
import torch
import torch.nn.functional as F
from cloudpickle import cloudpickle as cp

import lib.code_policy
from lib.safe_unpickle import UnsafePickle, safe_loads

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # as a notebook's own functions are pickled
SCALE = 2.0
TABLE = torch.arange(3.0)


def _helper(x):
    return x * SCALE


def _softmax(s):
    shifted = s - s.amax(dim=-1, keepdim=True)
    return torch.exp(shifted) / torch.exp(shifted).sum(-1, keepdim=True) + _helper(0) * math.sqrt(4)


def _closure():
    k = 3

    def inner(x, y=5, *, z=1):
        return x + k + y + z

    return inner


def _factorial(n):
    return 1 if n == 0 else n * _factorial(n - 1)


@pytest.mark.parametrize(
    "function, argument",
    [
        (_softmax, torch.randn(2, 3, generator=torch.Generator().manual_seed(0))),
        (_closure(), 1),
        (lambda x: F.relu(x), torch.tensor([-1.0, 2.0])),
        (lambda x: x + TABLE, torch.ones(3)),
        (_factorial, 5),
        (lambda x: x[..., 0::2], torch.arange(6.0).reshape(2, 3)),  # the rope-pairs hint's own slicing
        (lambda x: 1 if x is NotImplemented else 0, 2),
    ],
)
def test_a_notebook_function_loads_as_cloudpickle_loads_it(function, argument):
    data = cloudpickle.dumps(function)
    expected = cloudpickle.loads(data)(argument)
    assert torch.equal(torch.as_tensor(safe_loads(data)(argument)), torch.as_tensor(expected))


class _Trojan:  # the hostile batch's answer: code that disarms the policy while the grader loads it
    def __call__(self, *args):
        return None

    def __reduce__(self):
        source = "import lib.code_policy as P\nP.refusal = None\nf = lambda x: x\n"
        return (eval, (f"(exec({source!r}, g := {{}}), g['f'])[1]",))


class _Retarget:  # cloudpickle's own state setter aimed at a module of the grader
    def __reduce__(self):
        state = ({}, {"__globals__": {}, "__closure__": None, "_cloudpickle_submodules": [], "refusal": None})
        return (cp._function_setstate, (lib.code_policy, state))


class _Answer:
    def __init__(self):
        self.value = 1


def _inner_pickle(marker):
    class Writes:
        def __reduce__(self):
            return (exec, (f"open({str(marker)!r}, 'w').write('ran')",))

    return pickle.dumps(Writes())


@pytest.mark.parametrize(
    "data, named",
    [
        (cloudpickle.dumps(_Trojan()), "builtins.eval"),
        (cloudpickle.dumps(_Retarget()), "not of a function it built"),
        (cloudpickle.dumps(_Answer()), "defined in the notebook"),
        (cloudpickle.dumps(_Answer), "defined in the notebook"),
        (pickle.dumps(os.system, protocol=0) + b"", None),  # a reference alone is not a call: loads
        (b"clib.code_policy\n__dict__\n.", "the name lib.code_policy.__dict__"),
        (b"clib.sandbox\nOUTSIDE_ENV\n.", "neither a function, a class nor a module"),
        (b"cos\nsystem\n(Vtrue\ntR.", "a call to posix.system"),
        (b"ccloudpickle.cloudpickle\nsubimport\n(Vlib.code_policy\ntR(dVrefusal\nNsb.", "calling its class"),
        (b"ccloudpickle.cloudpickle\n_builtin_type\n(Vnew_class\ntR.", "types.new_class"),
    ],
)
def test_what_a_function_never_needs_is_refused_before_it_runs(data, named):
    before = lib.code_policy.refusal
    if named is None:
        assert safe_loads(data) is os.system
        return
    with pytest.raises(UnsafePickle, match=named.replace(".", r"\.")):
        safe_loads(data)
    assert lib.code_policy.refusal is before


def test_a_tensor_inside_loads_only_tensors(tmp_path):
    marker = tmp_path / "ran.txt"
    forged = b"ctorch.storage\n_load_from_bytes\n(" + pickle.dumps(_inner_pickle(marker), protocol=0)[:-1] + b"tR."
    with pytest.raises(pickle.UnpicklingError):
        safe_loads(forged)
    assert not marker.exists()
    with pytest.raises(TypeError, match="data must be bytes"):
        safe_loads("text")


def _disarms():  # run as the pickle loads, if anything of the learner's could run then
    import lib.code_policy as policy

    policy.refusal = None


def _calls_itself(ending: bytes) -> bytes:
    """A review's bypass: a function whose ``append`` attribute is itself, then an opcode that
    fills the object on the stack (APPEND, APPENDS, ADDITEMS), which would call it."""
    evil = lambda *args: _disarms()  # noqa: E731
    evil.append = evil.extend = evil.add = evil.keys = evil
    return cloudpickle.dumps(evil, protocol=3)[:-1] + ending


@pytest.mark.parametrize(
    "data, named",
    [
        (_calls_itself(b"Na."), "filling a function"),
        (_calls_itself(b"(Ne."), "filling a function"),
        (_calls_itself(b"(N\x90."), "filling a function"),
        (b"ccollections\nOrderedDict\n(" + _calls_itself(b"")[2:-1] + b"tR.", "OrderedDict built from"),
        (b"ccloudpickle.cloudpickle\nsubimport\n(Vthis\ntR.", "an import of this"),
        (b"ccloudpickle.cloudpickle\nsubimport\n(Vvenv.__main__\ntR.", "the module name"),
        (b"\x80\x02cthread\nstart_new_thread\n.", "an import of thread"),
        (b"clib.code_policy\nPolicy.__init__\n.", "reached through attributes"),
    ],
)
def test_a_learner_object_is_never_called_while_loading(data, named, capsys):
    before = lib.code_policy.refusal
    with pytest.raises(UnsafePickle, match=named):
        safe_loads(data)
    assert lib.code_policy.refusal is before and "Zen of Python" not in capsys.readouterr().out


def test_a_function_with_attributes_of_its_own_still_loads():
    def scaled(x):
        return x * scaled.factor

    scaled.factor = 3
    assert safe_loads(cloudpickle.dumps(scaled))(2) == 6
