"""A consumer of podledger's status stream: list the pods, then follow their changes, and resume
where it stopped after a restart.

    PODLEDGER_BOOTSTRAP=127.0.0.1:9092 python examples/consumer.py --labels app=web
    PODLEDGER_BOOTSTRAP=127.0.0.1:9092 python examples/consumer.py --resume "$(cat token)"

It prints one line per pod and per change, and writes the token to resume from into --token-file
after each one.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from podledger.config import Settings
from podledger.read.client import ChangeType, watch_pods


async def main(args: argparse.Namespace) -> None:
    settings = Settings.from_env()  # PODLEDGER_BOOTSTRAP, PODLEDGER_TOPIC_PREFIX, PODLEDGER_PARTITIONS
    seen = 0
    async for change in watch_pods(
        settings, namespace=args.namespace, labels=args.labels, resume=args.resume
    ):
        if change.type == ChangeType.SYNCED:
            print("-- listed; following changes", flush=True)
        elif change.status is None:
            print(f"{change.type} uid={change.uid}", flush=True)
        else:
            status = change.status.status
            ready = next((c["status"] for c in status.get("conditions", []) if c["type"] == "Ready"), "?")
            print(
                f"{change.type} {change.namespace}/{change.name} v{change.status.version}"
                f" phase={status.get('phase')} ready={ready}",
                flush=True,
            )
        Path(args.token_file).write_text(change.token)
        seen += 1
        if args.max_changes and seen >= args.max_changes:
            return


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespace")
    parser.add_argument("--labels", help="a label selector, e.g. app=web")
    parser.add_argument("--resume", help="a token this consumer wrote before")
    parser.add_argument("--token-file", default="token", help="where to keep the resume token")
    parser.add_argument("--max-changes", type=int, default=0, help="stop after this many lines (0: never)")
    asyncio.run(main(parser.parse_args()))
