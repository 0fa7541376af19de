"""KV caches: what decoding keeps between steps, and how a server lays it out (chapter 6).

Generation runs in two phases. *Prefill* pushes the whole prompt through the model once and
stores every layer's keys and values. *Decode* then feeds one new token at a time: its
query reads the stored keys and values, and its own key and value are appended. Nothing
of the prefix is recomputed, but each new query still reads a context that grows by one
entry per step.

Three containers, from simplest to what servers use:

* ``ConcatKVCache``: the plain twin. Each append concatenates, allocating a fresh tensor.
* ``KVCache``: preallocated at its maximum length and written in place (the gpt-fast
  layout); an append copies only the new entries and returns views of what is stored.
* ``PagedKVCache``: a pool of fixed-size blocks shared by many sequences, each with a
  block table (PagedAttention, Kwon et al., 2023). A sequence holds only the blocks it
  fills, ``fork`` shares a prefix's blocks between sequences, and a shared block is
  copied only when one of them writes into it (copy on write).

Grouped-query attention (GQA) and multi-query attention (MQA) shrink the cache because it
stores the ``Hkv`` key/value heads; each is expanded to the ``H`` query heads only inside
attention, never in the cache. ``kv_cache_bytes`` is the formula 2·L·B·N·h_kv·d_h·s.

Shape letters used in the comments:
    B    batch (sequences decoded together)
    Hkv  key/value heads stored (H query heads share them; H is never stored)
    T    new tokens in one append (the prompt at prefill, 1 per decode step)
    L    tokens cached so far (``len(cache)``)
    D    head width d_h
    S    block size of the paged cache (tokens per block)

Errors never leave a cache half-written: every check runs before the first write, so a
failed append changes nothing, in this sequence or any other.

Autograd: a cache stores values, not graphs. What an ``append`` returns carries gradient
to the entries appended in that call only; the earlier entries are constants. So each
step can be backpropagated on its own (a second backward does not reach into a graph the
first one freed), and generation under ``torch.no_grad`` pays nothing for it. The paged
cache's ``gather`` returns constants.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import torch

from lib.validation import non_negative_int, positive_int

__all__ = [
    "CacheFullError",
    "kv_cache_bytes",
    "blocks_needed",
    "ConcatKVCache",
    "KVCache",
    "PagedKVCache",
]


class CacheFullError(RuntimeError):
    """An append needs more room than the cache has left. The cache is unchanged."""


def kv_cache_bytes(*, layers: int, batch: int, seq_len: int, kv_heads: int, head_dim: int, bytes_per_element=2):
    """Bytes of keys and values a decoder stores: 2 · L · B · N · h_kv · d_h · s.

    Here L is the number of layers (chapter 6's symbol), not the shape letter L of this
    module's comments. The 2 counts keys and values. This is the raw tensor storage only; paging, alignment
    and bookkeeping come on top. ``bytes_per_element`` may be fractional (0.5 for 4-bit).

    >>> kv_cache_bytes(layers=32, batch=1, seq_len=4096, kv_heads=8, head_dim=128) / 2**20
    512.0
    """
    sizes = {"layers": layers, "batch": batch, "seq_len": seq_len, "kv_heads": kv_heads, "head_dim": head_dim}
    for name, value in sizes.items():
        positive_int(name, value)
    if isinstance(bytes_per_element, bool) or not isinstance(bytes_per_element, numbers.Real) or bytes_per_element <= 0:
        raise ValueError(f"bytes_per_element must be a positive number, got {bytes_per_element!r}")
    total = 2 * layers * batch * seq_len * kv_heads * head_dim * bytes_per_element
    return int(total) if float(total).is_integer() else total


def blocks_needed(n_tokens: int, block_size: int) -> int:
    """Blocks of ``block_size`` tokens that hold ``n_tokens``: ceil(n / S); 0 for no tokens."""
    block_size = positive_int("block_size", block_size)
    return -(-non_negative_int("n_tokens", n_tokens) // block_size)


def _check_entries(name: str, x, *, kv_heads: int, head_dim: int, dtype, device, leading: tuple[int, ...]) -> None:
    """Validate new keys or values of shape (*leading, Hkv, T, D) against a cache's layout."""
    layout = "(" + ", ".join([*(f"B={n}" for n in leading), f"Hkv={kv_heads}", "T", f"D={head_dim}"]) + ")"
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape {layout}, got {type(x).__name__}")
    expected_ndim = len(leading) + 3
    if x.ndim != expected_ndim:
        raise ValueError(f"{name} must have shape {layout}, got {tuple(x.shape)}")
    if tuple(x.shape[: len(leading)]) != leading:
        raise ValueError(f"{name} must have shape {layout}, got {tuple(x.shape)}")
    heads, width = x.shape[-3], x.shape[-1]
    if heads != kv_heads:
        raise ValueError(
            f"{name} has {heads} heads but the cache stores {kv_heads} KV heads (got {tuple(x.shape)}); "
            "append the key/value heads before they are expanded to the query heads"
        )
    if width != head_dim:
        raise ValueError(f"{name} has head width {width} but the cache stores D={head_dim} (got {tuple(x.shape)})")
    if x.dtype != dtype:
        raise TypeError(f"{name} has dtype {x.dtype} but the cache stores {dtype}")
    if x.device != device:
        raise ValueError(f"{name} is on {x.device} but the cache lives on {device}")


def _check_pair(k, v, **layout) -> int:
    _check_entries("k", k, **layout)
    _check_entries("v", v, **layout)
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got k: {tuple(k.shape)}, v: {tuple(v.shape)}")
    return k.shape[-2]


class ConcatKVCache:
    """The plain twin of ``KVCache``: each append concatenates, allocating a new tensor.

    Same interface and results; the cost is an allocation and a copy of the whole cache at
    every decode step, which is what preallocation avoids.
    """

    def __init__(self, batch: int, kv_heads: int, max_len: int, head_dim: int, *, dtype=torch.float32, device=None):
        self.batch = positive_int("batch", batch)
        self.kv_heads = positive_int("kv_heads", kv_heads)
        self.max_len = positive_int("max_len", max_len)
        self.head_dim = positive_int("head_dim", head_dim)
        self.dtype = dtype
        self.device = torch.empty(0, device=device).device  # "cuda" becomes "cuda:0", as tensors report it
        self.reset()

    def reset(self) -> None:
        shape = (self.batch, self.kv_heads, 0, self.head_dim)
        self.k = torch.empty(shape, dtype=self.dtype, device=self.device)  # (B, Hkv, 0, D)
        self.v = torch.empty(shape, dtype=self.dtype, device=self.device)  # (B, Hkv, 0, D)

    def __len__(self) -> int:
        return self.k.shape[2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        layout = dict(kv_heads=self.kv_heads, head_dim=self.head_dim, dtype=self.dtype, device=self.device)
        n_new = _check_pair(k, v, leading=(self.batch,), **layout)
        if len(self) + n_new > self.max_len:
            raise CacheFullError(f"appending {n_new} tokens to {len(self)} cached would pass max_len={self.max_len}")
        past_k, past_v = self.k, self.v
        self.k = torch.cat([past_k, k.detach()], dim=2)  # (B, Hkv, L + T, D): a new tensor every step
        self.v = torch.cat([past_v, v.detach()], dim=2)  # (B, Hkv, L + T, D)
        if k.requires_grad or v.requires_grad:  # the new entries keep their graph; the past is constant
            return torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        return self.k, self.v


class KVCache:
    """A contiguous cache preallocated at ``max_len`` and written in place (gpt-fast style).

    One per attention layer. ``append(k, v)`` copies the T new entries into the next free
    slots and returns views (no copies) of everything cached, ready for attention:

        cache = KVCache(batch=1, kv_heads=2, max_len=128, head_dim=16)
        keys, values = cache.append(k_prompt, v_prompt)  # prefill: T = prompt length
        keys, values = cache.append(k_new, v_new)        # decode: T = 1

    The position of the next token is ``len(cache)``; a model must give it that RoPE angle
    and align its causal mask bottom-right against the cached keys.
    The whole ``max_len`` is reserved up front, whether or not the sequence gets there:
    that reservation is what a paged cache saves.
    """

    def __init__(self, batch: int, kv_heads: int, max_len: int, head_dim: int, *, dtype=torch.float32, device=None):
        self.batch = positive_int("batch", batch)
        self.kv_heads = positive_int("kv_heads", kv_heads)
        self.max_len = positive_int("max_len", max_len)
        self.head_dim = positive_int("head_dim", head_dim)
        shape = (self.batch, self.kv_heads, self.max_len, self.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)  # (B, Hkv, max_len, D)
        self.v = torch.zeros(shape, dtype=dtype, device=device)  # (B, Hkv, max_len, D)
        self.dtype, self.device = dtype, self.k.device
        self.length = 0

    def __len__(self) -> int:
        return self.length

    @property
    def nbytes(self) -> int:
        """Bytes reserved (keys and values), used or not."""
        return self.k.nbytes + self.v.nbytes

    def reset(self) -> None:
        """Forget every entry (the storage is kept and overwritten by the next appends)."""
        self.length = 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write (B, Hkv, T, D) new keys and values; return all cached (B, Hkv, L + T, D) as views."""
        layout = dict(kv_heads=self.kv_heads, head_dim=self.head_dim, dtype=self.dtype, device=self.device)
        n_new = _check_pair(k, v, leading=(self.batch,), **layout)
        start, stop = self.length, self.length + n_new
        if stop > self.max_len:
            raise CacheFullError(
                f"appending {n_new} tokens to {start} cached would pass max_len={self.max_len}; nothing was written"
            )
        self.k[:, :, start:stop] = k.detach()  # in place: only the T new entries are copied
        self.v[:, :, start:stop] = v.detach()
        self.length = stop
        if k.requires_grad or v.requires_grad:  # the new entries keep their graph; the past is constant
            return torch.cat([self.k[:, :, :start], k], dim=2), torch.cat([self.v[:, :, :start], v], dim=2)
        return self.k[:, :, :stop], self.v[:, :, :stop]  # (B, Hkv, L + T, D) views


@dataclass
class _Sequence:
    blocks: list[int] = field(default_factory=list)  # the block table: logical block i -> physical id
    length: int = 0  # tokens stored


class PagedKVCache:
    """Keys and values of many sequences in one pool of fixed-size blocks (PagedAttention).

    The pool holds ``num_blocks`` blocks of ``block_size`` tokens each. A sequence owns a
    block table, the list of the physical blocks that hold its tokens in order: token t
    of the sequence lives in block ``table[t // S]`` at slot ``t % S``. A sequence takes a
    new block only when its last one is full, so it wastes at most S - 1 slots.

    ``fork(seq_id)`` starts a sequence that shares the parent's blocks (a shared system
    prompt, or several samples of one prompt). Blocks count their readers; the first
    write into a block that someone else reads copies it first (copy on write), so
    neither sequence ever sees the other's new tokens.

    Running out of blocks raises ``CacheFullError`` before anything is written.
    """

    def __init__(
        self, num_blocks: int, block_size: int, kv_heads: int, head_dim: int, *, dtype=torch.float32, device=None
    ):
        self.num_blocks = positive_int("num_blocks", num_blocks)
        self.block_size = positive_int("block_size", block_size)
        self.kv_heads = positive_int("kv_heads", kv_heads)
        self.head_dim = positive_int("head_dim", head_dim)
        shape = (self.num_blocks, self.kv_heads, self.block_size, self.head_dim)
        self.k_blocks = torch.zeros(shape, dtype=dtype, device=device)  # (num_blocks, Hkv, S, D)
        self.v_blocks = torch.zeros(shape, dtype=dtype, device=device)  # (num_blocks, Hkv, S, D)
        self.dtype, self.device = dtype, self.k_blocks.device
        self.ref_counts = [0] * self.num_blocks  # how many sequences read each block
        self._free = list(range(self.num_blocks - 1, -1, -1))  # a stack: pop() gives block 0 first
        self._sequences: dict[int, _Sequence] = {}
        self._next_id = 0  # ids are never reused, so a freed id stays an error

    # --- bookkeeping ---------------------------------------------------------------
    @property
    def blocks_in_use(self) -> int:
        return self.num_blocks - len(self._free)

    @property
    def free_blocks(self) -> int:
        return len(self._free)

    @property
    def sequences(self) -> list[int]:
        return list(self._sequences)

    def _get(self, seq_id) -> _Sequence:
        if seq_id not in self._sequences:
            live = sorted(self._sequences)
            raise KeyError(f"no sequence with id {seq_id!r} (freed, or never added); live ids: {live}")
        return self._sequences[seq_id]

    def length(self, seq_id: int) -> int:
        return self._get(seq_id).length

    def block_table(self, seq_id: int) -> list[int]:
        """The physical blocks of a sequence, in order (a copy)."""
        return list(self._get(seq_id).blocks)

    def add_sequence(self) -> int:
        """Start an empty sequence; it takes no block until its first append."""
        seq_id = self._next_id
        self._next_id += 1
        self._sequences[seq_id] = _Sequence()
        return seq_id

    def fork(self, seq_id: int) -> int:
        """A new sequence that shares every block of ``seq_id`` (no copy until one of them writes)."""
        parent = self._get(seq_id)
        child_id = self.add_sequence()
        self._sequences[child_id] = _Sequence(blocks=list(parent.blocks), length=parent.length)
        for block in parent.blocks:
            self.ref_counts[block] += 1
        return child_id

    def free(self, seq_id: int) -> None:
        """Drop a sequence; blocks nobody else reads return to the pool."""
        sequence = self._get(seq_id)
        for block in sequence.blocks:
            self.ref_counts[block] -= 1
            if self.ref_counts[block] == 0:
                self._free.append(block)
        del self._sequences[seq_id]

    def _take_block(self) -> int:
        block = self._free.pop()
        self.ref_counts[block] = 1
        return block

    # --- writing and reading --------------------------------------------------------
    def append(self, seq_id: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write (Hkv, T, D) new keys and values at the end of sequence ``seq_id``."""
        sequence = self._get(seq_id)
        layout = dict(kv_heads=self.kv_heads, head_dim=self.head_dim, dtype=self.dtype, device=self.device)
        n_new = _check_pair(k, v, leading=(), **layout)
        if n_new == 0:
            return
        size = self.block_size
        new_length = sequence.length + n_new
        fresh = blocks_needed(new_length, size) - len(sequence.blocks)
        # Subtle: a partly filled last block that another sequence also reads must be copied
        # before we write into it, and the copy needs a block of its own.
        copy_last = sequence.length % size != 0 and self.ref_counts[sequence.blocks[-1]] > 1
        wanted = fresh + int(copy_last)
        if wanted > len(self._free):
            blocks = "block" if wanted == 1 else "blocks"
            raise CacheFullError(
                f"sequence {seq_id} needs {wanted} more {blocks} of {size} tokens to grow from {sequence.length} "
                f"to {new_length} tokens, but only {len(self._free)} of {self.num_blocks} are free; "
                "nothing was written (free or preempt a sequence and retry)"
            )
        if copy_last:
            shared = sequence.blocks[-1]
            private = self._take_block()
            self.k_blocks[private] = self.k_blocks[shared]
            self.v_blocks[private] = self.v_blocks[shared]
            self.ref_counts[shared] -= 1
            sequence.blocks[-1] = private
        sequence.blocks.extend(self._take_block() for _ in range(fresh))
        # Copy the new tokens block by block: each chunk fills (part of) one block.
        written = 0
        while written < n_new:
            position = sequence.length + written
            block, slot = sequence.blocks[position // size], position % size
            chunk = min(size - slot, n_new - written)
            self.k_blocks[block, :, slot : slot + chunk] = k[:, written : written + chunk].detach()
            self.v_blocks[block, :, slot : slot + chunk] = v[:, written : written + chunk].detach()
            written += chunk
        sequence.length = new_length

    def gather(self, seq_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """All keys and values of a sequence, (Hkv, L, D) each, copied out of its blocks in order."""
        sequence = self._get(seq_id)
        table = torch.tensor(sequence.blocks, dtype=torch.long, device=self.device)  # (n_blocks,)
        n_blocks, length = len(sequence.blocks), sequence.length
        keys = self.k_blocks[table]  # (n_blocks, Hkv, S, D)
        values = self.v_blocks[table]  # (n_blocks, Hkv, S, D)
        keys = keys.transpose(0, 1).reshape(self.kv_heads, n_blocks * self.block_size, self.head_dim)  # (Hkv, n·S, D)
        values = values.transpose(0, 1).reshape(self.kv_heads, n_blocks * self.block_size, self.head_dim)
        return keys[:, :length], values[:, :length]  # (Hkv, L, D)

    def gather_slow(self, seq_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The plain twin of ``gather``: one token at a time, straight from the block table."""
        sequence = self._get(seq_id)
        size = self.block_size
        keys = [self.k_blocks[sequence.blocks[t // size], :, t % size] for t in range(sequence.length)]  # (Hkv, D)
        values = [self.v_blocks[sequence.blocks[t // size], :, t % size] for t in range(sequence.length)]
        empty = torch.zeros(self.kv_heads, 0, self.head_dim, dtype=self.dtype, device=self.device)  # (Hkv, 0, D)
        if not keys:
            return empty, empty.clone()
        return torch.stack(keys, dim=1), torch.stack(values, dim=1)  # (Hkv, L, D)

    def tokens_stored(self) -> int:
        """Slots holding real tokens, counting a shared block once."""
        filled: dict[int, int] = {}
        for sequence in self._sequences.values():
            for i, block in enumerate(sequence.blocks):
                in_block = min(self.block_size, sequence.length - i * self.block_size)
                filled[block] = max(filled.get(block, 0), in_block)
        return sum(filled.values())
