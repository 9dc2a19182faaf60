"""The shared partitioner: node-name murmur2, identical to Kafka's own hash."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from podledger import local
from podledger.partitioner import partition_for_node

NODES = ["node-a", "node-b", "worker-17", "ip-10-0-3-4.ec2.internal", "ノード", ""]


def test_every_event_of_a_node_lands_on_one_partition() -> None:
    for node in NODES:
        assert len({partition_for_node(node, 12) for _ in range(3)}) == 1
        assert 0 <= partition_for_node(node, 12) < 12


def test_nodes_spread_over_all_partitions() -> None:
    used = {partition_for_node(f"node-{i}", 6) for i in range(200)}
    assert used == set(range(6))


def test_rejects_zero_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for_node("n", 0)


@pytest.mark.kafka
def test_matches_kafkas_java_murmur2(tmp_path: Path) -> None:
    """A Java or Go service keyed by node name computes the same partition we do."""
    java = shutil.which("java")
    assert java, "java is needed for this test"
    libs = local.fetch_kafka()
    source = tmp_path / "Murmur.java"
    source.write_text(
        "import org.apache.kafka.common.utils.Utils;\n"
        "public class Murmur { public static void main(String[] a) {\n"
        "  for (String s : a) System.out.println(Utils.toPositive(Utils.murmur2(s.getBytes("
        "java.nio.charset.StandardCharsets.UTF_8))) % 12); } }\n"
    )
    out = subprocess.run(
        [java, "-cp", f"{libs}/*", str(source), *NODES],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    assert [int(x) for x in out] == [partition_for_node(n, 12) for n in NODES]


def test_our_murmur2_equals_the_kafka_clients_on_random_bytes() -> None:
    """partitioner.murmur2 is our own, so the pure core needs no Kafka client; it must agree with
    aiokafka's bit for bit, for every tail length."""
    import random

    from aiokafka.partitioner import murmur2 as client_murmur2

    from podledger.partitioner import murmur2

    rng = random.Random(7)
    for _ in range(5000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
        assert murmur2(data) == client_murmur2(data) & 0xFFFFFFFF, data
