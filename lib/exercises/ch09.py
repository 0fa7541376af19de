"""Chapter 9's check-yourself exercises: the capstone GPT, its loss, its cache, its sampling.

Each expected number is computed by the same lib code the chapter uses (``count_parameters``,
``uniform_loss``, ``kv_cache_bytes``, ``sample_next``'s arithmetic), on numbers the chapter
never prints; each wrong answer is the result of one named mistake, with sizes chosen so
that no two mistakes give the same number.
"""

from __future__ import annotations

import math

import torch

from lib.capstone import sampling_probabilities
from lib.drawn_cases import integer, normal
from lib.exercises.base import Case, FunctionExercise, ValueExercise, WrongAnswer
from lib.gpt import GPTConfig, count_parameters
from lib.kv_cache import kv_cache_bytes
from lib.ngram import uniform_loss
from lib.variants import Param

# 9.parameters: a model the chapter does not train.
# The book's: GPTConfig(vocab_size=1000, n_layers=2, d_model=64, n_heads=8, n_kv_heads=2, hidden=160), whose
# 2·(2·64·64 + 2·64·16 + 3·64·160 + 2·64) + 1000·64 + 64 = 146,240 parameters.
_GPT = dict(vocab_size=1000, n_layers=2, n_kv_heads=2, hidden=160)
_LAYER_WORDS = {2: "two", 3: "three", 4: "four"}


def _parameters(vocab_size: int, n_layers: int, n_kv_heads: int, hidden: int) -> ValueExercise:
    """9.parameters of GPT(GPTConfig(...)) with these four settings and d_model = 64, n_heads = 8 (the book:
    vocabulary 1000, 2 layers, 2 KV heads, FFN width 160). Every choice keeps fewer KV heads than query heads
    and the embedding the largest matrix, and no two named mistakes at the same count."""
    config = GPTConfig(
        vocab_size=vocab_size, n_layers=n_layers, d_model=64, n_heads=8, n_kv_heads=n_kv_heads, hidden=hidden
    )
    total = count_parameters(config)
    c, kv, f, layers, v = config.d_model, n_kv_heads * config.head_dim, hidden, n_layers, vocab_size
    norms = 2 * c  # per layer
    per_layer = 2 * c * c + 2 * c * kv + 3 * c * f + norms
    heads = f"{n_kv_heads} KV head" + ("s" if n_kv_heads > 1 else "")
    return ValueExercise(
        id="9.parameters",
        question=(
            f"How many parameters does GPT(GPTConfig(vocab_size={vocab_size}, n_layers={n_layers}, d_model=64, "
            f"n_heads=8, n_kv_heads={n_kv_heads}, hidden={hidden})) have? (Defaults: SwiGLU, RMSNorm, no biases, "
            "tied embeddings.)"
        ),
        expected=total,
        explanation=(
            f"Per layer: q and out projections 64·64 each; k and v only 64·({n_kv_heads}·8) each, since {heads} "
            f"of width 64/8 = 8; SwiGLU's three matrices 3·64·{hidden}; two RMSNorm weights of 64. That is "
            f"{per_layer:,} per layer, {layers * per_layer:,} for {_LAYER_WORDS[layers]}, plus the {v}·64 embedding "
            f"(the head reuses it) and the final norm's 64: {total:,}."
        ),
        hints=(
            "Head width = d_model / n_heads; the k and v projections are d_model × (n_kv_heads · head width).",
            "SwiGLU has three matrices (gate, up, down); a tied head adds nothing.",
        ),
        wrong_answers=(
            WrongAnswer(
                total + layers * 2 * c * (c - kv),  # k and v at full width C·C
                f"You gave k and v full 64×64 projections. With {heads} they are 64×{kv} each.",
            ),
            WrongAnswer(total + v * c, f"You counted a separate {v}×64 output head; the embeddings are tied (shared)."),
            WrongAnswer(total - layers * c * f, "You counted two FFN matrices; SwiGLU has three (gate, up and down)."),
            WrongAnswer(total - v * c, f"You left out the {v}×64 token embedding, the largest single matrix here."),
            WrongAnswer(total - layers * norms - c, "You left out the RMSNorm weights (64 per norm)."),
            WrongAnswer(total - c, "You left out the final RMSNorm, the 64 weights after the last block."),
            WrongAnswer(
                total - per_layer,
                f"You counted one layer's {per_layer:,} parameters; there are {_LAYER_WORDS[layers]}.",
            ),
        ),
        whole=True,
        params=(
            Param("vocab_size", _GPT["vocab_size"], (500, 1000, 2000)),
            Param("n_layers", _GPT["n_layers"], (2, 3, 4)),
            Param("n_kv_heads", _GPT["n_kv_heads"], (1, 2, 4)),
            Param("hidden", _GPT["hidden"], (128, 160, 192)),
        ),
        make=_parameters,
    )


