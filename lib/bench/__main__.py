"""python -m lib.bench {tokenizer,attention} [options]"""

import argparse

from lib.bench import attention, tokenizer


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lib.bench", description="Benchmarks that print ratios.")
    commands = parser.add_subparsers(dest="command", required=True)
    tokenizer.add_arguments(commands.add_parser("tokenizer", help="BPE training and encoding vs HF tokenizers"))
    attention.add_arguments(commands.add_parser("attention", help="naive, tiled, Triton and SDPA attention"))
    args = parser.parse_args(argv)
    if args.command == "tokenizer":
        tokenizer.run(args)
    else:
        attention.main(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
