"""The verdict of a chaos run over the topics read at the end: the checks, the figures, and each
failure explained by the fault before it. Plain data in, plain data out; the apiserver's answer is
read by the caller."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping

from podledger.chaos import checks
from podledger.chaos.config import CONVERGE_GOAL_S, ChaosConfig, ChaosResult, FaultRecord, clock
from podledger.chaos.snapshot import Snapshot
from podledger.chaos.watch import LIVE_SLACK_S

Exits = Mapping[str, list[tuple[float, int]]]  # process name -> (wall clock, exit code) of its own exits


def check_records(result: ChaosResult, snap: Snapshot) -> None:
    """The checks over the records alone into `result`: lost inputs, version gaps and conflicts, and
    the live history against the offline fold of the journal."""
    versions = snap.versions()
    result.lost = snap.lost()
    result.gaps = checks.version_gaps((vs.uid, vs.version) for vs in versions)
    result.conflicts = checks.version_conflicts(versions)
    result.history = checks.history_mismatches(versions, checks.offline_history(snap.journal_values))


def figures(
    config: ChaosConfig,
    result: ChaosResult,
    snap: Snapshot,
    churn: str,
    exits: Exits,
    done: list[FaultRecord],
) -> list[str]:
    """The summary lines of a checked run; `churn` sums up the churn."""
    r, cfg = result, config
    by_topic = Counter(c[0] for c, _, _ in snap.ingress)
    journal_coords = Counter((e.topic, e.partition, e.offset) for e in snap.journal)
    duplicates = sum(n - 1 for n in journal_coords.values())
    reasons = Counter(d.reason for d in snap.dead_letters)
    held = checks.held_coordinates(snap.fold_state)
    pods = {vs.uid for vs, _ in snap.history}
    exit_counts = {n: len(e) for n, e in exits.items() if e}
    kills = Counter(rec.fault.target for rec in done if rec.fault.kind == "kill" and rec.done)
    return [
        f"chaos seed={cfg.seed} seconds={cfg.seconds:.0f} nodes={cfg.nodes} pods={cfg.pods}"
        f" partitions={cfg.partitions}",
        f"churn: {churn}",
        "kills: " + ", ".join(f"{t} {n}" for t, n in sorted(kills.items())) + f" ({r.kills} in all)",
        f"broker restarts: {r.broker_restarts}; apiserver down {r.apiserver_outage_s:.1f}s in all",
        "exits on their own (started again): "
        + (", ".join(f"{n} {c}" for n, c in sorted(exit_counts.items())) or "none"),
        f"ingress records: {len(snap.ingress)} ("
        + ", ".join(f"{t} {n}" for t, n in sorted(by_topic.items()))
        + f"); journal entries: {len(snap.journal)} ({duplicates} repeated coordinates);"
        f" dead letters: {len(snap.dead_letters)}"
        + (" (" + ", ".join(f"{k} {n}" for k, n in sorted(reasons.items())) + ")" if reasons else "")
        + f"; still held for unannounced pods: {len(held)}"
        + (
            " (" + ", ".join(f"{t} {n}" for t, n in sorted(Counter(c[0] for c in held).items())) + ")"
            if held
            else ""
        ),
        f"versions: {len(snap.history)} records, {len({(v.uid, v.version) for v, _ in snap.history})}"
        f" distinct, {len(pods)} pods; offline fold mismatches: {len(r.history)}",
        f"apiserver: {len(r.api)} pods not showing their last version;"
        f" drained: {'yes' if r.drained else 'no'}",
        "converge_s: "
        + ("never" if r.converge_s is None else f"{r.converge_s:.1f}")
        + f" (goal {CONVERGE_GOAL_S:.0f}s; caught up: every version older than"
        f" {LIVE_SLACK_S:.0f}s shown)",
    ]


def fault_before(done: list[FaultRecord], wall: float) -> str:
    """The last fault that started before `wall`, and how long before."""
    earlier = [rec for rec in done if rec.started <= wall]
    if not earlier:
        return "no fault before it"
    rec = max(earlier, key=lambda x: x.started)
    return f"{wall - rec.started:.1f}s after: {rec.fault.describe()}"


def problems(result: ChaosResult, snap: Snapshot, done: list[FaultRecord]) -> list[str]:
    """Every failed check of `result` (the first 20 of each kind), with the fault before it."""
    r = result
    out: list[str] = []
    by_coord = {c: (uid, ts) for c, uid, ts in snap.ingress}
    for coord in r.lost[:20]:
        uid, ts = by_coord.get(coord, ("?", 0))
        out.append(
            f"lost input {coord[0]}@{coord[1]}/{coord[2]} (pod {uid}, written {clock(ts)}):"
            f" {fault_before(done, ts / 1000)}"
        )
    published = {(vs.uid, vs.version): ts for vs, ts in snap.history}
    for uid, missing in list(r.gaps.items())[:20]:
        after = published.get((uid, missing[0] - 1)) or published.get((uid, missing[-1] + 1)) or 0
        out.append(f"gap: pod {uid} lacks versions {missing}: {fault_before(done, after / 1000)}")
    for (uid, version), statuses in list(r.conflicts.items())[:20]:
        made: dict[bytes, str] = {}  # each distinct status: what made it first, and when
        for vs, ts in snap.history:
            if (vs.uid, vs.version) == (uid, version):
                c = vs.cause
                made.setdefault(
                    checks.canonical(vs.status),
                    f"{vs.status.get('phase')} <- {c.type} at {c.topic}@{c.partition}/{c.offset},"
                    f" published {clock(ts)} ({fault_before(done, ts / 1000)})",
                )
        out.append(
            f"conflict: pod {uid} v{version} has {len(statuses)} statuses: " + "; ".join(made.values())
        )
    for (uid, version), (live, offline) in list(r.history.items())[:20]:
        out.append(
            f"history: pod {uid} v{version}: {len(live)} live value(s), {len(offline)} from the offline fold"
        )
    for mismatch in r.api[:20]:
        out.append(f"apiserver: {mismatch}")
    return out


def exit_lines(exits: Exits) -> list[str]:
    """One figure line per exit of a process on its own."""
    return [
        f"  {name} exited with code {code} at {time.strftime('%H:%M:%S', time.localtime(wall))}"
        for name, process_exits in exits.items()
        for wall, code in process_exits
    ]
