"""KV caches against brute force: the worked example's numbers, in-place writes, paging, forks, errors."""

import pytest
import torch

from lib.attention import attention
from lib.kv_cache import (
    CacheFullError,
    ConcatKVCache,
    KVCache,
    PagedKVCache,
    blocks_needed,
    kv_cache_bytes,
)

MiB, GiB = 2**20, 2**30


# --- the formula -------------------------------------------------------------------------
def test_worked_example_numbers():
    example = dict(layers=32, batch=1, seq_len=4096, head_dim=128, bytes_per_element=2)
    assert kv_cache_bytes(kv_heads=8, **example) == 512 * MiB
    assert kv_cache_bytes(kv_heads=32, **example) == 2 * GiB
    doubled = dict(example, seq_len=8192, batch=2)
    assert kv_cache_bytes(kv_heads=8, **doubled) == 4 * kv_cache_bytes(kv_heads=8, **example)
    # GQA and MQA save exactly the head-count ratio
    assert kv_cache_bytes(kv_heads=32, **example) // kv_cache_bytes(kv_heads=1, **example) == 32


def test_formula_matches_real_tensors():
    cache = KVCache(batch=3, kv_heads=2, max_len=40, head_dim=8, dtype=torch.float16)
    expected = kv_cache_bytes(layers=1, batch=3, seq_len=40, kv_heads=2, head_dim=8, bytes_per_element=2)
    assert cache.nbytes == expected


def test_fractional_bytes_and_bad_sizes():
    assert kv_cache_bytes(layers=1, batch=1, seq_len=3, kv_heads=1, head_dim=1, bytes_per_element=0.5) == 3
    assert kv_cache_bytes(layers=1, batch=1, seq_len=1, kv_heads=1, head_dim=1, bytes_per_element=0.25) == 0.5
    with pytest.raises(ValueError, match="kv_heads"):
        kv_cache_bytes(layers=1, batch=1, seq_len=1, kv_heads=0, head_dim=1)
    with pytest.raises(ValueError, match="bytes_per_element"):
        kv_cache_bytes(layers=1, batch=1, seq_len=1, kv_heads=1, head_dim=1, bytes_per_element=0)


@pytest.mark.parametrize(("n", "size", "blocks"), [(0, 16, 0), (1, 16, 1), (16, 16, 1), (17, 16, 2), (100, 7, 15)])
def test_blocks_needed(n, size, blocks):
    assert blocks_needed(n, size) == blocks


# --- the contiguous cache ------------------------------------------------------------------
def _entries(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator), torch.randn(*shape, generator=generator)


@pytest.mark.parametrize("cache_class", [KVCache, ConcatKVCache])
def test_prefill_then_decode_equals_one_concatenation(cache_class):
    cache = cache_class(batch=2, kv_heads=3, max_len=20, head_dim=4)
    k_prompt, v_prompt = _entries(2, 3, 7, 4, seed=1)
    pieces = [(k_prompt, v_prompt)] + [_entries(2, 3, 1, 4, seed=2 + i) for i in range(5)]
    for k, v in pieces:
        keys, values = cache.append(k, v)
    assert len(cache) == 12 and keys.shape == (2, 3, 12, 4)
    torch.testing.assert_close(keys, torch.cat([k for k, _ in pieces], dim=2), rtol=0, atol=0)
    torch.testing.assert_close(values, torch.cat([v for _, v in pieces], dim=2), rtol=0, atol=0)


def test_append_writes_in_place_and_returns_views():
    cache = KVCache(batch=1, kv_heads=1, max_len=8, head_dim=2)
    storage = cache.k.data_ptr()
    keys, _ = cache.append(*_entries(1, 1, 3, 2))
    keys2, _ = cache.append(*_entries(1, 1, 1, 2, seed=5))
    assert cache.k.data_ptr() == storage  # never reallocated
    assert keys.data_ptr() == keys2.data_ptr() == storage  # views of the preallocated tensor


