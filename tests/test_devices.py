"""devices: device choice, the spec table, and measured ceilings (measured once per session)."""

import json
import math

import pytest
import torch
from _fakes import fake_ceilings

import brrrlib as bl
from brrrlib import devices
from brrrlib.devices import Ceilings, DeviceSpec

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
    monkeypatch.setenv("BRRR_DEVICE", " CPU ".lower())
    assert bl.device() == torch.device("cpu")


def test_brrr_device_unknown_value_lists_what_is_available(monkeypatch):
    monkeypatch.setenv("BRRR_DEVICE", "tpu")
    with pytest.raises(ValueError, match=r"BRRR_DEVICE='tpu'.*available here: .*cpu"):
        bl.device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_brrr_device_unavailable_cuda_says_so(monkeypatch):
    monkeypatch.setenv("BRRR_DEVICE", "cuda")
    with pytest.raises(ValueError, match="no cuda device"):
        bl.device()


def test_sync_accepts_devices_names_and_tensors():
    bl.sync()
    bl.sync("cpu")
    bl.sync(torch.device("cpu"))
    bl.sync(torch.ones(1))
    with pytest.raises(TypeError, match="device must be"):
        bl.sync(3)


# ------------------------------------------------------------ spec table ---


def test_a100_is_the_essays_a100():
    a100 = bl.spec("A100")
    assert a100.name == "A100 40GB SXM"
    assert a100.peak("bf16") == 312e12 and a100.peak("fp16") == 312e12
    assert a100.peak("tf32") == 156e12 and a100.peak("fp32") == 19.5e12
    assert a100.mem_bandwidth_bytes_per_s == 1.555e12
    assert a100.ridge_point_flops_per_byte() == pytest.approx(19.5e12 / 1.555e12)
    assert bl.spec("A100 80GB SXM").mem_bandwidth_bytes_per_s == 2.039e12


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
    with pytest.raises(TypeError, match="name must be a str"):
        bl.spec(100)


def test_spec_table_is_consistent():
    table = bl.specs()
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
    with pytest.raises(KeyError, match="V100 SXM2 32GB has no bf16"):
        bl.spec("V100").peak("bf16")
    with pytest.raises(KeyError, match="no tf32"):
        bl.spec("T4").ridge_point_flops_per_byte("tf32")
    assert bl.spec("T4").peak(torch.float16) == 65e12
    assert bl.spec("H100").peak(torch.bfloat16) == bl.spec("H100").peak("bfloat16")
    with pytest.raises(ValueError, match="dtype='int8'"):
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
    found = devices._spec_for_device_name(gpu_name)
    assert (found.name if found else None) == row


# -------------------------------------------------------------- Ceilings ---


_fake = fake_ceilings


def test_ceilings_ridge_point_repr_and_round_trip():
    c = _fake()
    assert c.ridge_point_flops_per_byte() == pytest.approx(10.0)
    text = repr(c)
    for piece in ("200 GFLOP/s", "150 GFLOP/s", "20 GB/s", "1 µs", "10 FLOP/byte", "Test CPU"):
        assert piece in text
    assert "<table>" in c._repr_html_()
    assert Ceilings(**json.loads(json.dumps(c.to_dict()))) == c
    assert not c.noisy and _fake(relative_iqr={"memory": 0.5}).noisy
    busy = _fake(cpu_share=0.5)  # consistently slow: small spread, but half the cores were taken
    assert busy.noisy and "50%" in busy._noise_note() and "NOISY" in repr(busy)
    assert not _fake(device="cuda", cpu_share=0.5).noisy  # only meaningful on a CPU


def test_ceilings_reject_nonsense():
    with pytest.raises(ValueError, match="mem_bandwidth_bytes_per_s"):
        _fake(mem_bandwidth_bytes_per_s=0)
    with pytest.raises(ValueError, match="op_overhead_s"):
        _fake(op_overhead_s=float("nan"))


