"""hardware: the facts the spec rows, links and nodes add beside the peaks (chapter 05 and on)."""

from __future__ import annotations

import pytest

import brrrlib as bl
from brrrlib import hardware


@pytest.mark.parametrize(
    "name, precision",
    [("T4", "fp16"), ("V100", "fp16"), ("A100", "bf16"), ("H100", "bf16"), ("L4", "bf16"),
     ("RTX 4090", "bf16"), ("MI300X", "bf16")],
)  # fmt: skip
def test_fast_precision_is_the_fastest_matmul_on_the_sheet(name, precision):
    row = bl.spec(name)
    assert row.fast_precision == precision
    assert row.peak(precision) == max(row.peak_flops_per_s.values())


def test_every_device_names_its_host_link():
    for row in hardware.all_specs():
        assert hardware.host_link(row.name).kind == "host-device", row.name
    tesla_t4 = hardware.host_link("tesla t4")  # as torch names it, in any case
    assert (
        hardware.host_link("T4") == tesla_t4 == hardware.host_link("v100") == hardware.link("pcie3")
    )
    assert hardware.host_link("L4") == hardware.link("pcie4")
    assert hardware.host_link("H100") == hardware.link("pcie5")


def test_links_come_nearest_rung_first_and_fill_every_rung():
    kinds = [x.kind for x in hardware.links()]
    assert list(dict.fromkeys(kinds)) == list(hardware.LINK_KINDS)
    assert hardware.links("storage") == tuple(x for x in hardware.links() if x.kind == "storage")
    with pytest.raises(ValueError, match="kind"):
        hardware.links("carrier pigeon")


def test_pcie_generations_double():
    gen3, gen4, gen5 = (hardware.link(f"pcie{g}").bandwidth_bytes_per_s for g in (3, 4, 5))
    assert gen3 == pytest.approx(8e9 * 16 * 128 / 130 / 8, rel=1e-3)  # 8 GT/s x 16 lanes
    assert gen4 == pytest.approx(2 * gen3) and gen5 == pytest.approx(2 * gen4)


def test_t4_and_l4_rows_match_their_sheets():
    t4, l4 = bl.spec("T4"), bl.spec("L4")
    assert dict(t4.peak_flops_per_s) == {"fp32": 8.1e12, "fp16": 65e12}  # no tf32, no bf16
    assert t4.mem_bandwidth_bytes_per_s == 320e9
    assert l4.peak("bf16") == 242e12 / 2 and l4.peak("tf32") == 120e12 / 2  # sheet: sparse
    assert l4.mem_bandwidth_bytes_per_s == 300e9


def test_nodes_point_at_rows_of_the_other_tables():
    for n in (hardware.node("DGX A100"), hardware.node("dgx h100")):
        assert n.source and n.gpus_per_node == 8 and n.nics_per_node == 8
        bl.spec(n.gpu), hardware.link(n.gpu_link), hardware.link(n.nic_link)  # all resolve
    dgx = hardware.node("dgx h100")
    assert bl.spec(dgx.gpu) == bl.spec("H100") and "SXM" in dgx.gpu  # the SXM part
    assert hardware.link(dgx.nic_link) == hardware.link("ndr")
    with pytest.raises(ValueError, match="DGX H100"):
        hardware.node("DGX Z9000")