def test_cached_decode_attention_equals_full_recomputation():
    """Decoding token by token through the cache reads what a causal pass over everything reads."""
    generator = torch.Generator().manual_seed(3)
    q = torch.randn(2, 8, 10, 16, generator=generator)  # H=8 query heads
    k = torch.randn(2, 2, 10, 16, generator=generator)  # Hkv=2: the cache never sees 8 heads
    v = torch.randn(2, 2, 10, 16, generator=generator)
    full = attention(q, k, v, is_causal=True)
    cache = KVCache(batch=2, kv_heads=2, max_len=10, head_dim=16)
    keys, values = cache.append(k[:, :, :6], v[:, :, :6])  # prefill 6 tokens
    outputs = [attention(q[:, :, :6], keys, values, is_causal=True)]
    for t in range(6, 10):  # decode one token at a time
        keys, values = cache.append(k[:, :, t : t + 1], v[:, :, t : t + 1])
        outputs.append(attention(q[:, :, t : t + 1], keys, values, is_causal=True))
    torch.testing.assert_close(torch.cat(outputs, dim=2), full)


def test_overflow_raises_and_changes_nothing():
    cache = KVCache(batch=1, kv_heads=2, max_len=5, head_dim=3)
    k, v = _entries(1, 2, 4, 3)
    cache.append(k, v)
    before = (cache.k.clone(), cache.v.clone())
    with pytest.raises(CacheFullError, match="max_len=5"):
        cache.append(*_entries(1, 2, 2, 3, seed=9))
    assert len(cache) == 4
    assert torch.equal(cache.k, before[0]) and torch.equal(cache.v, before[1])
    cache.reset()
    assert len(cache) == 0
    keys, _ = cache.append(*_entries(1, 2, 5, 3, seed=4))  # room for the full max_len again
    assert keys.shape == (1, 2, 5, 3)


@pytest.mark.parametrize(
    ("shape", "error", "words"),
    [
        ((1, 8, 1, 3), ValueError, "8 heads but the cache stores 2 KV heads"),  # expanded to H
        ((1, 2, 1, 4), ValueError, "head width 4"),
        ((2, 2, 1, 3), ValueError, "shape"),
        ((2, 1, 3), ValueError, "shape"),
    ],
)
def test_contiguous_bad_input_is_named(shape, error, words):
    cache = KVCache(batch=1, kv_heads=2, max_len=5, head_dim=3)
    with pytest.raises(error, match=words):
        cache.append(torch.zeros(shape), torch.zeros(shape))
    assert len(cache) == 0


def test_contiguous_dtype_and_type_errors():
    cache = KVCache(batch=1, kv_heads=1, max_len=5, head_dim=2)
    with pytest.raises(TypeError, match="dtype"):
        cache.append(torch.zeros(1, 1, 1, 2, dtype=torch.float64), torch.zeros(1, 1, 1, 2, dtype=torch.float64))
    with pytest.raises(TypeError, match="torch.Tensor"):
        cache.append([[0.0]], torch.zeros(1, 1, 1, 2))
    with pytest.raises(ValueError, match="same shape"):
        cache.append(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 2, 2))
    with pytest.raises(ValueError, match="max_len"):
        KVCache(batch=1, kv_heads=1, max_len=0, head_dim=2)


# --- the paged cache -----------------------------------------------------------------------
def _tokens(n, seed, heads=2, width=3):
    return _entries(heads, n, width, seed=seed)


