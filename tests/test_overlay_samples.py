"""Real clients across a real overlay: the ``overlay_*`` samples against their brokers.

Each sample was captured on the underlay of Linux VXLAN devices in network namespaces
(``tests/corpus/overlay.py``): the official Python client talked to the test broker of
each tenant, and each broker wrote a journal of every frame it read and wrote. Decoded,
every tenant (its VNI) must have its broker's connections and, per direction, exactly the
frames of its journal in order; two tenants that used the very same addresses and ports
stay two connections; the outer fragments, the doubled copies and the snaplen's cuts are
what the capture says they are.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pwcap.decode.driver import Summary, decode_captures
from tests.conftest import SAMPLES

OVERLAYS = sorted(SAMPLES.glob("overlay_*.pcap"))


def truth_of(capture: Path) -> dict:
    return json.loads(capture.with_suffix(".truth.json").read_text())


def journal_of(capture: Path, tenant: dict) -> list[dict]:
    lines = (SAMPLES / tenant["journal"]).read_text().splitlines()
    return [json.loads(line) for line in lines if line]


@pytest.fixture(scope="module")
def decoded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Summary, dict]]:
    found = {}
    for capture in OVERLAYS:
        out = tmp_path_factory.mktemp(capture.stem) / "out"
        summary = decode_captures([capture], out)
        tables = {t: pq.read_table(out / t).to_pylist() for t in ("frames", "connections")}
        found[capture.name] = (summary, tables)
    return found


def frames_by_tenant(tables: dict) -> dict[str, dict[str, list[tuple[str, int]]]]:
    """Per encapsulation and direction: (command, frame size) in stream order."""
    encapsulation = {row["conn_id"]: row["encapsulation"] for row in tables["connections"]}
    found: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for row in sorted(tables["frames"], key=lambda r: (r["conn_id"], r["stream_offset"])):
        found[encapsulation[row["conn_id"]]][row["direction"]].append(
            (row["command"], row["frame_size"])
        )
    return found


def journal_frames(journal: list[dict]) -> dict[str, list[tuple[str, int]]]:
    found: dict[str, list] = defaultdict(list)
    for row in journal:
        found[row["dir"]].append((row["cmd"], row["frame_size"]))
    return found


def test_there_are_overlay_samples() -> None:
    names = {capture.stem for capture in OVERLAYS}
    assert {"overlay_vxlan_two_tenants", "overlay_vxlan_fragmented"} <= names


@pytest.mark.parametrize("capture", OVERLAYS, ids=[c.stem for c in OVERLAYS])
def test_each_tenant_has_its_broker_s_connections_and_frames(capture: Path, decoded) -> None:
    truth = truth_of(capture)
    summary, tables = decoded[capture.name]
    found = frames_by_tenant(tables)
    assert set(found) == {f"vxlan:{tenant['vni']}" for tenant in truth["tenants"]}
    cut = truth["capture"]["snaplen"] < 65535
    for tenant in truth["tenants"]:
        label = f"vxlan:{tenant['vni']}"
        connections = [row for row in tables["connections"] if row["encapsulation"] == label]
        assert len(connections) == len(tenant["connections"])
        client, broker = tenant["connections"][0]["client"], tenant["connections"][0]["broker"]
        assert {f"{c['client_ip']}:{c['client_port']}" for c in connections} == {client}
        assert {f"{c['server_ip']}:{c['server_port']}" for c in connections} == {broker}
        expected = journal_frames(journal_of(capture, tenant))
        for direction, frames in expected.items():
            if cut:  # what a cut capture decodes is the journal's, in its order
                mine = iter(frames)
                assert all(frame in mine for frame in found[label][direction])
            else:
                assert found[label][direction] == frames, (label, direction)
    assert summary.capture_totals().records == truth["capture"]["packets"]


def test_two_tenants_with_the_very_same_endpoints_stay_two_connections(decoded) -> None:
    _, tables = decoded["overlay_vxlan_two_tenants.pcap"]
    endpoints = {
        (row["client_ip"], row["client_port"], row["server_ip"], row["server_port"])
        for row in tables["connections"]
    }
    assert len(endpoints) == 1 and len(tables["connections"]) == 2


def test_an_underlay_that_fragments_is_put_back_together(decoded) -> None:
    summary, _ = decoded["overlay_vxlan_fragmented.pcap"]
    stats = summary.capture_totals()
    assert stats.fragments_reassembled > 10
    assert stats.fragments_dropped == 0
    assert stats.encapsulations == {"vxlan:4242": stats.tcp_segments}


def test_a_span_of_both_router_ports_counts_each_packet_once(decoded) -> None:
    summary, tables = decoded["overlay_vxlan_span_doubled.pcap"]
    stats = summary.capture_totals()
    assert stats.duplicates == stats.tcp_segments > 0
    assert stats.retransmitted_bytes == 0
    assert all(row["gaps"] == 0 for row in tables["connections"])


def test_a_mirror_s_snaplen_is_a_gap_of_the_bytes_it_cut(decoded) -> None:
    capture = SAMPLES / "overlay_vxlan_ipv6_cut.pcap"
    _, tables = decoded[capture.name]
    (tenant,) = truth_of(capture)["tenants"]
    sent = defaultdict(int)
    for row in journal_of(capture, tenant):
        sent[row["dir"]] += row["frame_size"]
    (connection,) = tables["connections"]
    captured = connection["bytes_c2b"] + connection["bytes_b2c"]
    assert captured + connection["gap_bytes"] == sent["c2b"] + sent["b2c"]
    assert connection["gap_bytes"] > 0
