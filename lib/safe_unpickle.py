"""Loading a learner's pickled function without running anything of theirs while it loads.

``check()`` records a function answer with ``cloudpickle`` (by value: its code, defaults,
closure and the globals it uses), and the hidden-case sandbox (``lib.hidden_runs``) loads it
again. A plain ``pickle.loads`` would call whatever the pickle names: an answer whose
``__reduce__`` returns ``(eval, (source,))`` runs that source inside the grading process
before the code policy has read the function, and can switch the policy off. This loader
rebuilds exactly what cloudpickle writes for a function and nothing else:

* a call while loading (REDUCE) may only be one of cloudpickle's own builders (a function,
  its cells, its state, a code object, an imported module) or torch's tensor rebuild;
* a global it names must be a module-level function, class or module, reached by a public
  name: never a dict, a dunder attribute or a private helper it could then alter;
* a function's state is only ever set on a function this load built, and tensors inside
  it load with ``torch.load(weights_only=True)``;
* the opcodes that call other things (BUILD, NEWOBJ, INST, OBJ, extension codes,
  persistent ids) are refused.

What is refused raises ``UnsafePickle``, whose message names what the pickle asked for.
A function defined in a notebook, a lambda, a closure, a helper it calls, modules such as
``torch`` or ``math`` and a global tensor all load as ``cloudpickle.loads`` loads them.
"""

from __future__ import annotations

import collections
import io
import pickle
import types
from typing import Any

__all__ = ["UnsafePickle", "safe_loads"]


class UnsafePickle(pickle.UnpicklingError):
    """The pickle asked for something a plain function answer never needs."""


def _load_tensor_bytes(data: bytes) -> Any:
    """torch.storage._load_from_bytes, but never unpickling anything but tensors."""
    import torch

    return torch.load(io.BytesIO(data), weights_only=True)


class _Unpickler(pickle._Unpickler):  # the pure-Python unpickler: its opcodes can be replaced
    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self._built: set[int] = set()  # ids of the functions this load made
        from cloudpickle import cloudpickle as cp

        def make_function(code, globals_, name, argdefs, closure):
            if type(globals_) is not dict or type(code) is not types.CodeType:
                raise UnsafePickle("a function whose globals or code are not plain")
            function = cp._make_function(code, globals_, name, argdefs, closure)
            self._built.add(id(function))
            return function

        def function_setstate(function, state):
            if type(function) is not types.FunctionType or id(function) not in self._built:
                raise UnsafePickle(f"setting the state of {type(function).__name__}, not of a function it built")
            return cp._function_setstate(function, state)

        def builtin_type(name):
            if name not in ("CodeType", "CellType"):
                raise UnsafePickle(f"types.{name}")
            return cp._builtin_type(name)

        self._globals = {
            ("cloudpickle.cloudpickle", "_make_function"): make_function,
            ("cloudpickle.cloudpickle", "_function_setstate"): function_setstate,
            ("cloudpickle.cloudpickle", "_builtin_type"): builtin_type,
            ("cloudpickle.cloudpickle", "_make_cell"): cp._make_cell,
            ("cloudpickle.cloudpickle", "_make_empty_cell"): cp._make_empty_cell,
            ("cloudpickle.cloudpickle", "subimport"): cp.subimport,
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("torch.storage", "_load_from_bytes"): _load_tensor_bytes,
        }
        self._callable = {id(f) for f in self._globals.values()}
        self._callable |= {id(types.CodeType), id(types.CellType)}
        try:
            import torch._utils

            self._globals["torch._utils", "_rebuild_tensor_v2"] = torch._utils._rebuild_tensor_v2
            self._callable.add(id(torch._utils._rebuild_tensor_v2))
        except ImportError:  # pragma: no cover - torch is a dependency
            pass

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._globals:
            return self._globals[module, name]
        if module.split(".")[0] == "cloudpickle":  # its class and enum builders: not a plain function
            raise UnsafePickle(
                "a class, or an object of one, defined in the notebook (define what your function needs inside it)"
            )
        if any(part.startswith("_") for part in (*module.split("."), *name.split("."))):
            raise UnsafePickle(f"the private name {module}.{name}")
        found = super().find_class(module, name)
        if not (callable(found) or isinstance(found, types.ModuleType)):
            raise UnsafePickle(f"{module}.{name}, which is neither a function, a class nor a module")
        return found

    def load_reduce(self) -> None:
        function = self.stack[-2]
        if id(function) not in self._callable:
            name = getattr(function, "__qualname__", None) or type(function).__name__
            raise UnsafePickle(f"a call to {getattr(function, '__module__', None) or ''}.{name} while loading")
        super().load_reduce()

    def _refuse(self) -> None:
        raise UnsafePickle("an object built by calling its class (a pickle opcode a function never needs)")

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.REDUCE[0]] = load_reduce
    for _opcode in (
        pickle.BUILD,
        pickle.NEWOBJ,
        pickle.NEWOBJ_EX,
        pickle.INST,
        pickle.OBJ,
        pickle.EXT1,
        pickle.EXT2,
        pickle.EXT4,
        pickle.PERSID,
        pickle.BINPERSID,
    ):
        dispatch[_opcode[0]] = _refuse
    del _opcode


def safe_loads(data: bytes) -> Any:
    """The object ``data`` pickles, if it is what cloudpickle writes for a function (see the module
    docstring); otherwise ``UnsafePickle``, before anything the pickle names has been called."""
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    return _Unpickler(bytes(data)).load()
