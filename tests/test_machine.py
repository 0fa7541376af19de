"""lib.machine: the timing header, and the kernels an operation runs as (torch 2.13 on a CPU)."""

import torch
import torch.nn.functional as F

from lib.machine import data_kernel_shapes, data_kernels, kernels, machine


def test_machine_names_device_threads_and_version():
    line = machine()
    assert line.startswith("cpu: ") and torch.__version__ in line
    assert f"{torch.get_num_threads()} torch thread" in line


def test_layer_norm_is_one_kernel_and_rms_norm_several():
    x, weight, bias = torch.randn(8, 16), torch.ones(16), torch.zeros(16)
    assert data_kernels(lambda: F.layer_norm(x, (16,), weight, bias)) == ["aten::native_layer_norm"]
    rms = data_kernels(lambda: F.rms_norm(x, (16,), weight, 1e-6))
    assert len(rms) > 3 and "aten::rsqrt" in rms and "aten::pow" in rms


def test_cpu_sdpa_is_a_flash_kernel():
    q = torch.randn(1, 2, 8, 4)
    assert data_kernels(lambda: F.scaled_dot_product_attention(q, q, q)) == [
        "aten::_scaled_dot_product_flash_attention_for_cpu"
    ]
    depths = [depth for depth, _ in kernels(lambda: F.scaled_dot_product_attention(q, q, q))]
    assert depths[0] == 0 and max(depths) >= 1


def test_kernel_shapes_separate_full_passes_from_row_statistics():
    x, weight = torch.randn(8, 16), torch.ones(16)
    call = lambda: F.rms_norm(x, (16,), weight, 1e-6)  # noqa: E731
    shapes = data_kernel_shapes(call)
    assert [name for name, _ in shapes] == data_kernels(call)
    by_name = dict(shapes)
    assert by_name["aten::pow"] == (8, 16) and by_name["aten::rsqrt"] == (8, 1)  # the reduction's column
    assert data_kernel_shapes(lambda: F.layer_norm(x, (16,))) == [("aten::native_layer_norm", (8, 16))]
