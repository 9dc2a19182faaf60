"""`podledger chaos`: the whole pipeline on the real parts under churn and faults, then its checks."""

from __future__ import annotations

import argparse
import os
import random
import sys


def cmd_chaos(args: argparse.Namespace) -> int:
    from podledger.chaos.config import ChaosConfig, print_result
    from podledger.chaos.run import run_chaos

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1_000_000)
    config = ChaosConfig(
        seconds=args.seconds,
        kills=args.kills,
        seed=seed,
        nodes=args.nodes,
        pods=args.pods,
        apiserver_outage_s=args.apiserver_outage_s,
        broker_restarts=args.broker_restarts,
        partitions=args.partitions,
        bootstrap=os.environ.get("PODLEDGER_BOOTSTRAP", ""),
        kubeconfig=os.environ.get("KUBECONFIG") or os.environ.get("PODLEDGER_KUBECONFIG", ""),
        workdir=args.workdir or "",
        kafka_env={k: v for k, v in os.environ.items() if k.startswith("PODLEDGER_KAFKA_")},
    )
    print(f"chaos: seed {seed} (run it again with --seed {seed})", file=sys.stderr, flush=True)
    result = run_chaos(config)
    print_result(result)
    return 0 if result.ok() else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "chaos",
        help="run the whole pipeline under churn while killing its parts, then check nothing was lost",
        description="Starts a Kafka broker and kube-apiserver of its own (PODLEDGER_BOOTSTRAP and KUBECONFIG,"
        " when set, are used instead, without the broker restart or the apiserver outage), sim node agents,"
        " two fold workers and the sink, and creates and deletes API pods at a steady rate. Meanwhile it"
        " SIGKILLs fold workers, the sink and node agents at random (seeded), restarts the broker and stops"
        " the apiserver for a while. Then it checks: no lost input, versions 1..N without gap, no version"
        " with two statuses, the history equal to the offline fold of the journal, and the apiserver"
        " showing the last versions. Progress goes to stderr; the last line is machine-readable. Exits 1"
        " when a check fails or the apiserver took longer than 30 s to catch up after the last fault.",
    )
    p.add_argument("--seconds", type=float, default=600.0, help="length of the chaos window (default 600)")
    p.add_argument("--kills", type=int, default=50, help="SIGKILLs in the window (default 50)")
    p.add_argument("--seed", type=int, help="seed of the faults and the churn (default: random, printed)")
    p.add_argument("--nodes", type=int, default=3, help="sim node agents (default 3)")
    p.add_argument("--pods", type=int, default=60, help="API pods alive at any time (default 60)")
    p.add_argument(
        "--apiserver-outage-s",
        type=float,
        default=30.0,
        help="how long kube-apiserver is stopped, once (default 30; 0: never)",
    )
    p.add_argument("--broker-restarts", type=int, default=1, help="Kafka broker restarts (default 1)")
    p.add_argument("--partitions", type=int, default=6, help="partitions of every topic (default 6)")
    p.add_argument(
        "--workdir",
        help="keep the instances' data and every process's log here (default: a temporary"
        " directory, removed after a passing run)",
    )
    p.set_defaults(func=cmd_chaos)