def test_nearest_spec_by_name_on_a_gpu_else_by_numbers():
    a100 = _fake(device="cuda", device_name="NVIDIA A100-SXM4-80GB", matmul_flops_per_s=19e12)
    assert a100.nearest_spec().name == "A100 80GB SXM"
    slow = _fake()  # a CPU is far below every GPU: the nearest is the slowest row
    assert slow.nearest_spec() is min(bl.specs(), key=lambda s: s.peak("fp32"))


# ------------------------------------------------- measure_ceilings (live) ---


def test_measured_ceilings_are_plausible(measured_ceilings):
    c = measured_ceilings
    assert c.device == bl.device().type and c.dtype == "fp32"
    assert c.torch_version == torch.__version__ and c.library_version == bl.__version__
    # wide physical bounds (a phone to a datacenter GPU), not expected values
    assert 1e9 < c.matmul_flops_per_s < 1e16
    assert 1e8 < c.vector_flops_per_s < 1e16
    assert 1e8 < c.mem_bandwidth_bytes_per_s < 1e14
    assert 1e-8 < c.op_overhead_s < 1e-3
    assert c.matmul_size >= 1024 and c.copy_bytes >= 64 * 2**20
    assert math.isclose(
        c.ridge_point_flops_per_byte(), c.matmul_flops_per_s / c.mem_bandwidth_bytes_per_s
    )
    assert set(c.relative_iqr) == {"matmul", "vector", "memory", "overhead"}
    assert 0 < c.cpu_share <= 1
    # No ordering between ceilings is asserted: on a busy 2-core machine a
    # competing process can slow any one of them by 10x (benchmarks/ceilings.py
    # sets them beside independent measurements instead).


def test_ceilings_are_cached_per_machine(measured_ceilings, ceilings_cache_dir, monkeypatch):
    files = list(ceilings_cache_dir.glob("ceilings-*.json"))
    assert len(files) == 1 and torch.__version__.split("+")[0] in files[0].name

    def must_not_measure(*a, **k):
        raise AssertionError("measured again despite the cache")

    monkeypatch.setattr(devices, "_measure", must_not_measure)
    assert bl.measure_ceilings(progress=False) == measured_ceilings


def test_refresh_and_damaged_cache_measure_again(measured_ceilings, tmp_path, monkeypatch):
    monkeypatch.setenv("BRRR_CACHE_DIR", str(tmp_path))
    calls = []

    def fake_measure(dev, name, progress):
        calls.append(dev)
        return _fake(device=dev.type, device_name=name)

    monkeypatch.setattr(devices, "_measure", fake_measure)
    first = bl.measure_ceilings(progress=False)
    assert len(calls) == 1
    assert bl.measure_ceilings(progress=False) == first and len(calls) == 1
    bl.measure_ceilings(refresh=True, progress=False)
    assert len(calls) == 2
    (path,) = tmp_path.glob("ceilings-*.json")
    path.write_text("{not json")
    bl.measure_ceilings(progress=False)
    assert len(calls) == 3


def test_measure_ceilings_validates_device():
    with pytest.raises(TypeError, match="device must be"):
        bl.measure_ceilings(3)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="not available here"):
            bl.measure_ceilings("cuda")


def test_spec_table_lists_every_row_and_the_measured_one():
    fake = fake_ceilings(matmul_flops_per_s=2e11, mem_bandwidth_bytes_per_s=4e10)
    text = repr(bl.devices.spec_table(fake))
    for s in bl.specs():
        assert s.name in text
    assert "this machine (cpu, measured)" in text and "5.0 FLOP/B (fp32)" in text
    # the A100's ridge point over bf16: 312e12 / 1.555e12 = 201
    assert "201 FLOP/B" in text.splitlines()[2]
    html = bl.devices.spec_table(names=["T4"])._repr_html_()
    assert "T4" in html and "A100" not in html and "<table>" in html
