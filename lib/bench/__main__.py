"""python -m lib.bench COMMAND [options]: every module in lib/bench is one command.

A benchmark module (``lib/bench/<command>.py``) has a docstring whose first line is its
help text, ``add_arguments(parser)`` and ``main(args)``. Adding a benchmark means adding
its module; this file finds it.
"""

import argparse
import importlib
import pkgutil

import lib.bench


def commands() -> list[str]:
    return sorted(info.name for info in pkgutil.iter_modules(lib.bench.__path__) if not info.name.startswith("_"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lib.bench", description="Benchmarks that print ratios.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name in commands():
        module = importlib.import_module(f"lib.bench.{name}")
        modules[name] = module
        help_text = (module.__doc__ or name).strip().splitlines()[0]
        module.add_arguments(subparsers.add_parser(name, help=help_text, description=module.__doc__))
    args = parser.parse_args(argv)
    modules[args.command].main(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