def test_paged_gather_equals_concatenation_and_its_plain_twin():
    cache = PagedKVCache(num_blocks=10, block_size=4, kv_heads=2, head_dim=3)
    a, b = cache.add_sequence(), cache.add_sequence()
    expected = {a: [], b: []}
    # interleave appends of uneven sizes so the two sequences' blocks are mixed in the pool
    for step, (seq, n) in enumerate([(a, 5), (b, 3), (a, 1), (b, 6), (a, 4), (b, 1)]):
        k, v = _tokens(n, seed=step)
        cache.append(seq, k, v)
        expected[seq].append((k, v))
    for seq in (a, b):
        keys, values = cache.gather(seq)
        torch.testing.assert_close(keys, torch.cat([k for k, _ in expected[seq]], dim=1), rtol=0, atol=0)
        torch.testing.assert_close(values, torch.cat([v for _, v in expected[seq]], dim=1), rtol=0, atol=0)
        slow_keys, slow_values = cache.gather_slow(seq)
        assert torch.equal(keys, slow_keys) and torch.equal(values, slow_values)
    assert cache.length(a) == 10 and cache.length(b) == 10
    assert cache.blocks_in_use == 3 + 3  # ceil(10 / 4) each
    assert cache.tokens_stored() == 20


def test_paged_empty_sequence_gathers_nothing():
    cache = PagedKVCache(num_blocks=2, block_size=4, kv_heads=2, head_dim=3)
    seq = cache.add_sequence()
    assert cache.gather(seq)[0].shape == (2, 0, 3) and cache.gather_slow(seq)[0].shape == (2, 0, 3)
    assert cache.blocks_in_use == 0


def test_fork_shares_blocks_and_copies_on_write():
    cache = PagedKVCache(num_blocks=8, block_size=4, kv_heads=2, head_dim=3)
    parent = cache.add_sequence()
    prompt_k, prompt_v = _tokens(6, seed=0)  # 1.5 blocks: the last block is partly filled
    cache.append(parent, prompt_k, prompt_v)
    child = cache.fork(parent)
    assert cache.block_table(child) == cache.block_table(parent)
    assert cache.blocks_in_use == 2  # shared, not copied

    child_k, child_v = _tokens(2, seed=1)
    cache.append(child, child_k, child_v)  # writes into the shared partial block: copy it first
    parent_k, parent_v = _tokens(1, seed=2)
    cache.append(parent, parent_k, parent_v)  # the parent's last block is its own again: no copy
    assert cache.block_table(child)[0] == cache.block_table(parent)[0]  # the full first block stays shared
    assert cache.block_table(child)[1] != cache.block_table(parent)[1]
    assert cache.blocks_in_use == 3

    torch.testing.assert_close(cache.gather(parent)[0], torch.cat([prompt_k, parent_k], dim=1), rtol=0, atol=0)
    torch.testing.assert_close(cache.gather(child)[0], torch.cat([prompt_k, child_k], dim=1), rtol=0, atol=0)
    torch.testing.assert_close(cache.gather(child)[1], torch.cat([prompt_v, child_v], dim=1), rtol=0, atol=0)

    cache.free(parent)
    assert cache.blocks_in_use == 2  # the shared first block lives on in the child
    torch.testing.assert_close(cache.gather(child)[0], torch.cat([prompt_k, child_k], dim=1), rtol=0, atol=0)
    cache.free(child)
    assert cache.blocks_in_use == 0


def test_fork_at_a_block_boundary_needs_no_copy():
    cache = PagedKVCache(num_blocks=4, block_size=4, kv_heads=2, head_dim=3)
    parent = cache.add_sequence()
    cache.append(parent, *_tokens(4, seed=0))
    child = cache.fork(parent)
    cache.append(child, *_tokens(1, seed=1))
    assert cache.blocks_in_use == 2 and cache.block_table(child)[0] == cache.block_table(parent)[0]


def _snapshot(cache):
    return {seq: tuple(t.clone() for t in cache.gather(seq)) for seq in cache.sequences}


def _unchanged(cache, snapshot):
    assert set(cache.sequences) == set(snapshot)
    for seq, (keys, values) in snapshot.items():
        now_keys, now_values = cache.gather(seq)
        assert torch.equal(now_keys, keys) and torch.equal(now_values, values), f"sequence {seq} changed"


