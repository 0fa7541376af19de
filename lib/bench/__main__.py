"""python -m lib.bench {tokenizer} [options]"""

import argparse

from lib.bench import tokenizer


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lib.bench", description="Benchmarks that print ratios.")
    commands = parser.add_subparsers(dest="command", required=True)
    tokenizer.add_arguments(commands.add_parser("tokenizer", help="BPE training and encoding vs HF tokenizers"))
    args = parser.parse_args(argv)
    if args.command == "tokenizer":
        tokenizer.run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
