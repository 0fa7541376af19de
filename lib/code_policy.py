"""What a learner's function is, read from its code before it runs (``lib.grading``, ``lib.hidden_runs``).

A function exercise asks the learner to write something the library or torch already does:
``stands_for`` names the library's functions, ``forbids`` everything else that does the job
(``torch.softmax``, ``torch.Tensor.softmax``, ``F.rms_norm``, ``nn.Unfold``, ...). A list of
names alone is passed by any route it does not name, so ``refusal`` judges the function by
what it is:

* its code comes from a file of the library or of an installed package (the code object's
  ``co_filename``, whatever name it is reached by: ``importlib.reload``, ``lib/vit.py``
  loaded under another module name, ``types.FunctionType(f.__code__, ...)``);
* its bytecode is a forbidden function's, instruction for instruction (``exec`` of the
  library's source in the notebook: "this is lib.attention.softmax, copied");
* its code, or the code of any notebook function, class or lambda it reaches through its
  globals, closure, defaults or nested functions, refers to a forbidden callable: by a name
  resolved in its globals, an attribute chain (``torch.nn.functional.softmax``, ``F.softmax``),
  a method of an unknown object (``s.softmax(-1)``), an instance of a forbidden class
  (``nn.RMSNorm(4)``), or code it runs without showing it (``exec``, ``eval``, ``importlib``).

What the check cannot read (``getattr(torch, "soft" + "max")``) the guard catches while the
hidden cases run (``lib.safe_call.forbid_calls``, given ``Policy.forbidden`` and ``Policy.homes``).
"""

from __future__ import annotations

import dis
import functools
import inspect
import site
import sys
import sysconfig
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lib.safe_call import GradingTimeout, call_with_timeout, describe_error, resolve_dotted, unloaded

__all__ = ["Policy", "policy", "exercise_policy", "refusal", "read_before_running", "library_file", "fingerprint"]
__all__ += ["UNSHOWN", "USES_FEEDBACK"]

USES_FEEDBACK = "your function uses {name}, which does this exercise's work: write it yourself"
COPIED_FEEDBACK = "this is {name}, copied: write it yourself"
ORIGIN_FEEDBACK = "your function's code comes from {file} ({qualname}), not from your notebook: write it yourself"
UNSHOWN_FEEDBACK = "your function runs code it does not show ({name}): write the function out"
# Code that runs other code without showing it: refused in every function exercise that has a policy.
UNSHOWN = (
    "builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__", "importlib.import_module",
    "importlib.reload", "importlib.util.spec_from_file_location", "importlib.util.module_from_spec",
    "inspect.getsource", "runpy.run_path", "runpy.run_module",
)  # fmt: skip
LIMIT = 256  # functions and classes read at most: a learner's program is small


@dataclass(frozen=True)
class Policy:
    """What a learner's function may not be, use or copy, resolved to objects."""

    forbidden: tuple[tuple[Any, str], ...]  # (object, dotted name): the runtime guard refuses these too
    homes: tuple[tuple[Any, str], ...]  # (module or class, attribute) where each forbidden object lives
    methods: dict[str, str]  # a method's attribute name ("softmax") -> its dotted name ("torch.Tensor.softmax")
    classes: tuple[tuple[type, str], ...]  # forbidden classes: their instances are refused too
    copies: dict[tuple, str]  # fingerprint of a forbidden function's code -> its dotted name
    unshown: frozenset[str]  # dotted names of what runs code it does not show

    @property
    def guarded(self) -> list[tuple[Any, str]]:
        """The (object, name) pairs the runtime guard refuses: all but ``unshown`` (swapping
        ``__import__`` out of builtins would break torch's own lazy imports)."""
        return [(obj, name) for obj, name in self.forbidden if name not in self.unshown]

    def name_of(self, value: Any) -> str | None:
        for obj, name in self.forbidden:
            if value is obj:
                return name
        return None


def policy(stands_for: Sequence[str], forbids: Sequence[str], reference: Any = None) -> Policy:
    """The policy of an exercise that stands for ``stands_for`` and forbids ``forbids`` (dotted
    names), with its ``reference`` (itself refused, and its code as good as the library's)."""
    skipped = unloaded(forbids)  # names of a package not loaded yet are read once it is
    return _policy(tuple(stands_for), tuple(d for d in forbids if d.split(".")[0] not in skipped), reference)


