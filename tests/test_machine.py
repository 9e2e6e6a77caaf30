"""machine: device choice, sync, the spec table, and facts about this machine."""

import re

import pytest
import torch
from _fakes import fake_ceilings

import brrrlib as bl
from brrrlib import machine
from brrrlib.hardware import DeviceSpec

# ------------------------------------------------------ device() / sync() ---


def test_device_defaults_to_the_best_available(monkeypatch):
    monkeypatch.delenv("BRRR_DEVICE", raising=False)
    expected = (
        "cuda"
        if torch.cuda.is_available()
        else "mps"
        if torch.backends.mps.is_available()
        else "cpu"
    )
    assert bl.device().type == expected


def test_brrr_device_overrides(monkeypatch):
    monkeypatch.setenv("BRRR_DEVICE", "cpu")
    assert bl.device() == torch.device("cpu")
    monkeypatch.setenv("BRRR_DEVICE", " CPU ")  # any case, spaces trimmed
    assert bl.device() == torch.device("cpu")


def test_brrr_device_unknown_value_lists_what_is_available(monkeypatch):
    monkeypatch.setenv("BRRR_DEVICE", "tpu")
    with pytest.raises(ValueError, match=r"BRRR_DEVICE='tpu'.*available here: .*cpu"):
        bl.device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_brrr_device_unavailable_cuda_says_so(monkeypatch):
    monkeypatch.setenv("BRRR_DEVICE", "cuda")
    with pytest.raises(ValueError, match="BRRR_DEVICE='cuda'"):
        bl.device()
    with pytest.raises(ValueError, match="device='cuda'"):
        bl.benchmark(torch.neg, torch.ones(1), device="cuda")
    with pytest.raises(ValueError, match="available here: .*cpu"):
        bl.sync("cuda")


def test_sync_accepts_devices_names_and_tensors():
    bl.sync()
    bl.sync("cpu")
    bl.sync(torch.device("cpu"))
    bl.sync(torch.ones(1))
    with pytest.raises(TypeError, match="device must be"):
        bl.sync(3)
    with pytest.raises(
        ValueError, match=r"device='tpu' is not a device brrr knows.*cpu, cuda, mps"
    ):
        bl.sync("tpu")
    with pytest.raises(ValueError, match="did you mean 'cuda'"):
        bl.sync("cdua")


def test_one_gpu_has_one_name():
    assert machine.physical(torch.device("cpu")) == torch.device("cpu")
    if torch.cuda.is_available():
        assert machine.physical(torch.device("cuda")) == torch.device("cuda", 0)


def test_out_of_memory_is_recognised_and_cached_blocks_released(monkeypatch):
    emptied = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    machine.release_cached_memory(torch.device("cuda"))
    assert emptied == [True]
    machine.release_cached_memory(torch.device("cpu"))
    assert emptied == [True]  # a CPU has no cache to empty


@pytest.mark.parametrize(
    ("err", "out_of_memory"),
    [
        (RuntimeError("DefaultCPUAllocator: can't allocate memory"), True),
        (torch.OutOfMemoryError("CUDA out of memory"), True),
        (RuntimeError("shape mismatch"), False),
    ],
)
def test_out_of_memory_is_told_from_other_errors(err, out_of_memory):
    assert machine.is_out_of_memory(err) is out_of_memory


def test_machine_facts():
    assert machine.last_level_cache_bytes() >= 2**16
    assert machine.available_memory_bytes(torch.device("cpu")) > 2**20
    assert machine.device_name(torch.device("cpu"))


# ------------------------------------------------------------ spec table ---


def test_a100_is_the_essays_a100():
    a100 = bl.spec("A100")
    assert "40GB" in a100.name and a100.mem_bytes == 40 * 2**30  # the essay's: 40 GB
    assert a100.peak("bf16") == 312e12 and a100.peak("fp16") == 312e12
    assert a100.peak("tf32") == 156e12 and a100.peak("fp32") == 19.5e12
    assert a100.mem_bandwidth_bytes_per_s == 1.555e12
    assert a100.ridge_point_flops_per_byte() == pytest.approx(19.5e12 / 1.555e12)
    a100_80gb = bl.spec("A100 80GB SXM")
    assert a100_80gb.mem_bandwidth_bytes_per_s == 2.039e12


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("a100", "A100 40GB SXM"),
        ("H100", "H100 SXM"),
        ("h100-pcie", "H100 PCIe"),
        ("4090", "RTX 4090"),
        ("rtx4090", "RTX 4090"),
        ("RTX_3090", "RTX 3090"),
        ("tesla t4", "T4"),
        ("mi300x", "MI300X"),
        ("  L4 ", "L4"),
    ],
)
def test_spec_aliases_are_case_insensitive(alias, name):
    assert bl.spec(alias).name == name