def test_out_of_blocks_raises_and_corrupts_nothing():
    cache = PagedKVCache(num_blocks=4, block_size=4, kv_heads=2, head_dim=3)
    a, b = cache.add_sequence(), cache.add_sequence()
    cache.append(a, *_tokens(6, seed=0))
    cache.append(b, *_tokens(3, seed=1))
    snapshot, in_use = _snapshot(cache), cache.blocks_in_use
    with pytest.raises(CacheFullError, match="only 1 of 4 are free"):
        cache.append(b, *_tokens(7, seed=2))  # needs 2 more blocks, 1 is free
    _unchanged(cache, snapshot)
    assert cache.blocks_in_use == in_use and cache.length(b) == 3
    cache.append(b, *_tokens(5, seed=3))  # what fits still fits afterwards
    assert cache.free_blocks == 0


def test_copy_on_write_counts_its_block_when_the_pool_is_full():
    cache = PagedKVCache(num_blocks=2, block_size=4, kv_heads=2, head_dim=3)
    parent = cache.add_sequence()
    cache.append(parent, *_tokens(6, seed=0))
    child = cache.fork(parent)
    snapshot = _snapshot(cache)
    with pytest.raises(CacheFullError, match="needs 1 more block of 4 tokens"):
        cache.append(child, *_tokens(1, seed=1))  # must copy the shared partial block: no room
    _unchanged(cache, snapshot)


@pytest.mark.parametrize(
    ("shape", "words"),
    [((8, 1, 3), "8 heads but the cache stores 2 KV heads"), ((2, 1, 5), "head width 5"), ((1, 2, 1, 3), "shape")],
)
def test_paged_bad_shapes_change_nothing(shape, words):
    cache = PagedKVCache(num_blocks=4, block_size=4, kv_heads=2, head_dim=3)
    seq = cache.add_sequence()
    cache.append(seq, *_tokens(2, seed=0))
    snapshot = _snapshot(cache)
    with pytest.raises(ValueError, match=words):
        cache.append(seq, torch.zeros(shape), torch.zeros(shape))
    _unchanged(cache, snapshot)


def test_unknown_and_freed_ids():
    cache = PagedKVCache(num_blocks=4, block_size=4, kv_heads=2, head_dim=3)
    keep, gone = cache.add_sequence(), cache.add_sequence()
    cache.append(keep, *_tokens(3, seed=0))
    cache.append(gone, *_tokens(3, seed=1))
    cache.free(gone)
    snapshot = _snapshot(cache)
    for bad in (gone, 99):
        with pytest.raises(KeyError, match="no sequence with id"):
            cache.append(bad, *_tokens(1, seed=2))
        with pytest.raises(KeyError, match="freed, or never added"):
            cache.gather(bad)
        with pytest.raises(KeyError):
            cache.free(bad)
        with pytest.raises(KeyError):
            cache.fork(bad)
    _unchanged(cache, snapshot)
    assert cache.add_sequence() not in (keep, gone)  # ids are never reused


def test_paged_attention_matches_contiguous_for_gqa():
    """Attention read from pages equals attention read from a contiguous cache (H=4, Hkv=2)."""
    paged = PagedKVCache(num_blocks=6, block_size=3, kv_heads=2, head_dim=8)
    contiguous = KVCache(batch=1, kv_heads=2, max_len=12, head_dim=8)
    seq = paged.add_sequence()
    k, v = _entries(2, 11, 8, seed=5)
    paged.append(seq, k, v)
    keys, values = contiguous.append(k[None], v[None])
    q = torch.randn(4, 1, 8, generator=torch.Generator().manual_seed(6))  # one decode query, 4 heads
    paged_keys, paged_values = paged.gather(seq)
    torch.testing.assert_close(attention(q, paged_keys, paged_values), attention(q[None], keys, values)[0])