@functools.lru_cache(maxsize=64)
def _policy(stands_for: tuple[str, ...], forbids: tuple[str, ...], reference: Any) -> Policy:
    forbidden, homes, methods, classes, copies = [], [], {}, [], {}
    for dotted in dict.fromkeys(stands_for + forbids + UNSHOWN):
        obj, owner, attribute = resolve_dotted(dotted)
        forbidden.append((obj, dotted))
        if dotted not in UNSHOWN:
            homes.append((owner, attribute))
        if isinstance(owner, type):
            methods[attribute] = dotted
        if isinstance(obj, type):
            classes.append((obj, dotted))
            for key, value in vars(obj).items():
                if isinstance(value, types.FunctionType) and key in ("forward", "__call__"):
                    copies[fingerprint(value.__code__)] = f"{dotted}.{key}"
        code = getattr(_unwrapped(obj), "__code__", None)
        if isinstance(code, types.CodeType):
            copies[fingerprint(code)] = dotted
    if reference is not None and stands_for:
        forbidden.append((reference, stands_for[0]))
        code = getattr(_unwrapped(reference), "__code__", None)
        if isinstance(code, types.CodeType):
            copies.setdefault(fingerprint(code), stands_for[0])
    return Policy(tuple(forbidden), tuple(homes), methods, tuple(classes), copies, frozenset(UNSHOWN))


def exercise_policy(exercise: Any) -> Policy | None:
    """A function exercise's policy, from its ``stands_for``, ``forbids`` and reference; None
    when it declares neither (an ad hoc exercise, or one a test strips of its guard)."""
    if not (exercise.stands_for or exercise.forbids):
        return None
    return policy(exercise.stands_for, exercise.forbids, exercise.reference)


def read_before_running(answer: Any, rules: Policy, seconds: float = 10.0) -> str:
    """``refusal`` under a time limit, or "" when nothing is refused. An object the reading
    cannot get through (its ``__class__`` raises) is refused too: a plain function can be read."""
    try:
        return call_with_timeout(refusal, (answer, rules), seconds) or ""
    except (Exception, SystemExit, GeneratorExit, GradingTimeout) as error:  # a learner's object may raise anything
        return f"your function could not be read before it ran ({describe_error(error)}): write a plain function"


def _unwrapped(value: Any) -> Any:
    if isinstance(value, (staticmethod, classmethod, types.MethodType)):
        return value.__func__
    if isinstance(value, functools.partial):
        return value.func
    return value


def fingerprint(code: types.CodeType) -> tuple:
    """The code object as instructions: bytecode, the names and constants it uses, nested code
    alike; not its file, line numbers, name or local variable names."""
    consts = tuple(_constant(c) for c in code.co_consts)
    # The instructions as dis reads them, in a form two compilers of the same source agree on (one
    # may call a method with LOAD_METHOD, the other with LOAD_ATTR after a NULL; jumps move with them).
    ops = tuple(_instruction(i) for i in dis.get_instructions(code) if i.opname not in _NOT_COMPARED)
    return (ops, code.co_names, consts, code.co_argcount, code.co_kwonlyargcount, len(code.co_freevars))


def _constant(value: Any) -> Any:
    if isinstance(value, types.CodeType):
        return fingerprint(value)
    if isinstance(value, str):  # a docstring: its indentation moves with the source (a method's, dedented)
        return ("str", inspect.cleandoc(value))
    return (type(value).__name__, repr(value))


_NOT_COMPARED = {"CACHE", "RESUME", "PUSH_NULL", "PRECALL", "NOP", "EXTENDED_ARG", "KW_NAMES"}
_JUMPS = set(dis.hasjrel) | set(dis.hasjabs)


def _instruction(instruction: dis.Instruction) -> tuple:
    name = "LOAD_ATTR" if instruction.opname == "LOAD_METHOD" else instruction.opname
    if instruction.opcode in _JUMPS:
        return (name,)
    if name.startswith(("LOAD_FAST", "STORE_FAST", "DELETE_FAST")):
        return (name, instruction.arg)  # a local variable by number: renaming it changes nothing
    return (name, str(instruction.argrepr).removeprefix("NULL|self + ").removeprefix("NULL + "))


