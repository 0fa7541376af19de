"""Benchmarks that print ratios measured side by side in one run.

    python -m lib.bench tokenizer     # our BPE trainers and encoder vs HF tokenizers
    python -m lib.bench attention     # naive, tiled, (Triton,) SDPA: time and memory vs N

Timings on a shared machine are noisy: compare the ratios printed by one run, never the
absolute seconds across runs. Tests call these functions at tiny sizes, without timing.
"""
