"""Why decoding is bound by memory bandwidth: bytes read and FLOPs of one decode step (chapter 6).

One decode step feeds one new token per sequence through the model. Every weight is read
once per step, whatever the batch (the sequences share them), and every sequence reads its
own cache. Each weight read does one multiply-add per sequence: 2 FLOPs per parameter per
sequence, so at batch 1 a 2-byte weight yields 1 FLOP per byte. A GPU does hundreds of
FLOPs in the time it reads one byte, so the step waits on memory: its time is at least
bytes read / bandwidth.

Quantized weights shrink the bytes, but not to their nominal bits: each group of weights
carries a scale (and sometimes a zero point) in a wider format.

Symbols: P parameters, B sequences, C tokens each sequence's query reads (its cache plus
itself), L layers, H query heads, Hkv KV heads, D head width.
"""

from __future__ import annotations

from dataclasses import dataclass

from lib.kv_cache import kv_cache_bytes
from lib.validation import check_heads, positive_int

__all__ = ["DecodeStep", "decode_step", "quantized_weight_bytes"]


@dataclass(frozen=True)
class DecodeStep:
    """What one decode step of a batch reads from memory and computes."""

    batch: int
    weight_bytes: int  # every weight, read once for the whole batch
    kv_bytes: int  # every sequence's keys and values, B caches of C tokens
    flops: int  # matrix products: weights (2·P per sequence) and attention (4·L·H·D·C per sequence)

    @property
    def bytes_read(self) -> int:
        return self.weight_bytes + self.kv_bytes

    @property
    def flop_per_byte(self) -> float:
        return self.flops / self.bytes_read

    def floor_ms(self, bandwidth_bytes_per_s: float) -> float:
        """The least time the step can take: its bytes at full bandwidth, with infinitely fast arithmetic."""
        return 1e3 * self.bytes_read / bandwidth_bytes_per_s

    def compute_ms(self, flops_per_s: float) -> float:
        """The time its arithmetic needs at a given peak rate, with infinitely fast memory."""
        return 1e3 * self.flops / flops_per_s


def decode_step(
    *, params: int, layers: int, n_heads: int, kv_heads: int, head_dim: int, context: int, batch: int = 1,
    bytes_per_param: float = 2, kv_bytes_per_element: int = 2,
) -> DecodeStep:  # fmt: skip
    """Bytes and FLOPs of one decode step: B sequences, each query reading ``context`` cached tokens.

    FLOPs count the matrix products only: each parameter takes part in one multiply-add per
    sequence (the embedding lookup does none, which this ignores), and each of the H query
    heads of each layer scores C keys (2·D per key) and mixes C values (2·D per value).
    """
    sizes = {"params": params, "layers": layers, "n_heads": n_heads, "kv_heads": kv_heads, "head_dim": head_dim,
             "context": context, "batch": batch}  # fmt: skip
    sizes = {name: positive_int(f"decode_step: {name}", value) for name, value in sizes.items()}
    params, layers, n_heads, kv_heads, head_dim, context, batch = sizes.values()
    check_heads(n_heads, kv_heads, where="decode_step", kv_name="kv_heads")
    kv = kv_cache_bytes(layers=layers, batch=batch, seq_len=context, kv_heads=kv_heads, head_dim=head_dim,
                        bytes_per_element=kv_bytes_per_element)  # fmt: skip
    flops = batch * (2 * params + 4 * layers * n_heads * head_dim * context)
    return DecodeStep(batch, round(params * bytes_per_param), kv, flops)


def quantized_weight_bytes(
    params: int, *, bits: int = 4, group_size: int = 128, scale_bytes: int = 2, zero_point_bytes: int = 0
) -> int:
    """Bytes of weights stored at ``bits`` each, with one scale (and zero point) per group.

    Group-wise formats (GPTQ, AWQ and the like) give every ``group_size`` consecutive weights
    their own fp16 scale: 4 bits become 4 + 16/128 = 4.125 bits per weight at groups of 128.
    """
    if params < 1 or bits < 1 or group_size < 1 or scale_bytes < 0 or zero_point_bytes < 0:
        raise ValueError(
            f"quantized_weight_bytes: need params, bits, group_size >= 1 and metadata bytes >= 0, got "
            f"params={params}, bits={bits}, group_size={group_size}, scale_bytes={scale_bytes}, "
            f"zero_point_bytes={zero_point_bytes}"
        )
    groups = -(-params // group_size)
    return -(-params * bits // 8) + groups * (scale_bytes + zero_point_bytes)
