"""Chapter 8's check-yourself exercises: the vision transformer.

The numbers are new ones (a 192×320 image, 32-pixel patches, 384×384 at p=16), so an
exercise applies the chapter's idea rather than re-reading the 224/16 example. Each is
written as the arithmetic that produces it, and each wrong answer is the result of one
named mistake; the numbers were picked so that no two mistakes give the same answer.
Those are the book's numbers: 8.1-8.4 and 8.9 are factories whose params a student's copy
draws its own numbers from (lib.variants), with choices that keep every mistake apart.
"""

from __future__ import annotations

import torch

from lib.drawn_cases import integer, normal, sizes
from lib.exercises.base import Case, FunctionExercise, ValueExercise, WrongAnswer
from lib.variants import Param
from lib.vit import conv_weight, patchify

# A 192×320 RGB image in 32×32 patches, projected to d = 512 (the book's numbers). The patch side
# stays 32 in every variant, so 8.2's "Those 32×32 RGB patches" always means 8.1's patches, and the
# conv of 8.3 (written in code) keeps the book's 512 and 32; each question draws its own image or d.
_C, _P, _D = 3, 32, 512
_LENGTH = _C * _P * _P  # 3072
_BOOK_PATCHES = (192 // _P) * (320 // _P)  # 60, the patch count of 8.1's book image
_HEIGHTS = (160, 192, 224, 256)  # 5 to 8 rows of 32-pixel patches
_WIDTHS = (288, 320, 352, 416)  # 9 to 13 columns: always wider than high, so rows and columns differ


_SHARED = (
    "The projection is shared: every patch is multiplied by the same matrix, which is exactly why it "
    "equals a convolution (one kernel slid over the image). Its size does not depend on the patch count."
)


def _patch_grid(height: int, width: int) -> ValueExercise:
    """8.patch-grid for a height×width RGB image in 32×32 patches (the book: 192×320)."""
    rows, cols = height // _P, width // _P
    patches = rows * cols
    return ValueExercise(
        id="8.patch-grid",
        question=(
            f"An RGB image of {height}×{width} pixels (height × width) is cut into 32×32 patches. How many patches "
            "are there, and how many entries does each flattened patch have? Answer [patches, entries]."
        ),
        expected=[patches, _LENGTH],
        explanation=(
            f"({height}/32)·({width}/32) = {rows}·{cols} = {patches} patches, each 3·32·32 = {_LENGTH} entries."
        ),
        hints=("Count patches down and across, then multiply. A patch holds p·p pixels in each of C channels.",),
        wrong_answers=(
            WrongAnswer([patches, _P * _P], "Each patch has 32·32 pixels in each of the 3 channels: multiply by C."),
            WrongAnswer(
                [rows + cols, _LENGTH],
                f"{rows} rows and {cols} columns of patches make {rows}·{cols} patches, not {rows} + {cols}.",
            ),
            WrongAnswer(
                [patches + 1, _LENGTH],
                f"{patches + 1} counts the class token, which is a token but not a patch of the image.",
            ),
            WrongAnswer(
                [height * width // _P, _LENGTH],
                "You divided the pixel count by p. A patch covers p·p pixels: divide by p² (or count per side).",
            ),
            WrongAnswer([patches, _C * _P], "A patch is p×p pixels, not p: its length is C·p·p."),
            WrongAnswer([_LENGTH, patches], "Swapped: the first number is the patch count, the second the length."),
        ),
        whole=True,
        params=(Param("height", 192, _HEIGHTS), Param("width", 320, _WIDTHS)),
        make=_patch_grid,
    )


def _projection_params(d: int) -> ValueExercise:
    """8.projection-params for 32×32 RGB patches projected to width d (the book: 512)."""
    params = _LENGTH * d + d  # weights + one bias per output: 1,573,376 at d = 512
    return ValueExercise(
        id="8.projection-params",
        question=(
            f"Those 32×32 RGB patches are each projected to width d = {d} by one linear layer with a bias. "
            "How many learnable parameters does the projection have?"
        ),
        expected=params,
        explanation=f"A ({d} × 3072) weight plus {d} biases: {_LENGTH}·{d} + {d} = {params:,}.",
        hints=("One weight per (input entry, output feature) pair, plus one bias per output feature.",),
        wrong_answers=(
            WrongAnswer(_LENGTH * d, f"That is the weight matrix alone: add the {d} biases."),
            WrongAnswer(_BOOK_PATCHES * params, _SHARED),
            WrongAnswer(_P * _P * d + d, "Each flattened patch has 3·32·32 inputs: you left out the channels."),
            WrongAnswer(
                params / 1e6,
                "That is the count in millions. The question asks for the count itself: write every digit.",
            ),
        ),
        whole=True,
        params=(Param("d", 512, (256, 384, 512, 640, 768)),),
        make=_projection_params,
    )


def _conv_output(height: int, width: int) -> ValueExercise:
    """8.conv-output: a patch projection with d = 512, p = 32, on one height×width image (the book: 192×320).
    Its d stays 512 whatever 8.projection-params drew: the question does not call it that projection."""
    rows, cols = height // _P, width // _P
    return ValueExercise(
        id="8.conv-output",
        question=(
            f"A patch projection written as nn.Conv2d(3, 512, kernel_size=32, stride=32), applied to one "
            f"{height}×{width} image, gives an output of shape (512, h, w). What are [512, h, w]?"
        ),
        expected=[_D, rows, cols],
        explanation=(
            f"With stride = kernel = 32 the windows tile the image: {height}/32 = {rows} rows, "
            f"{width}/32 = {cols} columns."
        ),
        hints=("With no padding, a kernel k at stride s gives (size − k)/s + 1 outputs along each axis.",),
        wrong_answers=(
            WrongAnswer(
                [_D, height - _P + 1, width - _P + 1],
                "That is stride 1: overlapping windows one pixel apart. A patch projection moves by a whole patch.",
            ),
            WrongAnswer(
                [_D, cols, rows],
                f"Height comes first: {height}/32 = {rows} rows of patches, {width}/32 = {cols} columns.",
            ),
            WrongAnswer(
                [_LENGTH, rows, cols],
                "The output has one channel per output feature, d = 512; 3072 is what each kernel reads.",
            ),
        ),
        whole=True,
        params=(Param("height", 192, _HEIGHTS), Param("width", 320, _WIDTHS)),
        make=_conv_output,
    )


def _tokens_with_cls(side: int, patch: int) -> ValueExercise:
    """8.tokens-with-cls for side×side images in patch×patch patches (the book: 384, 16)."""
    grid = side // patch
    tokens = grid**2 + 1
    return ValueExercise(
        id="8.tokens-with-cls",
        question=(
            f"A ViT reads {side}×{side} RGB images in {patch}×{patch} patches and puts a class token in front. "
            "How many tokens does each transformer block see?"
        ),
        expected=tokens,
        explanation=f"({side}/{patch})² = {grid}² = {grid**2} patch tokens, plus the class token: {tokens}.",
        hints=("Count patches per side, square, then add what the model prepends.",),
        wrong_answers=(
            WrongAnswer(tokens - 1, "Those are the patch tokens only: the class token is one more token."),
            WrongAnswer(grid, f"{grid} is the count along one side; the image has {grid} × {grid} patches."),
            WrongAnswer(grid + 1, f"{grid} is one side of the grid; square it before adding the class token."),
            WrongAnswer(
                tokens + 1,
                f"One token too many: the class token is the only token added to the {grid**2} patches. "
                "Positions are added to the tokens' vectors, they are not extra tokens.",
            ),
        ),
        whole=True,
        params=(Param("side", 384, (224, 384, 512)), Param("patch", 16, (16, 32))),
        make=_tokens_with_cls,
    )


CHAPTER_8 = (
    _patch_grid(192, 320),
    _projection_params(512),
    _conv_output(192, 320),
    _tokens_with_cls(384, 16),
    ValueExercise(
        id="8.halve-patch-attention",
        question=(
            "Keep the image fixed and halve the patch side, say from 28 to 14 pixels. Ignoring the class token, "
            "by what factor does the number of attention scores per head and layer change?"
            " Give it to 2 decimal places."
        ),
        expected=16.0,
        explanation="Half the side means 2×2 = 4 times the patches; every token scores every token, so 4² = 16.",
        hints=("First find the factor for the token count N. Attention scores every pair: N².",),
        wrong_answers=(
            WrongAnswer(4.0, "4 is the factor for the tokens. Attention compares every pair of tokens: square it."),
            WrongAnswer(
                2.0,
                "Halving the side doubles the patches along each axis, so 2·2 = 4 times the tokens; "
                "attention scores every pair of them: 4² = 16.",
            ),
            WrongAnswer(1 / 16, "Smaller patches mean more tokens, not fewer: the cost grows."),
            WrongAnswer(0.25, "Smaller patches mean more tokens, not fewer: the cost grows, and quadratically."),
            WrongAnswer(8.0, "Tokens grow 4× and attention is quadratic in tokens: 4² = 16, not 4·2."),
        ),
        decimals=2,
    ),
    ValueExercise(
        id="8.halve-patch-projection",
        question=(
            "Same change (patch side halved, image fixed). By what factor does the total work of the patch "
            "projection for one image (multiply-adds of the linear layer) change?"
            " Give it to 2 decimal places."
        ),
        expected=1.0,
        explanation="4× the patches, each a quarter as long: N·(C·p²)·d = (H·W/p²)·C·p²·d = H·W·C·d, free of p.",
        hints=("Write the work as patches × entries per patch × d, and put p into both.",),
        wrong_answers=(
            WrongAnswer(4.0, "The patch count grows 4×, but each patch has a quarter of the entries."),
            WrongAnswer(0.25, "Each patch has a quarter of the entries, but there are 4× as many patches."),
            WrongAnswer(16.0, "Each patch is projected once, on its own: the work is linear in N, not quadratic."),
        ),
        decimals=2,
    ),
)


def _image(batch: int, channels: int, height: int, width: int) -> torch.Tensor:
    """Entries 0.25, 0.75, 1.25, ... in memory order: all distinct, so any pixel put in the wrong place
    shows, and none whole, so a function that rounds or casts to integers (.long(), uint8) shows too."""
    count = batch * channels * height * width
    return (torch.arange(count, dtype=torch.float32) * 0.5 + 0.25).reshape(batch, channels, height, width)


def _weight(d: int, length: int) -> torch.Tensor:
    """A (d, length) linear weight with distinct entries that are not whole numbers, as _image's."""
    return torch.arange(d * length, dtype=torch.float32).reshape(d, length) * 0.5 + 0.25


_PATCHES = (  # unfold in all its forms, and the convolution a patch projection equals
    "torch.Tensor.unfold", "torch.nn.functional.unfold", "torch.nn.Unfold", "torch.nn.functional.fold",
    "torch.nn.Fold", "torch.nn.functional.conv2d", "torch.conv2d", "torch.nn.Conv2d", "lib.vit.PatchEmbed",
    # a fourth hostile batch: F.unfold's own kernel, and the convolutions conv2d is one of
    "torch._C._nn.im2col", "torch._C._nn.col2im", "torch.convolution", "torch._convolution", "torch._convolution_mode",
    "torch.conv1d", "torch.conv3d", "torch.conv_transpose1d", "torch.conv_transpose2d", "torch.conv_transpose3d",
    "torch.nn.functional.conv1d", "torch.nn.functional.conv3d", "torch.nn.functional.conv_transpose2d",
    "torch.mkldnn_convolution", "torch.conv_tbc", "torch.nn.Conv1d", "torch.nn.Conv3d", "torch.nn.ConvTranspose2d",
)  # fmt: skip


def _draw_images(generator: torch.Generator) -> tuple[torch.Tensor, int]:
    """(B, C, H, W) images whose sides are whole numbers of p×p patches."""
    patch = integer(generator, 1, 4)
    batch, channels, rows, columns = (*sizes(generator, 2, 1, 3), *sizes(generator, 2, 1, 3))
    return normal(generator, (batch, channels, rows * patch, columns * patch)), patch


def _draw_weight(generator: torch.Generator) -> tuple[torch.Tensor, int, int]:
    """A (d, C·p·p) linear weight, with C and p."""
    d, channels, patch = integer(generator, 1, 5), integer(generator, 1, 3), integer(generator, 1, 3)
    return normal(generator, (d, channels * patch * patch)), channels, patch


CHAPTER_8_FUNCTIONS = (
    FunctionExercise(
        id="8.patchify",
        question=(
            "Write my_patchify(images, patch) that turns (B, C, H, W) images into (B, N, C·p·p): non-overlapping "
            "p×p patches in row-major order (left to right, then top to bottom), each flattened channel first, "
            "then row, then column."
        ),
        reference=patchify,
        cases=(
            Case(
                "one channel, 4×4, p=2",
                lambda: (_image(1, 1, 4, 4), 2),
                "Each patch must be a 2×2 square of neighbouring pixels, not 4 pixels in a row.",
            ),
            Case("a batch of two", lambda: (_image(2, 1, 4, 4), 2), "Treat each image of the batch on its own."),
            Case(
                "a wide image, 4×6, p=2",
                lambda: (_image(1, 1, 4, 6), 2),
                "Row-major: the 3 patches of the top row come first, then the next row.",
            ),
            Case(
                "three channels",
                lambda: (_image(1, 3, 4, 4), 2),
                "Flatten each patch as (C, p, p): all of channel 0's pixels, then channel 1's, ...",
            ),
            Case(
                "patch = whole image",
                lambda: (_image(2, 3, 4, 4), 4),
                "With p equal to the image size there is one patch holding every entry.",
            ),
            Case("p = 1", lambda: (_image(1, 2, 2, 3), 1), "With p = 1 every pixel is a patch of C entries."),
        ),
        wrong_answers=(
            WrongAnswer(
                lambda x, p: x.reshape(x.shape[0], -1, x.shape[1] * p * p),
                "A plain reshape keeps memory order, so each 'patch' is a strip of consecutive pixels of one row. "
                "Split H and W into (H/p, p) and (W/p, p), then permute so the patch grid comes first.",
            ),
            WrongAnswer(
                lambda x, p: (
                    x.reshape(x.shape[0], x.shape[1], x.shape[2] // p, p, x.shape[3] // p, p)
                    .permute(0, 4, 2, 1, 3, 5)
                    .reshape(x.shape[0], -1, x.shape[1] * p * p)
                ),
                "Your patches go column by column (top to bottom first). Row-major order puts the grid row "
                "(H/p) before the grid column (W/p).",
            ),
            WrongAnswer(
                lambda x, p: (
                    x.reshape(x.shape[0], x.shape[1], x.shape[2] // p, p, x.shape[3] // p, p)
                    .permute(0, 2, 4, 1, 5, 3)
                    .reshape(x.shape[0], -1, x.shape[1] * p * p)
                ),
                "Inside each patch you read the pixels column by column. Keep (row, column) order: (C, p_row, p_col).",
            ),
            WrongAnswer(
                lambda x, p: (
                    x.reshape(x.shape[0], x.shape[1], x.shape[2] // p, p, x.shape[3] // p, p)
                    .permute(0, 2, 4, 3, 5, 1)
                    .reshape(x.shape[0], -1, x.shape[1] * p * p)
                ),
                "You flattened each patch channels-last, (p, p, C). The conv kernel is (C, p, p): channel first.",
            ),
        ),
        explanation=(
            "reshape to (B, C, H/p, p, W/p, p), permute to (B, H/p, W/p, C, p, p), reshape to (B, N, C·p·p): "
            "the order nn.Conv2d uses for its kernel, so the projection equals the strided conv."
        ),
        hints=("images.reshape(B, C, H // p, p, W // p, p), then .permute(...) and .reshape(B, N, C * p * p).",),
        stands_for=("lib.vit.patchify", "lib.vit.patchify_loop"),
        forbids=_PATCHES,
        draw=_draw_images,
    ),
    FunctionExercise(
        id="8.conv-weight",
        question=(
            "Write my_conv_weight(linear_weight, in_channels, patch): the nn.Linear weight of a patch projection, "
            "shape (d, C·p·p), as the kernel (d, C, p, p) of the equal nn.Conv2d(C, d, kernel_size=p, stride=p)."
        ),
        reference=conv_weight,
        cases=(
            Case(
                "one channel, p=2",
                lambda: (_weight(2, 4), 1, 2),
                "Row j of the linear weight is output feature j's kernel, flattened in (C, p, p) order.",
            ),
            Case(
                "three channels, p=2",
                lambda: (_weight(3, 12), 3, 2),
                "patchify flattens channel first: the first p·p inputs are all of channel 0.",
            ),
            Case(
                "two channels, p=3",
                lambda: (_weight(4, 18), 2, 3),
                "Reshape each row to (C, p, p); the output axis d stays first.",
            ),
        ),
        wrong_answers=(
            WrongAnswer(
                lambda w, c, p: w.t().reshape(w.shape[0], c, p, p),
                "nn.Linear already stores its weight as (out, in) = (d, C·p·p), the conv's layout: don't transpose.",
            ),
            WrongAnswer(
                lambda w, c, p: w.reshape(w.shape[0], c, p, p).transpose(2, 3),
                "You swapped the rows and columns inside the kernel; patchify reads each patch row by row.",
            ),
            WrongAnswer(
                lambda w, c, p: w.reshape(w.shape[0], p, p, c).permute(0, 3, 1, 2),
                "You read the inputs as (p, p, C), channels last. patchify flattens them (C, p, p): just reshape.",
            ),
        ),
        explanation="linear_weight.reshape(d, C, p, p): the patch vectors are already in the kernel's order.",
        hints=("No transpose or permute is needed if patches were flattened in (C, p, p) order.",),
        stands_for=("lib.vit.conv_weight",),
        forbids=("lib.vit.PatchEmbed",),
        draw=_draw_weight,
    ),
)

# 8.resolution: a 224-trained ViT (p = 16, class token, the chapter's worked example) run at a new
# height×width (the book: 320×480), its position table resized. The new images are never square, so
# the two square-image mistakes stay apart, and always larger than 224×224.


def _resolution(height: int, width: int) -> ValueExercise:
    """8.resolution for new images of height×width (the book: 320×480)."""
    grid = (height // 16, width // 16)  # (20, 30) in the book
    rows = grid[0] * grid[1] + 1  # 601 in the book
    return ValueExercise(
        id="8.resolution",
        question=(
            f"A ViT trained on 224×224 images with 16×16 patches and a class token is run on {height}×{width} images "
            "(height × width), its position table resized by interpolation as timm does. How many rows does the "
            "new position table have?"
        ),
        expected=rows,
        explanation=(
            f"The patch grid becomes {height}/16 × {width}/16 = {grid[0]} × {grid[1]} = {rows - 1} patch rows, "
            "interpolated from the 14 × 14 grid; the class token's row is kept as it is: "
            f"{rows} rows."
        ),
        hints=(
            "The patch size stays 16: count the new grid of patches.",
            "The table has one row per token, and the class token is a token.",
        ),
        wrong_answers=(
            WrongAnswer(rows - 1, "Those are the patch rows; the class token keeps its own row too."),
            WrongAnswer(197, "197 is the table the model was trained with; the new image has more patches."),
            WrongAnswer(
                grid[1] ** 2 + 1, f"The image is not square: {height}/16 = {grid[0]} rows of {grid[1]} patches."
            ),
            WrongAnswer(
                grid[0] ** 2 + 1, f"The image is not square: {width}/16 = {grid[1]} patches per row, not {grid[0]}."
            ),
            WrongAnswer(height * width // 16 + 1, "Divide each side by 16 (the patch is 16 × 16), not the area by 16."),
        ),
        whole=True,
        params=(Param("height", 320, (256, 320, 352, 400)), Param("width", 480, (432, 480, 560, 640))),
        make=_resolution,
    )


CHAPTER_8_RESOLUTION = (_resolution(320, 480),)

EXERCISES = CHAPTER_8 + CHAPTER_8_FUNCTIONS + CHAPTER_8_RESOLUTION
