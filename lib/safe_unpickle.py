"""Loading a learner's pickled function without running anything of theirs while it loads.

``check()`` records a function answer with ``cloudpickle`` (by value: its code, defaults,
closure and the globals it uses), and the hidden-case sandbox (``lib.hidden_runs``) loads it
again. A plain ``pickle.loads`` would call whatever the pickle names: an answer whose
``__reduce__`` returns ``(eval, (source,))`` runs that source inside the grading process
before the code policy has read the function, and can switch the policy off. This loader
rebuilds exactly what cloudpickle writes for a function and nothing else:

* a call while loading (REDUCE) may only be one of cloudpickle's own builders (a function,
  its cells, its state, a code object, an imported module) or torch's tensor rebuild, each
  with arguments of the plain types cloudpickle writes;
* a global it names must be a module-level function, class or module, reached by a public
  name of a module already loaded or of a few packages (torch, numpy, math, ...): never a
  dict, a dunder attribute, a private helper or an attribute chain;
* a function's state is only ever set on a function this load built, and tensors inside
  it load with ``torch.load(weights_only=True)``;
* only plain lists, sets and dicts are filled, with keys whose hash runs no code (filling a
  function whose ``append`` attribute is itself would call it);
* the opcodes that call other things (BUILD, NEWOBJ, INST, OBJ, extension codes,
  persistent ids, out-of-band buffers) are refused.

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


# The builtin singletons a function's constants may name: values, nothing to call.
_CONSTANTS = {("builtins", "Ellipsis"): Ellipsis, ("builtins", "NotImplemented"): NotImplemented}


class UnsafePickle(pickle.UnpicklingError):
    """The pickle asked for something a plain function answer never needs."""


_SLOTS = {  # what cloudpickle's _function_getstate puts in a function's slot state, and the types it may hold
    "__name__": (str,), "__qualname__": (str,), "__module__": (str, type(None)), "__doc__": (str, type(None)),
    "__annotations__": (dict,), "__kwdefaults__": (dict, type(None)), "__defaults__": (tuple, type(None)),
    "__closure__": (tuple, type(None)), "_cloudpickle_submodules": (list,), "__globals__": (dict,),
}  # fmt: skip
# Modules a function answer may bring: the ones already loaded, and these packages (importing
# any other could run a program of its own, as ``venv.__main__`` does on import).
_IMPORTABLE = {"torch", "numpy", "math", "cmath", "functools", "itertools", "operator", "collections", "typing",
               "random", "statistics", "string", "re", "dataclasses", "types", "lib"}  # fmt: skip
_PLAIN = (str, int, float, bool, bytes, type(None))


def _plain_key(key: Any) -> bool:
    """A key whose hash and equality run no code: text, numbers, bytes, None, tuples of them."""
    return type(key) in _PLAIN or (type(key) is tuple and all(_plain_key(item) for item in key))


def _module(name: Any) -> types.ModuleType:
    """``name``'s module, imported only if it is already loaded or in ``_IMPORTABLE``."""
    import importlib
    import sys

    if type(name) is not str or any(part.startswith("_") for part in name.split(".")):
        raise UnsafePickle(f"the module name {name!r}")
    if name not in sys.modules and name.split(".")[0] not in _IMPORTABLE:
        raise UnsafePickle(f"an import of {name}, which a function answer does not need")
    return importlib.import_module(name)


def _load_tensor_bytes(data: bytes) -> Any:
    """torch.storage._load_from_bytes, but never unpickling anything but tensors."""
    import torch

    if type(data) is not bytes:
        raise UnsafePickle("tensor data that is not bytes")
    return torch.load(io.BytesIO(data), weights_only=True)


