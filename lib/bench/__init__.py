"""Benchmarks that print ratios measured side by side in one run.

    python -m lib.bench tokenizer     # our BPE trainers and encoder vs HF tokenizers
    python -m lib.bench attention     # naive, tiled, (Triton,) SDPA: time and memory vs N
    python -m lib.bench mha           # MultiHeadAttention (fused) vs nn.MultiheadAttention
    python -m lib.bench block         # our pre-norm Block vs nn.TransformerEncoderLayer, fwd+bwd
    python -m lib.bench kv            # decode per token: KV cache vs recomputing the prefix

Each command is a module here (``lib/bench/<command>.py``); ``__main__`` finds them.

Timings on a shared machine are noisy: compare the ratios printed by one run, never the
absolute seconds across runs. Tests call these functions at tiny sizes, without timing.
"""