# 9.cache-bytes: per layer, one sequence of 300 tokens, 8 query heads sharing 2 KV heads of width 32, bfloat16.
_CACHE = dict(layers=1, batch=1, seq_len=300, kv_heads=2, head_dim=32, bytes_per_element=2)
_QUERY_HEADS, _LAYERS = 8, 5


def _cache_bytes(layers: int, query_heads: int, seq_len: int, head_dim: int) -> ValueExercise:
    """9.cache-bytes of one layer (the book: 5 layers, 8 query heads, 300 tokens, width 32); 2 KV heads and
    bfloat16 stay. Every choice keeps the query heads other than twice the KV heads (float32's factor 2) and
    the layers apart from the query mistakes' factors (4 and 3 in the book), so that each mistake multiplies
    the answer by its own number."""
    kv_heads = _CACHE["kv_heads"]
    cache = kv_cache_bytes(layers=1, batch=1, seq_len=seq_len, kv_heads=kv_heads, head_dim=head_dim)
    return ValueExercise(
        id="9.cache-bytes",
        question=(
            f"A model has {layers} layers and {query_heads} query heads sharing 2 KV heads of width {head_dim}, "
            "stored in bfloat16 (2 bytes). "
            f"How many bytes does ONE layer's KV cache hold for one sequence of {seq_len:,} tokens?"
        ),
        expected=cache,
        explanation=(
            f"Each layer caches its rotated keys and its values, (1, 2, {seq_len}, {head_dim}) each: 2 tensors · "
            f"2 heads · {seq_len:,} tokens · {head_dim} · 2 bytes = {cache:,}. Queries are used once and never "
            f"cached; the {query_heads} query heads read the 2 cached heads."
        ),
        hints=("Per layer: keys AND values, each batch × KV heads × tokens × width, times bytes per element.",),
        wrong_answers=(
            WrongAnswer(cache // 2, "You counted only the keys (or only the values); the cache holds both."),
            WrongAnswer(cache * 2, "You used 4 bytes (float32); bfloat16 takes 2 bytes per element."),
            WrongAnswer(
                cache * query_heads // kv_heads,
                f"You used the {query_heads} query heads. The cache stores the 2 KV heads: grouped-query "
                "attention's saving.",
            ),
            WrongAnswer(
                cache * (2 * kv_heads + query_heads) // (2 * kv_heads),
                "You cached the queries too. A query is used once, by its own step, and never read again.",
            ),
            WrongAnswer(cache * layers, f"That is all {layers} layers; the question asks for one layer."),
        ),
        whole=True,
        params=(
            Param("layers", _LAYERS, (5, 8, 10)),
            Param("query_heads", _QUERY_HEADS, (8, 12, 24)),
            Param("seq_len", _CACHE["seq_len"], (300, 512, 1000, 4096), shown=lambda n: f"{n:,}"),
            Param("head_dim", _CACHE["head_dim"], (32, 64, 128)),
        ),
        make=_cache_bytes,
    )


# 9.top-k: logits [2.0, 1.0, 0.5, -1.0] at temperature 0.8.
_LOGITS, _T = (2.0, 1.0, 0.5, -1.0), 0.8


def _softmax(values: tuple[float, ...]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    return [e / sum(exps) for e in exps]


_SCALED = tuple(v / _T for v in _LOGITS)
_P_FULL = _softmax(_SCALED)  # every token, temperature applied

# 9.top-k-two: other logits, chosen so that every mistake lands apart from the rest.
_Q_LOGITS, _Q_T = (2.0, 1.6, 1.4, 0.0), 0.5


def _one_decimal_at_least(x: float) -> str:
    """4.0, 3.2, 4.25: a scaled logit as the explanation writes it."""
    text = f"{x:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _top_k_two(logit1: float, logit2: float, temperature: float) -> ValueExercise:
    """9.top-k-two with logits [2.0, logit1, logit2, 0.0] (the book: 1.6, 1.4, temperature 0.5). Every choice
    keeps logit1 above logit2, so the top two are tokens 0 and 1, and its seven answers at least 0.005 apart."""
    logits = (2.0, logit1, logit2, 0.0)
    scaled = tuple(v / temperature for v in logits)
    top2 = _softmax(scaled[:2])  # right: 0.310 in the book
    full = _softmax(scaled)  # not renormalized after top-k: 0.254
    top2_no_t = _softmax(logits[:2])  # forgot the temperature: 0.401
    raw = _softmax(logits)  # forgot both: 0.285
    top2_times_t = _softmax(tuple(v * temperature for v in logits[:2]))  # multiplied by it: 0.450
    s0, s1 = (f"{round(v, 6):g}" for v in scaled[:2])
    return ValueExercise(
        id="9.top-k-two",
        question=(
            f"Other logits, [2.0, {logit1:.1f}, {logit2:.1f}, 0.0], sampled at temperature {temperature} with "
            "top_k = 2. What is the probability of drawing token 1? Give it to 3 decimal places."
        ),
        expected=top2[1],
        explanation=(
            f"Divide by the temperature: [{', '.join(_one_decimal_at_least(v) for v in scaled)}]; keep the top two; "
            f"softmax over them: e^{s1} / (e^{s0} + e^{s1}) ≈ {top2[1]:.3f}. The removed tokens' mass is shared "
            "out again."
        ),
        hints=("Scale by 1/temperature, drop all but the two largest, then softmax over what is left.",),
        wrong_answers=(
            WrongAnswer(full[1], "You did not renormalize: after top-k, the softmax runs over the kept tokens."),
            WrongAnswer(top2_no_t[1], f"You forgot the temperature: divide the logits by {temperature} first."),
            WrongAnswer(
                raw[1], "You forgot both the temperature and the top-k: that is the plain softmax of all four."
            ),
            WrongAnswer(top2_times_t[1], "You multiplied by the temperature; logits are divided by it."),
            WrongAnswer(0.5, "Top-k keeps the two tokens but not as equals: their logits still differ."),
            WrongAnswer(
                top2[0], "That is token 0's probability, the likelier of the two; the question asks for token 1."
            ),
        ),
        decimals=3,
        params=(
            Param("logit1", _Q_LOGITS[1], (1.6, 1.7, 1.9), shown=lambda v: f"{v:.1f}"),
            Param("logit2", _Q_LOGITS[2], (0.8, 1.3, 1.4), shown=lambda v: f"{v:.1f}"),
            Param("temperature", _Q_T, (0.4, 0.5, 2.0)),
        ),
        make=_top_k_two,
    )


def _masked_softmax_no_renorm(logits, temperature, top_k):
    probs = torch.softmax(logits / temperature, dim=-1)
    keep = sampling_probabilities(logits, temperature, top_k) > 0
    return probs * keep


def _uniform_loss(vocab: int) -> ValueExercise:
    """9.uniform-loss over a vocabulary of this many tokens (the book: 2,048)."""
    return ValueExercise(
        id="9.uniform-loss",
        question=(
            f"Before training, a model that gives each of {vocab:,} tokens the same probability has what "
            "cross-entropy loss, in nats? Give it to 3 decimal places."
        ),
        expected=uniform_loss(vocab),
        explanation=(
            f"Every target gets probability 1/{vocab}, so the loss is -ln(1/{vocab}) = ln {vocab} ≈ "
            f"{math.log(vocab):.3f} nats. A freshly initialized model starts near this; any loss above it is worse "
            "than guessing."
        ),
        hints=("Cross-entropy is -ln p(target); what is p for a uniform guess?",),
        wrong_answers=(
            WrongAnswer(math.log2(vocab), "That is log base 2 (bits). torch's cross-entropy uses the natural log."),
            WrongAnswer(1 / vocab, "That is the probability of the target, not its negative log."),
            WrongAnswer(math.log10(vocab), "That is log base 10; the loss is in nats (natural log)."),
            WrongAnswer(
                -math.log(vocab),
                f"That is the log-probability of the target, ln(1/{vocab}). The loss is its negative, -ln p, "
                "so it is positive.",
            ),
        ),
        decimals=3,
        params=(Param("vocab", 2048, (1000, 2048, 4096, 8000, 32000, 50257, 128000), shown=lambda v: f"{v:,}"),),
        make=_uniform_loss,
    )


EXERCISES = (
    _parameters(**_GPT),
    _uniform_loss(2048),
    _cache_bytes(_LAYERS, _QUERY_HEADS, _CACHE["seq_len"], _CACHE["head_dim"]),
    ValueExercise(
        id="9.top-k-one",
        question=(
            "The model's next-token logits are [2.0, 1.0, 0.5, -1.0]. Sampling at temperature 0.8 with top_k = 1, "
            "what is the probability of drawing token 0?"
            " Give it to 2 decimal places."
        ),
        expected=1.0,
        explanation=(
            "top_k = 1 keeps only the likeliest token and renormalizes: it has probability 1, whatever the "
            "temperature. So top-k = 1 sampling is greedy decoding, and gives the same text on every seed."
        ),
        hints=("After top-k filtering, how many tokens are left to share the probability?",),
        wrong_answers=(
            WrongAnswer(_P_FULL[0], "That is softmax(logits / 0.8) over all four tokens: top_k = 1 removes three."),
            WrongAnswer(_softmax(_LOGITS)[0], "That is the plain softmax over all tokens; top_k = 1 keeps one."),
            WrongAnswer(0.25, "The four tokens are not equally likely, and top_k = 1 keeps only one of them."),
        ),
        decimals=2,
    ),
    _top_k_two(*_Q_LOGITS[1:3], _Q_T),
)


def _draw_logits(generator: torch.Generator) -> tuple[torch.Tensor, float, int | None]:
    """(B, V) logits, a temperature in [0.3, 2.3) and a top_k of 1..V or None."""
    rows, vocabulary = integer(generator, 1, 3), integer(generator, 2, 8)
    temperature = 0.3 + 2 * float(torch.rand((), generator=generator))
    top_k = integer(generator, 0, vocabulary) or None
    return normal(generator, (rows, vocabulary), scale=2.0), temperature, top_k


# 9.sample-probs: the distribution the sampling step draws from.
CHAPTER_9_FUNCTIONS = (
    FunctionExercise(
        id="9.sample-probs",
        question=(
            "Write my_sampling_probs(logits, temperature, top_k): from (B, V) logits, the (B, V) probabilities "
            "the sampling step draws from. Divide by the temperature (> 0), keep the top_k largest logits of each "
            "row (all of them if top_k is None; ties with the k-th are kept), and softmax over what is kept; "
            "every other token gets probability 0."
        ),
        reference=sampling_probabilities,
        cases=(
            Case(
                "one row, top-2",
                lambda: (torch.tensor([[2.0, 1.6, 1.4, 0.0]]), 0.5, 2),
                "Scale, keep the two largest, softmax over those two only.",
            ),
            Case(
                "no top-k, temperature 2",
                lambda: (torch.tensor([[1.0, -1.0, 0.5]]), 2.0, None),
                "Without top_k, every token is kept: softmax(logits / temperature).",
            ),
            Case(
                "two rows, top-1",
                lambda: (torch.tensor([[0.1, 0.3, 0.2], [5.0, -2.0, 4.0]]), 0.7, 1),
                "Each row keeps its own top k: row 0 its token 1, row 1 its token 0.",
            ),
            Case(
                "a tie at the k-th logit",
                lambda: (torch.tensor([[3.0, 1.0, 1.0, 0.0]]), 1.0, 2),
                "Compare each logit with the k-th largest: both tokens tied at 1.0 stay, as in sample_next.",
            ),
        ),
        wrong_answers=(
            WrongAnswer(
                lambda x, t, k: torch.softmax(x, dim=-1),
                "You returned the plain softmax: divide by the temperature and apply top_k.",
            ),
            WrongAnswer(
                lambda x, t, k: _masked_softmax_no_renorm(x, t, k),
                "You zeroed the tokens outside the top k after the softmax, without renormalizing the rest.",
            ),
            WrongAnswer(
                lambda x, t, k: sampling_probabilities(x * t, 1.0, k),
                "You multiplied the logits by the temperature; they are divided by it.",
            ),
        ),
        explanation=(
            "scaled = logits / temperature; if top_k: kth = scaled.topk(top_k).values[:, -1:], "
            "scaled = scaled.masked_fill(scaled < kth, -inf); return softmax(scaled): the -inf logits get 0."
        ),
        hints=("masked_fill with -inf before the softmax gives the removed tokens probability 0.",),
        stands_for=("lib.capstone.sampling_probabilities", "lib.gpt.sample_next"),
        forbids=("lib.gpt.GPT.generate",),
        draw=_draw_logits,
    ),
)

EXERCISES = EXERCISES + CHAPTER_9_FUNCTIONS
