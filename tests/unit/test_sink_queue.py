"""The sink's in-memory bookkeeping (no apiserver): coalescing and what gets scheduled."""

from __future__ import annotations

from podledger.agents.sink.writer import Sink, mirror_matches
from podledger.config import Settings
from podledger.schemas import models


def vs(version: int, uid: str = "u1", **kw: object) -> models.VersionedPodStatus:
    return models.VersionedPodStatus(
        uid=uid,
        namespace="default",
        name="p",
        node="n",
        version=version,
        status={"phase": "Running"},
        could_have_running_containers=True,
        finished=False,
        static=bool(kw.get("static", False)),
        mirror_uid=kw.get("mirror_uid"),
        deleting=False,  # type: ignore[arg-type]
        cause=models.Cause("t", "pod-updates", 0, version, 0),
        ts_ms=0,
    )


def sink() -> Sink:
    async def publish(*_: object) -> None:
        return None

    return Sink(None, Settings.from_env(env={}, bootstrap="x"), publish=publish)  # type: ignore[arg-type]


def test_only_the_newest_version_of_a_pod_is_kept_and_queued_once() -> None:
    s = sink()
    for version in (1, 3, 2):
        s.offer(vs(version))
    assert s.pods["u1"].desired.version == 3
    assert len(s._due) == 1


def test_written_versions_restored_from_kafka_are_not_written_again() -> None:
    s = sink()
    s.written["u1"] = (4, "u1")
    s.offer(vs(4))
    assert s._due == [] and s.pods["u1"].written == 4
    s.offer(vs(5))
    assert len(s._due) == 1


def test_static_pods_are_written_only_through_their_current_mirror() -> None:
    static = vs(1, static=True)
    mirror = {"metadata": {"uid": "m1", "annotations": {"kubernetes.io/config.mirror": static.uid}}}
    assert mirror_matches(mirror, static)
    stale = {"metadata": {"uid": "m0", "annotations": {"kubernetes.io/config.mirror": "other-hash"}}}
    assert not mirror_matches(stale, static)
    assert not mirror_matches({"metadata": {"uid": static.uid}}, static)  # not a mirror at all
    # Queued under the static UID; which mirror it was written to is remembered with the version.
    s = sink()
    s.written[static.uid] = (3, "m0")
    s.offer(static)
    assert s.pods[static.uid].api_uid == "m0" and s.pods[static.uid].written == 3


def test_a_tombstone_forgets_the_pod() -> None:
    s = sink()
    s.offer(vs(1))
    s.forget("u1")
    assert s.pods == {}
