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
_CONFIG = GPTConfig(vocab_size=1000, n_layers=2, d_model=64, n_heads=8, n_kv_heads=2, hidden=160)
_PARAMS = count_parameters(_CONFIG)  # 2·(2·64·64 + 2·64·16 + 3·64·160 + 2·64) + 1000·64 + 64 = 146_240
_C, _KV, _F, _L, _V = 64, 2 * 8, 160, 2, 1000  # d_model, n_kv_heads·head_dim, FFN width, layers, vocabulary
_PER_LAYER_NORMS = 2 * _C
_PER_LAYER = 2 * _C * _C + 2 * _C * _KV + 3 * _C * _F + _PER_LAYER_NORMS  # 41_088
_NO_GQA = _PARAMS + _L * 2 * _C * (_C - _KV)  # k and v at full width C·C
_UNTIED = _PARAMS + _V * _C  # a separate output head
_MLP_FFN = _PARAMS - _L * _C * _F  # two FFN matrices instead of SwiGLU's three
_NO_EMBEDDING = _PARAMS - _V * _C  # only the blocks


# 9.cache-bytes: per layer, one sequence of 300 tokens, 8 query heads sharing 2 KV heads of width 32, bfloat16.
_CACHE = dict(layers=1, batch=1, seq_len=300, kv_heads=2, head_dim=32, bytes_per_element=2)
_CACHE_BYTES = kv_cache_bytes(**_CACHE)  # 2·1·1·300·2·32·2 = 76_800
_QUERY_HEADS, _LAYERS = 8, 5

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
_Q_SCALED = tuple(v / _Q_T for v in _Q_LOGITS)
_Q_TOP2 = _softmax(_Q_SCALED[:2])  # right: 0.310
_Q_FULL = _softmax(_Q_SCALED)  # not renormalized after top-k: 0.254
_Q_TOP2_NO_T = _softmax(_Q_LOGITS[:2])  # forgot the temperature: 0.401
_Q_RAW = _softmax(_Q_LOGITS)  # forgot both: 0.285
_Q_TOP2_TIMES_T = _softmax(tuple(v * _Q_T for v in _Q_LOGITS[:2]))  # multiplied by it: 0.450


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
        params=(Param("vocab", 2048, (1000, 2048, 4096, 32000), shown=lambda v: f"{v:,}"),),
        make=_uniform_loss,
    )


EXERCISES = (
    ValueExercise(
        id="9.parameters",
        question=(
            "How many parameters does GPT(GPTConfig(vocab_size=1000, n_layers=2, d_model=64, n_heads=8, "
            "n_kv_heads=2, hidden=160)) have? (Defaults: SwiGLU, RMSNorm, no biases, tied embeddings.)"
        ),
        expected=_PARAMS,
        explanation=(
            "Per layer: q and out projections 64·64 each; k and v only 64·(2·8) each, since 2 KV heads of width "
            f"64/8 = 8; SwiGLU's three matrices 3·64·160; two RMSNorm weights of 64. That is {_PER_LAYER:,} per "
            f"layer, {_L * _PER_LAYER:,} for two, plus the 1000·64 embedding (the head reuses it) and the final "
            f"norm's 64: {_PARAMS:,}."
        ),
        hints=(
            "Head width = d_model / n_heads; the k and v projections are d_model × (n_kv_heads · head width).",
            "SwiGLU has three matrices (gate, up, down); a tied head adds nothing.",
        ),
        wrong_answers=(
            WrongAnswer(_NO_GQA, "You gave k and v full 64×64 projections. With 2 KV heads they are 64×16 each."),
            WrongAnswer(_UNTIED, "You counted a separate 1000×64 output head; the embeddings are tied (shared)."),
            WrongAnswer(_MLP_FFN, "You counted two FFN matrices; SwiGLU has three (gate, up and down)."),
            WrongAnswer(_NO_EMBEDDING, "You left out the 1000×64 token embedding, the largest single matrix here."),
            WrongAnswer(_PARAMS - _L * _PER_LAYER_NORMS - _C, "You left out the RMSNorm weights (64 per norm)."),
            WrongAnswer(_PARAMS - _C, "You left out the final RMSNorm, the 64 weights after the last block."),
            WrongAnswer(_PARAMS - _PER_LAYER, f"You counted one layer's {_PER_LAYER:,} parameters; there are two."),
        ),
        whole=True,
    ),
    _uniform_loss(2048),
    ValueExercise(
        id="9.cache-bytes",
        question=(
            "A model has 5 layers and 8 query heads sharing 2 KV heads of width 32, stored in bfloat16 (2 bytes). "
            "How many bytes does ONE layer's KV cache hold for one sequence of 300 tokens?"
        ),
        expected=_CACHE_BYTES,
        explanation=(
            "Each layer caches its rotated keys and its values, (1, 2, 300, 32) each: 2 tensors · 2 heads · "
            f"300 tokens · 32 · 2 bytes = {_CACHE_BYTES:,}. Queries are used once and never cached; the 8 query "
            "heads read the 2 cached heads."
        ),
        hints=("Per layer: keys AND values, each batch × KV heads × tokens × width, times bytes per element.",),
        wrong_answers=(
            WrongAnswer(_CACHE_BYTES // 2, "You counted only the keys (or only the values); the cache holds both."),
            WrongAnswer(_CACHE_BYTES * 2, "You used 4 bytes (float32); bfloat16 takes 2 bytes per element."),
            WrongAnswer(
                _CACHE_BYTES * _QUERY_HEADS // 2,
                "You used the 8 query heads. The cache stores the 2 KV heads: grouped-query attention's saving.",
            ),
            WrongAnswer(
                _CACHE_BYTES * (_QUERY_HEADS + 4) // 4,
                "You cached the queries too. A query is used once, by its own step, and never read again.",
            ),
            WrongAnswer(_CACHE_BYTES * _LAYERS, "That is all 5 layers; the question asks for one layer."),
        ),
        whole=True,
    ),
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
    ValueExercise(
        id="9.top-k-two",
        question=(
            "Other logits, [2.0, 1.6, 1.4, 0.0], sampled at temperature 0.5 with top_k = 2. What is the "
            "probability of drawing token 1? Give it to 3 decimal places."
        ),
        expected=_Q_TOP2[1],
        explanation=(
            f"Divide by the temperature: [4.0, 3.2, 2.8, 0.0]; keep the top two; softmax over them: "
            f"e^3.2 / (e^4 + e^3.2) ≈ {_Q_TOP2[1]:.3f}. The removed tokens' mass is shared out again."
        ),
        hints=("Scale by 1/temperature, drop all but the two largest, then softmax over what is left.",),
        wrong_answers=(
            WrongAnswer(_Q_FULL[1], "You did not renormalize: after top-k, the softmax runs over the kept tokens."),
            WrongAnswer(_Q_TOP2_NO_T[1], "You forgot the temperature: divide the logits by 0.5 first."),
            WrongAnswer(
                _Q_RAW[1], "You forgot both the temperature and the top-k: that is the plain softmax of all four."
            ),
            WrongAnswer(_Q_TOP2_TIMES_T[1], "You multiplied by the temperature; logits are divided by it."),
            WrongAnswer(0.5, "Top-k keeps the two tokens but not as equals: their logits still differ."),
            WrongAnswer(
                _Q_TOP2[0], "That is token 0's probability, the likelier of the two; the question asks for token 1."
            ),
        ),
        decimals=3,
    ),
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
