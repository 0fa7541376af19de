"""lib.machine: the timing header, and the kernels an operation runs as (torch 2.13 on a CPU)."""

import torch
import torch.nn.functional as F

from lib.machine import data_kernels, kernels, machine


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