def test_unknown_spec_lists_closest_matches():
    with pytest.raises(ValueError, match=r"no device named 'A1000'.*closest: .*A100"):
        bl.spec("A1000")
    with pytest.raises(TypeError, match="name must be str"):
        bl.spec(100)


def test_spec_table_is_consistent():
    table = bl.hardware.all_specs()
    assert len(table) >= 12
    assert len({s.name for s in table}) == len(table)
    for s in table:
        assert isinstance(s, DeviceSpec)
        assert len(s.source) > 20, f"{s.name} needs a source"
        assert s.mem_bytes > 8 * 2**30 and 1e11 < s.mem_bandwidth_bytes_per_s < 1e13
        for key, peak in s.peak_flops_per_s.items():
            # tensor-core paths are never slower than plain fp32
            assert peak >= s.peak("fp32"), (s.name, key)
        if "bf16" in s.peak_flops_per_s and "fp16" in s.peak_flops_per_s:
            assert s.peak("bf16") == s.peak("fp16")
        # every alias resolves back to its own row
        for alias in (s.name, *s.aliases):
            assert bl.spec(alias) is s


def test_missing_dtype_raises_instead_of_inventing_a_number():
    with pytest.raises(ValueError, match="got 'bf16'"):
        bl.spec("V100").peak("bf16")
    with pytest.raises(ValueError, match="got 'tf32'"):
        bl.spec("T4").ridge_point_flops_per_byte("tf32")
    assert bl.spec("T4").peak(torch.float16) == 65e12
    assert bl.spec("H100").peak(torch.bfloat16) == bl.spec("H100").peak("bfloat16")
    with pytest.raises(ValueError, match="dtype must be one of .*got 'int8'"):
        bl.spec("H100").peak("int8")


def test_peaks_mapping_is_read_only():
    with pytest.raises(TypeError):
        bl.spec("A100").peak_flops_per_s["fp32"] = 1.0


@pytest.mark.parametrize(
    ("gpu_name", "row"),
    [
        ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB SXM"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200 SXM"),
        ("Tesla T4", "T4"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10G", "A10G"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("AMD Instinct MI300X", "MI300X"),
        ("NVIDIA L40S", None),
    ],
)
def test_gpu_names_reported_by_torch_find_their_row(gpu_name, row):
    found = bl.hardware.spec_for_device_name(gpu_name)
    assert (found.name if found else None) == row


def _ridges(row: str) -> list[tuple[str, str]]:
    """A spec-table row's ridge points: ``(number, precision)``, precision "" for fp32's."""
    return re.findall(r"([\d.]+) FLOP/B(?: \((\w+)\))?", row)


def test_spec_table_lists_every_row_and_the_measured_one():
    fake = fake_ceilings(matmul_flops_per_s=2e11, mem_bandwidth_bytes_per_s=4e10)
    text = repr(bl.hardware.spec_table(fake))
    for s in bl.hardware.all_specs():
        assert s.name in text
    measured = text.splitlines()[-1]
    assert "cpu" in measured and "measured" in measured and "40 GB/s" in measured
    assert not _ridges(text)  # ridge points are the reader's arithmetic (chapter 00)
    with_bf16 = fake_ceilings(matmul_flops_per_s_by_dtype={"bf16": 8e11})
    here = repr(bl.hardware.spec_table(with_bf16, names="T4")).splitlines()[-1]
    assert "0.8 TFLOP/s" in here  # the measured bf16 column
    html = bl.hardware.spec_table(names=["T4"])._repr_html_()
    assert "T4" in html and "A100" not in html and "<table>" in html
    assert bl.hardware.spec_table(names="A100").rows == (bl.spec("A100"),)  # one name, not letters
    with pytest.raises(TypeError, match="bl.measure_ceilings"):
        bl.hardware.spec_table("fake")