@functools.cache
def _library_roots() -> tuple[tuple[Path, str], ...]:
    """(folder, what to call it) for the library and every place packages are installed."""
    installed = sysconfig.get_paths()
    paths = {installed.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    paths |= set(site.getsitepackages()) | {site.getusersitepackages()}
    places = [(Path(path).resolve(), "") for path in sorted(paths - {None, ""})]
    return ((Path(__file__).resolve().parent, "lib"), *places)


def library_file(filename: str) -> str | None:
    """The file a code object comes from, as a short path ("lib/vit.py", "torch/nn/functional.py"),
    when it is a file of the library, the standard library or an installed package; else None."""
    if filename.startswith("<frozen"):
        return filename.strip("<>")
    if filename.startswith("<"):  # "<string>" (exec), "<ipython-input-...>", "<stdin>": written here
        return None
    try:
        path = Path(filename).resolve()
    except (OSError, ValueError, RuntimeError):
        return None
    for root, label in sorted(_library_roots(), key=lambda entry: -len(entry[0].parts)):  # the closest first
        if path.is_relative_to(root):
            relative = path.relative_to(root).as_posix()
            return f"{label}/{relative}" if label else relative
    return None


def _entry_points(answer: Any) -> tuple[list[Any], str | None]:
    """The functions and classes a learner's answer starts from, or a refusal of the answer itself."""
    inner = _unwrapped(answer)
    if isinstance(inner, types.FunctionType):
        return [inner], None
    if isinstance(inner, (types.BuiltinFunctionType, types.MethodWrapperType, types.MethodDescriptorType)):
        owner = getattr(inner, "__module__", None) or type(getattr(inner, "__self__", None)).__name__
        return [], f"that is {owner}.{getattr(inner, '__name__', '?')}, a built-in function, not one of yours"
    cls = inner if isinstance(inner, type) else type(inner)
    origin = _class_origin(cls)
    if origin is not None:
        return [], f"that is {cls.__module__}.{cls.__qualname__} from {origin}, not a function of yours"
    return [cls], None


def _class_origin(cls: type) -> str | None:
    """Where a class comes from, like ``library_file``: its functions' file, else its module's."""
    for value in list(vars(cls).values()):
        value = _unwrapped(value.fget if isinstance(value, property) else value)
        if isinstance(value, types.FunctionType):
            return library_file(value.__code__.co_filename)
    if cls.__module__ == "builtins":
        return "builtins"
    filename = getattr(sys.modules.get(cls.__module__), "__file__", None)
    return library_file(filename) if isinstance(filename, str) else None


def refusal(answer: Any, rules: Policy) -> str | None:
    """Why the learner's ``answer`` is refused before it runs (the feedback, naming what was found),
    or None when nothing in what it reaches is its exercise's work done for it."""
    own = rules.name_of(answer) or rules.name_of(_unwrapped(answer))
    if own is not None:
        return f"that is {own} itself, not a function of yours: write it yourself"
    queue, refused = _entry_points(answer)
    if refused:
        return refused
    if not isinstance(_unwrapped(answer), (types.FunctionType, type)):  # a callable object: what it holds
        found = _held(answer, rules, queue)
        if found:
            return found
    seen: set[int] = set()
    first = True
    while queue and len(seen) < LIMIT:
        item = queue.pop(0)
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, type):
            queue += _class_functions(item)
            continue
        code = item.__code__
        origin = library_file(code.co_filename)
        copied = rules.copies.get(fingerprint(code))
        if origin is not None and (first or copied):
            return ORIGIN_FEEDBACK.format(file=origin, qualname=code.co_qualname)
        first = False
        if copied:
            return COPIED_FEEDBACK.format(name=copied)
        if origin is not None:  # a library function that does not do the work: allowed, not read further
            continue
        found = _read_function(item, rules, queue)
        if found:
            return found
    return None


def _class_functions(cls: type) -> list[Any]:
    """The functions of the learner's own classes in ``cls``'s MRO (not the library's or torch's)."""
    found = []
    for klass in cls.__mro__:
        if klass is object or _class_origin(klass) is not None:
            continue
        for value in list(vars(klass).values()):
            value = value.fget if isinstance(value, property) else _unwrapped(value)
            if isinstance(value, types.FunctionType):
                found.append(value)
    return found