class _Unpickler(pickle._Unpickler):  # the pure-Python unpickler: its opcodes can be replaced
    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data), fix_imports=False)  # no Python 2 renaming past the name check
        self._built: list[types.FunctionType] = []  # the functions this load made (kept, so no id is reused)
        from cloudpickle import cloudpickle as cp

        def make_function(code, globals_, name, argdefs, closure):
            cells = closure is None or (type(closure) is tuple and all(type(c) is types.CellType for c in closure))
            named = type(name) in (str, type(None))
            if not (type(code) is types.CodeType and type(globals_) is dict and named and cells):
                raise UnsafePickle("a function whose code, globals, name or closure are not plain")
            if argdefs is not None and type(argdefs) is not tuple:
                raise UnsafePickle("a function whose defaults are not a tuple")
            function = cp._make_function(code, globals_, name, argdefs, closure)
            self._built.append(function)
            return function

        def function_setstate(function, state):
            if not any(function is built for built in self._built):
                raise UnsafePickle(f"setting the state of {type(function).__name__}, not of a function it built")
            if not (type(state) is tuple and len(state) == 2 and all(type(part) is dict for part in state)):
                raise UnsafePickle("a function state that is not two plain dicts")
            attributes, slots = dict(state[0]), dict(state[1])
            for key, value in slots.items():
                if key not in _SLOTS or type(value) not in _SLOTS[key]:
                    raise UnsafePickle(f"the function attribute {key!r} of type {type(value).__name__}")
            closure = slots.get("__closure__")
            if closure is not None and not all(type(cell) is types.CellType for cell in closure):
                raise UnsafePickle("a closure that is not made of cells")
            if not all(type(module) is types.ModuleType for module in slots.get("_cloudpickle_submodules", [])):
                raise UnsafePickle("submodules that are not modules")
            if not all(type(key) is str for key in (*attributes, *slots.get("__globals__", {}))):
                raise UnsafePickle("attribute or global names that are not text")
            return cp._function_setstate(function, (attributes, slots))

        def builtin_type(name):
            if name not in ("CodeType", "CellType"):
                raise UnsafePickle(f"types.{name}")
            return cp._builtin_type(name)

        def make_cell(*value):
            if len(value) > 1:
                raise UnsafePickle("a cell of more than one value")
            return cp._make_cell(*value)

        def ordered_dict(*items):
            if items and not (len(items) == 1 and type(items[0]) in (list, tuple, dict)):
                raise UnsafePickle("an OrderedDict built from something other than plain items")
            pairs = items[0].items() if items and type(items[0]) is dict else (items[0] if items else ())
            if not all(type(pair) is tuple and len(pair) == 2 and _plain_key(pair[0]) for pair in pairs):
                raise UnsafePickle("an OrderedDict whose keys are not plain")
            return collections.OrderedDict(*items)

        def code_type(*fields):
            if not all(type(field) in (int, bytes, str, tuple) for field in fields):
                raise UnsafePickle("a code object built from fields that are not plain")
            return types.CodeType(*fields)

        def cell_type(*value):
            if len(value) > 1:
                raise UnsafePickle("a cell of more than one value")
            return types.CellType(*value)

        self._globals = {
            ("cloudpickle.cloudpickle", "_make_function"): make_function,
            ("cloudpickle.cloudpickle", "_function_setstate"): function_setstate,
            ("cloudpickle.cloudpickle", "_builtin_type"): builtin_type,
            ("cloudpickle.cloudpickle", "_make_cell"): make_cell,
            ("cloudpickle.cloudpickle", "_make_empty_cell"): lambda: cp._make_empty_cell(),
            ("cloudpickle.cloudpickle", "subimport"): _module,
            ("collections", "OrderedDict"): ordered_dict,
            ("torch.storage", "_load_from_bytes"): _load_tensor_bytes,
        }
        # the types _builtin_type hands back, called by the pickle: checked stand-ins
        self._calls = {id(types.CodeType): code_type, id(types.CellType): cell_type}
        self._callable = {id(f) for f in self._globals.values()} | set(self._calls)
        try:
            import torch
            import torch._utils

            def rebuild_tensor(storage, offset, size, stride, requires_grad, hooks, metadata=None):
                if not isinstance(storage, (torch.TypedStorage, torch.UntypedStorage)):
                    raise UnsafePickle("a tensor whose storage is not a storage")
                shapes = all(type(part) is tuple and all(type(n) is int for n in part) for part in (size, stride))
                if not (type(offset) is int and shapes and type(requires_grad) is bool):
                    raise UnsafePickle("a tensor whose offset, size or stride are not plain")
                if type(hooks) is not collections.OrderedDict or hooks or metadata not in (None, {}):
                    raise UnsafePickle("a tensor with hooks or metadata")
                return torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)

            self._globals["torch._utils", "_rebuild_tensor_v2"] = rebuild_tensor
            self._callable.add(id(rebuild_tensor))
        except ImportError:  # pragma: no cover - torch is a dependency
            pass

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._globals:
            return self._globals[module, name]
        if (module, name) in _CONSTANTS:  # `x[..., 0]` pickles the Ellipsis by name (a hostile batch's honest
            return _CONSTANTS[module, name]  # rope-pairs was refused for it)
        if module.split(".")[0] == "cloudpickle":  # its class and enum builders: not a plain function
            raise UnsafePickle("a class, or an object of one, defined in the notebook (a plain function is needed)")
        if "." in name or name.startswith("_") or any(part.startswith("_") for part in module.split(".")):
            raise UnsafePickle(f"the name {module}.{name}, private or reached through attributes")
        found = getattr(_module(module), name, None)
        if found is None:
            raise UnsafePickle(f"{module}.{name}, which is not there")
        if not (callable(found) or isinstance(found, types.ModuleType)):
            raise UnsafePickle(f"{module}.{name}, which is neither a function, a class nor a module")
        return found

    def load_reduce(self) -> None:
        function, args = self.stack[-2], self.stack[-1]
        if id(function) not in self._callable:
            name = getattr(function, "__qualname__", None) or type(function).__name__
            raise UnsafePickle(f"a call to {getattr(function, '__module__', None) or ''}.{name} while loading")
        if type(args) is not tuple:
            raise UnsafePickle("a call whose arguments are not a tuple")
        self.stack[-2] = self._calls.get(id(function), function)  # CodeType and CellType: their checked stand-ins
        super().load_reduce()

    # Filling a container calls its append, extend, add or __setitem__, and hashes its keys: only
    # for plain lists, sets and dicts, with keys whose hash runs no code.
    def _target(self, depth: int | None, kinds: tuple[type, ...]) -> None:
        target = self.metastack[-1][-1] if depth is None else self.stack[depth]
        if type(target) not in kinds:
            raise UnsafePickle(f"filling a {type(target).__name__}, not a plain container")

    def _keys(self, keys) -> None:
        if not all(_plain_key(key) for key in keys):
            raise UnsafePickle("a dict or set key that is not plain")

    def load_append(self) -> None:
        self._target(-2, (list,))
        super().load_append()

    def load_appends(self) -> None:
        self._target(None, (list,))
        super().load_appends()

    def load_additems(self) -> None:
        self._target(None, (set,))
        self._keys(self.stack)
        super().load_additems()

    def load_frozenset(self) -> None:
        self._keys(self.stack)
        super().load_frozenset()

    def load_setitem(self) -> None:
        self._target(-3, (dict, collections.OrderedDict))
        self._keys([self.stack[-2]])
        super().load_setitem()

    def load_setitems(self) -> None:
        self._target(None, (dict, collections.OrderedDict))
        self._keys(self.stack[0::2])
        super().load_setitems()

    def load_dict(self) -> None:
        self._keys(self.stack[0::2])
        super().load_dict()

    def _refuse(self) -> None:
        raise UnsafePickle("an object built by calling its class (a pickle opcode a function never needs)")

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.REDUCE[0]] = load_reduce
    for _opcode, _method in (
        (pickle.APPEND, load_append),
        (pickle.APPENDS, load_appends),
        (pickle.ADDITEMS, load_additems),
        (pickle.FROZENSET, load_frozenset),
        (pickle.SETITEM, load_setitem),
        (pickle.SETITEMS, load_setitems),
        (pickle.DICT, load_dict),
    ):
        dispatch[_opcode[0]] = _method
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
        pickle.NEXT_BUFFER,
    ):
        dispatch[_opcode[0]] = _refuse
    del _opcode, _method


def safe_loads(data: bytes) -> Any:
    """The object ``data`` pickles, if it is what cloudpickle writes for a function (see the module
    docstring); otherwise ``UnsafePickle``, before anything the pickle names has been called."""
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    return _Unpickler(bytes(data)).load()
