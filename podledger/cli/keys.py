"""`podledger keys new`: a node's secret and its entry on the fold's keyring (schemas/origin.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from podledger.errors import UserError


def cmd_keys(args: argparse.Namespace) -> int:
    from podledger.config import Settings
    from podledger.keys import load_node_keys, new_secret, write_keyring_entry, write_secret

    keyring = Path(args.keyring)
    for node in args.nodes:
        if not node or "/" in node or node.startswith("."):
            raise UserError(f"{node!r} is not a node name")
        secret_file = Path(args.dir) / f"{node}.key"
        existed = secret_file.exists()
        if existed and not args.rotate:
            action = "kept"
        else:
            write_secret(secret_file, new_secret())
            action = "rotated" if existed else "created"
        keys = load_node_keys(Settings(node=node, node_secret_file=str(secret_file)))
        assert keys is not None
        changed = write_keyring_entry(keyring, keys)
        print(f"{action:9} {secret_file}  (PODLEDGER_NODE_SECRET_FILE of node {node} only)")
        print(
            f"{'added' if changed else 'unchanged':9} {keyring}: {node}  (PODLEDGER_KEYRING_FILE of the fold)"
        )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "keys",
        help="make node secrets and the fold's keyring (proof of origin)",
        description="'new NODE...' writes DIR/NODE.key (the node's secret: give it to that node's"
        " agent alone) unless it exists, and puts the node's status key on the keyring (give it to"
        " the fold alone). Running it twice changes nothing; --rotate makes new secrets.",
    )
    p.add_argument("action", choices=["new"])
    p.add_argument("nodes", nargs="+", metavar="NODE")
    p.add_argument("--dir", default="keys", help="where node secrets go (default ./keys)")
    p.add_argument(
        "--keyring", default="keys/keyring.json", help="the keyring file (default keys/keyring.json)"
    )
    p.add_argument("--rotate", action="store_true", help="replace existing secrets")
    p.set_defaults(func=cmd_keys)