def _judge(value: Any, rules: Policy, queue: list) -> str | None:
    """A refusal when ``value`` (something the code refers to) is forbidden, else queue what to read."""
    name = rules.name_of(value) or rules.name_of(_unwrapped(value))
    if name is not None:
        return (UNSHOWN_FEEDBACK if name in rules.unshown else USES_FEEDBACK).format(name=name)
    for cls, dotted in rules.classes:
        try:
            if isinstance(value, cls):
                return USES_FEEDBACK.format(name=f"a {dotted}")
        except Exception:  # a learner's __class__ property may raise
            continue
    inner = _unwrapped(value)
    if isinstance(inner, types.FunctionType):
        queue.append(inner)
    elif isinstance(inner, type) and _class_origin(inner) is None:
        queue.append(inner)
    elif not isinstance(inner, (type, types.ModuleType)) and _class_origin(type(inner)) is None:
        queue.append(type(inner))  # an object of the learner's class: its methods, and what it holds
        return _held(inner, rules, queue) if len(queue) < LIMIT else None
    return None


def _held(instance: Any, rules: Policy, queue: list) -> str | None:
    """Judge what an object of the learner's holds (its attributes, and the values of dicts among them)."""
    try:
        held = list(vars(instance).values())
    except TypeError:  # no __dict__
        return None
    for value in held + [v for d in held if type(d) is dict for v in list(d.values())]:
        found = _judge(value, rules, queue)
        if found:
            return found
    return None


def _static(owner: Any, name: str) -> Any:
    try:
        return inspect.getattr_static(owner, name)
    except AttributeError:
        return None


def _read_function(function: types.FunctionType, rules: Policy, queue: list) -> str | None:
    """Read one of the learner's functions: what its code refers to, its closure and defaults."""
    closure = {}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or (), strict=False):
        try:
            closure[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    values = list(function.__defaults__ or ()) + list((function.__kwdefaults__ or {}).values())
    for value in values + list(closure.values()):
        found = _judge(value, rules, queue)
        if found:
            return found
    builtins = function.__builtins__ if isinstance(function.__builtins__, dict) else vars(function.__builtins__)
    return _read_code(function.__code__, function.__globals__, builtins, closure, rules, queue)


_NOTHING = object()
_SKIP = {
    "CACHE",
    "PRECALL",
    "EXTENDED_ARG",
    "NOP",
    "PUSH_NULL",
    "KW_NAMES",
    "COPY_FREE_VARS",
    "RESUME",
    "SWAP",
    "POP_TOP",
}


def _read_code(code, globals_, builtins, closure, rules: Policy, queue: list) -> str | None:
    chain: Any = _NOTHING  # the module or class the next attribute is read from, when known
    imported: Any = _NOTHING
    last_const: Any = None
    for instruction in dis.get_instructions(code):
        op, arg = instruction.opname, instruction.argval
        value: Any = _NOTHING
        if op in _SKIP:
            continue
        if op in ("LOAD_GLOBAL", "LOAD_NAME"):
            value = globals_.get(arg, builtins.get(arg, _NOTHING))
        elif op in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
            value = closure.get(arg, _NOTHING)
        elif op == "IMPORT_NAME":
            module = sys.modules.get(arg)
            top = sys.modules.get(str(arg).split(".")[0])
            imported = module if last_const is not None else top
            value = imported
            if module is not None:
                found = _judge(module, rules, queue)
                if found:
                    return found
        elif op == "IMPORT_FROM":
            for base in (chain, imported):
                if base is not _NOTHING and base is not None:
                    attribute = _static(base, arg)
                    if attribute is not None:
                        found = _judge(attribute, rules, queue)
                        if found:
                            return found
                        if isinstance(attribute, types.ModuleType):
                            value = attribute
            value = chain if value is _NOTHING else value
        elif op in ("LOAD_ATTR", "LOAD_METHOD"):
            if isinstance(chain, (types.ModuleType, type)):
                value = _static(chain, arg)
                value = _NOTHING if value is None else value
            if value is _NOTHING and arg in rules.methods:
                return USES_FEEDBACK.format(name=rules.methods[arg])
        elif op == "LOAD_CONST":
            last_const = arg
            if isinstance(arg, types.CodeType):  # a nested function, lambda or comprehension
                found = _read_code(arg, globals_, builtins, {}, rules, queue)
                if found:
                    return found
        if value is not _NOTHING:
            found = _judge(value, rules, queue)
            if found:
                return found
        chain = value
    return None
