"""Where a measurement ran, and which kernels an operation ran as (chapters 4-6).

A timing means little without the machine behind it, so every timing cell of the book
prints ``machine()`` first: the device, torch's thread count and torch's version.

``kernels(fn)`` runs ``fn`` once under ``torch.profiler`` and lists the operators it
dispatched, nested as torch ran them. That is how the book shows, rather than asserts,
that ``F.rms_norm`` runs on a CPU as several elementwise passes while ``F.layer_norm`` is
one native kernel, and that CPU SDPA is a FlashAttention-style kernel of its own.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

__all__ = ["device_name", "machine", "kernels", "data_kernels", "BOOKKEEPING"]


def device_name(device: str = "cpu") -> str:
    """The processor's model name (from /proc/cpuinfo on Linux) or the GPU's name."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    cpuinfo = Path("/proc/cpuinfo")
    found = re.search(r"model name\s*:\s*(.+)", cpuinfo.read_text()) if cpuinfo.exists() else None
    return found.group(1).strip() if found else (platform.processor() or platform.machine())


def machine(device: str = "cpu") -> str:
    """One line for a timing cell: device, torch threads, torch version."""
    threads = torch.get_num_threads()
    return (
        f"{device}: {device_name(device)} | {threads} torch thread{'s' if threads != 1 else ''} | "
        f"torch {torch.__version__}"
    )


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 for a moment: the profiler's C++ side logs its start and
    stop there (with timestamps), which a notebook would otherwise show under the cell."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# Operators that allocate, reshape or convert without a pass over the data.
BOOKKEEPING = frozenset(
    "aten::" + name
    for name in (
        "empty", "empty_like", "empty_strided", "view", "as_strided", "transpose", "result_type", "to",
        "_to_copy", "copy_", "type_as", "reshape", "expand", "unsqueeze", "detach", "lift_fresh", "alias",
        "resolve_conj", "resolve_neg", "contiguous", "t", "permute", "slice", "select", "fill_", "zeros",
        "zero_", "_reshape_alias", "_unsafe_view", "promote_types", "unflatten", "_local_scalar_dense", "full",
        "full_like", "ones_like", "zeros_like",
    )
)  # fmt: skip


def kernels(fn: Callable[[], object], *, warmup: bool = True) -> list[tuple[int, str]]:
    """(depth, operator name) for each operator ``fn()`` dispatched, in order, depth 0 at the top.

    Runs ``fn`` once untimed first (``warmup``), so one-time setup does not show.
    """
    from torch.profiler import ProfilerActivity, profile

    if warmup:
        fn()
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    events = sorted(prof.events(), key=lambda event: event.time_range.start)
    found = []
    for event in events:
        depth, parent = 0, event.cpu_parent
        while parent is not None:
            depth, parent = depth + 1, parent.cpu_parent
        found.append((depth, event.name))
    return found


def data_kernels(fn: Callable[[], object]) -> list[str]:
    """The operators of ``fn()`` that do arithmetic on its data: no bookkeeping, and no
    operator whose work is done by the operators it calls (only the innermost ones count)."""
    ops = kernels(fn)
    leaves = []
    for i, (depth, name) in enumerate(ops):
        has_data_child = False
        for later_depth, later_name in ops[i + 1 :]:
            if later_depth <= depth:
                break
            if later_name not in BOOKKEEPING:
                has_data_child = True
                break
        if name not in BOOKKEEPING and not has_data_child:
            leaves.append(name)
    return leaves


def data_kernel_shapes(fn: Callable[[], object]) -> list[tuple[str, tuple[int, ...]]]:
    """(operator, shape of its first input) for each operator of ``data_kernels(fn)``, in order:
    which of them pass over a whole tensor and which over a smaller one (a row statistic)."""
    from torch.profiler import ProfilerActivity, profile

    def data_below(event) -> bool:
        return any(child.name not in BOOKKEEPING or data_below(child) for child in event.cpu_children)

    fn()  # warm up, as kernels() does
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    events = sorted(prof.events(), key=lambda event: event.time_range.start)
    return [
        (event.name, tuple(event.input_shapes[0]) if event.input_shapes else ())
        for event in events
        if event.name not in BOOKKEEPING and not data_below(event)
    ]
