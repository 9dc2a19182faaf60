"""Commands about the contract: `topics create|describe` and `schema`."""

from __future__ import annotations

import argparse
import asyncio
import json

from podledger.cli.common import add_connection_options, settings_from
from podledger.compose import require_bootstrap


def cmd_topics(args: argparse.Namespace) -> int:
    from podledger.streams.topics import describe, ensure_topics

    settings = settings_from(args)
    require_bootstrap(settings)
    if args.action == "create":
        changes = asyncio.run(ensure_topics(settings))
        for change in changes:
            print(f"{change.action:9} {change.topic}" + (f"  ({change.detail})" if change.detail else ""))
    else:
        for name, info in asyncio.run(describe(settings)).items():
            print(name, " ".join(f"{k}={v}" for k, v in info.items()))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from podledger.schemas import codec

    if args.topic:
        print(json.dumps(codec.schema(args.topic), indent=2))
    else:
        for name in codec.MODELS:
            print(name)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "topics",
        help="create or describe podledger's topics",
        description="'create' makes every topic with its partitions, cleanup policy and"
        " retention, and repairs drifted configs; running it twice changes nothing.",
    )
    p.add_argument("action", choices=["create", "describe"])
    add_connection_options(p)
    p.set_defaults(func=cmd_topics)

    p = sub.add_parser(
        "schema",
        help="print the JSON Schema of a topic's values",
        description="Without TOPIC, list the topics that have a schema.",
    )
    p.add_argument("topic", nargs="?")
    p.set_defaults(func=cmd_schema)