# --- chapter 6's exercises, answered independently of their declarations ---------------------
def test_chapter_6_answers_agree_with_lib():
    from lib.checks import CORRECT, exercises, grade

    cache = PagedKVCache(num_blocks=200, block_size=16, kv_heads=1, head_dim=1)
    system = cache.add_sequence()
    cache.append(system, torch.zeros(1, 192, 1), torch.zeros(1, 192, 1))
    for _ in range(10):
        request = cache.fork(system)
        cache.append(request, torch.zeros(1, 50, 1), torch.zeros(1, 50, 1))
    sequence = PagedKVCache(num_blocks=200, block_size=16, kv_heads=1, head_dim=1)
    for n in (1000, 1010, 1024):  # two end mid-block, one exactly on a block boundary
        sequence.append(sequence.add_sequence(), torch.zeros(1, n, 1), torch.zeros(1, n, 1))
    answers = {
        "6.double-length-and-batch": kv_cache_bytes(layers=1, batch=2, seq_len=2, kv_heads=1, head_dim=1)
        / kv_cache_bytes(layers=1, batch=1, seq_len=1, kv_heads=1, head_dim=1),
        "6.kv-bytes": kv_cache_bytes(layers=40, batch=4, seq_len=2048, kv_heads=8, head_dim=128) / GiB,
        "6.gqa-cache": 16 * 8 / 64,
        "6.blocks-needed": sequence.blocks_in_use,
        "6.fork-blocks": cache.blocks_in_use,
        "6.next-position": 37,
        "6.weights-gb": 26,
        "6.decode-read": kv_cache_bytes(layers=1, batch=1, seq_len=4500, kv_heads=8, head_dim=1)
        / kv_cache_bytes(layers=1, batch=1, seq_len=1500, kv_heads=64, head_dim=1),
    }
    for exercise_id, answer in answers.items():
        assert grade(exercises()[exercise_id], answer).status == CORRECT, exercise_id

    def bool_mask(n_new, n_cached):  # a learner's boolean answer grades like the 0/1 reference
        positions = torch.arange(n_cached, n_cached + n_new)[:, None]
        return torch.arange(n_cached + n_new)[None, :] <= positions

    assert grade(exercises()["6.decode-mask"], bool_mask).status == CORRECT
    result = grade(exercises()["6.decode-mask"], lambda n, c: torch.ones(n, n + c, dtype=torch.bool).tril())
    assert "top-left" in result.feedback


# --- a random walk of appends, forks, frees and bad calls, against a list-of-tensors model ---
def _check_against_model(cache, model):
    """Every live sequence reads back what the model says, and the block bookkeeping adds up."""
    assert sorted(cache.sequences) == sorted(model)
    readers = [0] * cache.num_blocks
    for seq, (keys, values) in model.items():
        table = cache.block_table(seq)
        assert len(table) == blocks_needed(keys.shape[1], cache.block_size)  # no block held in reserve
        for block in table:
            readers[block] += 1
        got_keys, got_values = cache.gather(seq)
        assert torch.equal(got_keys, keys) and torch.equal(got_values, values), f"sequence {seq} differs"
        slow_keys, slow_values = cache.gather_slow(seq)
        assert torch.equal(slow_keys, keys) and torch.equal(slow_values, values)
    assert cache.ref_counts == readers  # each block counts exactly the tables that hold it
    assert cache.blocks_in_use == sum(count > 0 for count in readers)
    assert cache.free_blocks + cache.blocks_in_use == cache.num_blocks


@pytest.mark.parametrize("seed", range(6))
def test_random_appends_forks_and_frees_match_a_list_of_tensors(seed):
    """Seeded random operations, including ones that must fail; after each, compare with brute force.

    The model keeps each sequence as two plain (Hkv, L, D) tensors: an append concatenates,
    a fork clones, a free deletes. Copy on write is right exactly when no sequence ever sees
    another's tokens, which this checks after every step.
    """
    rng = torch.Generator().manual_seed(seed)

    def randint(high):  # 0 .. high - 1
        return int(torch.randint(high, (1,), generator=rng))

    heads, width = 2, 3
    cache = PagedKVCache(num_blocks=12, block_size=[1, 3, 4][seed % 3], kv_heads=heads, head_dim=width)
    model: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    freed: list[int] = []
    outcomes = {"append": 0, "full": 0, "fork": 0, "free": 0, "bad": 0}
    for _ in range(150):
        live = sorted(model)
        op = randint(10)
        if op == 0 or not live:
            seq = cache.add_sequence()
            model[seq] = (torch.zeros(heads, 0, width), torch.zeros(heads, 0, width))
        elif op <= 5:  # append 1..9 tokens (a decode step or a chunk of prompt)
            seq, n = live[randint(len(live))], 1 + randint(9)
            k = torch.randn(heads, n, width, generator=rng)  # (Hkv, T, D)
            v = torch.randn(heads, n, width, generator=rng)  # (Hkv, T, D)
            try:
                cache.append(seq, k, v)
            except CacheFullError:
                outcomes["full"] += 1  # refused: the model stays as it was
            else:
                outcomes["append"] += 1
                keys, values = model[seq]
                model[seq] = (torch.cat([keys, k], dim=1), torch.cat([values, v], dim=1))
        elif op <= 7:
            parent = live[randint(len(live))]
            child = cache.fork(parent)
            model[child] = tuple(t.clone() for t in model[parent])
            outcomes["fork"] += 1
        elif op == 8:
            seq = live[randint(len(live))]
            cache.free(seq)
            del model[seq]
            freed.append(seq)
            outcomes["free"] += 1
        else:  # calls that must fail and leave everything as it was
            seq, kind = live[randint(len(live))], randint(4)
            wrong_heads = torch.zeros(heads + 1, 1, width)  # (Hkv + 1, 1, D)
            wrong_width = torch.zeros(heads, 1, width + 1)  # (Hkv, 1, D + 1)
            fine = torch.zeros(heads, 1, width)  # (Hkv, 1, D)
            gone = freed[-1] if freed else 10**6
            with pytest.raises(KeyError if kind >= 2 else ValueError):
                if kind == 0:
                    cache.append(seq, wrong_heads, wrong_heads)
                elif kind == 1:
                    cache.append(seq, wrong_width, wrong_width)
                elif kind == 2:
                    cache.append(gone, fine, fine)  # a freed (or never added) sequence
                else:
                    cache.fork(gone)
            outcomes["bad"] += 1
        _check_against_model(cache, model)
    # the walk really exercised every path, the refusals included
    assert all(count > 0 for count in outcomes.values()), outcomes


@pytest.mark.parametrize("cache_class", [KVCache, ConcatKVCache])
def test_each_step_backpropagates_on_its_own(cache_class):
    """A second backward works, and its gradient is the one with the cached past held constant."""
    torch.manual_seed(0)
    weight = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    prompt, new = torch.randn(1, 2, 3, 4, dtype=torch.float64), torch.randn(1, 2, 1, 4, dtype=torch.float64)
    cache = cache_class(1, 2, 8, 4, dtype=torch.float64)
    k, v = cache.append(prompt @ weight, prompt @ weight)
    attention(prompt, k, v, is_causal=True).sum().backward()
    weight.grad = None
    k, v = cache.append(new @ weight, new @ weight)
    attention(new, k, v, is_causal=True).sum().backward()  # raised "backward through the graph a second time"
    past = (prompt @ weight).detach()
    reference = torch.cat([past, new @ weight], dim=2)
    expected = torch.autograd.grad(attention(new, reference, reference, is_causal=True).sum(), weight)[0]
    torch.testing.assert_close(weight.grad, expected)
    assert not cache.k.requires_grad and len(cache) == 4
    with torch.no_grad():  # decoding without gradients still gets views of the storage, no copies
        k, v = cache.append(new, new)
    if cache_class is KVCache:
        assert k.data_ptr() == cache.k.data_ptr()
