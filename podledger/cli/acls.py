"""Commands about who may do what on Kafka: `acls apply|show|user|local-broker`.

The grants themselves are decided in podledger/acls.py; README.md ("Securing Kafka") shows the
whole sequence on a local broker.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
from pathlib import Path

from podledger.acls import Namespace, Principals
from podledger.cli.common import add_connection_options, settings_from
from podledger.compose import require_bootstrap
from podledger.errors import UserError

# Principal flags read these variables when not given (not PODLEDGER_*: they are no pipeline setting).
ENV_NODES = "PODLEDGER_ACL_NODES"
ENV_FOLD = "PODLEDGER_ACL_FOLD"
ENV_SINK = "PODLEDGER_ACL_SINK"
ENV_CONSUMERS = "PODLEDGER_ACL_CONSUMERS"
ENV_GROUP_PREFIX = "PODLEDGER_ACL_CONSUMER_GROUP_PREFIX"


def _names(value: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in value.split(",") if n.strip())


def _principals(args: argparse.Namespace) -> Principals:
    def pick(flag: str | None, env: str, default: str) -> str:
        return flag if flag is not None else os.environ.get(env, default)

    return Principals(
        nodes=_names(pick(args.nodes, ENV_NODES, "")),
        fold=pick(args.fold, ENV_FOLD, "fold").strip(),
        sink=pick(args.sink, ENV_SINK, "sink").strip(),
        consumers=_names(pick(args.consumers, ENV_CONSUMERS, "consumer")),
    )


def _group_prefix(args: argparse.Namespace, topic_prefix: str) -> str:
    if args.consumer_group_prefix is not None:
        return str(args.consumer_group_prefix)
    return os.environ.get(ENV_GROUP_PREFIX, f"{topic_prefix}consumer.")


def cmd_acls(args: argparse.Namespace) -> int:
    from podledger import acls

    settings = settings_from(args)
    principals = _principals(args)
    ns = Namespace(settings.topic_prefix, settings.fold_app_id, _group_prefix(args, settings.topic_prefix))
    if args.action == "show":
        for binding in sorted(acls.desired(ns, principals)):
            print(binding)
        return 0

    from podledger.kafka_acls import apply_acls

    require_bootstrap(settings)
    plan = asyncio.run(apply_acls(settings, principals, ns.consumer_group_prefix, dry_run=args.dry_run))
    verb = ("would add", "would remove") if args.dry_run else ("added", "removed")
    for binding in plan.add:
        print(f"{verb[0]:12} {binding}")
    for binding in plan.remove:
        print(f"{verb[1]:12} {binding}")
    if not plan.changes:
        print(f"no change: {len(plan.unchanged)} bindings as wanted")
    else:
        print(f"{len(plan.add)} added, {len(plan.remove)} removed, {len(plan.unchanged)} unchanged")
    if not principals.nodes:
        print(
            f"note: no node principals given (--nodes or {ENV_NODES}): node agents have no grants",
            file=sys.stderr,
        )
    return 0


def cmd_user(args: argparse.Namespace) -> int:
    """Set SCRAM credentials; passwords come from stdin (one line per name) or a prompt."""
    from podledger.kafka_acls import ScramUser, set_scram_users

    settings = settings_from(args)
    require_bootstrap(settings)
    users = []
    for name in args.names:
        if sys.stdin.isatty():
            password = getpass.getpass(f"password for Kafka user {name}: ")
        else:
            password = sys.stdin.readline().rstrip("\n")
        if not password:
            raise UserError(
                f"no password for {name!r}: give one per line on stdin, in the order of the names"
            )
        users.append(ScramUser(name, password))
    for name in asyncio.run(set_scram_users(settings, users, mechanism=args.mechanism)):
        print(f"set {args.mechanism} credential of {name}")
    return 0


def cmd_local_broker(args: argparse.Namespace) -> int:
    """Start a secure local broker with one user per role, its topics and its ACLs."""
    from podledger import local
    from podledger.config import Settings
    from podledger.kafka_acls import apply_acls
    from podledger.local.broker import KafkaSecurity
    from podledger.local.tls import write_private
    from podledger.streams.topics import ensure_topics

    settings = settings_from(args)
    principals = _principals(args)
    if not principals.nodes:
        principals = Principals(("node-a",), principals.fold, principals.sink, principals.consumers)
    problems = principals.check()
    if problems:
        raise UserError("; ".join(problems))
    names = [*principals.nodes, principals.fold, principals.sink, *principals.consumers]
    security = KafkaSecurity.with_users(*(n for n in names if n))
    workdir = Path(args.dir).resolve()
    if workdir.exists() and any(workdir.iterdir()):
        raise UserError(f"{workdir} is not empty: give a new directory")
    print("podledger: starting a Kafka broker with SASL_SSL and ACLs ...", file=sys.stderr)
    handle = local.start_kafka(workdir, detached=True, security=security)
    env_dir = workdir / "env"
    env_dir.mkdir(mode=0o700)
    sink_app_id = Namespace(settings.topic_prefix, settings.fold_app_id, "").sink_app_id
    for user, password in sorted(security.all_users().items()):
        env = {**handle.client_env(user, password), "PODLEDGER_TOPIC_PREFIX": settings.topic_prefix}
        if user == principals.sink:
            env["PODLEDGER_APP_ID"] = sink_app_id  # the sink's Faust worker, not in the fold's group
        write_private(env_dir / f"{user}.env", "".join(f"export {k}={v}\n" for k, v in env.items()).encode())
    admin = Settings.from_env(
        {**os.environ, **handle.client_env(security.admin, security.admin_password)},
        topic_prefix=settings.topic_prefix,
        partitions=settings.partitions,
    )
    asyncio.run(ensure_topics(admin))
    plan = asyncio.run(apply_acls(admin, principals, _group_prefix(args, settings.topic_prefix)))
    print(f"broker: {handle.bootstrap} (SASL_SSL, SCRAM-SHA-512); stop it with: kill {handle.pid}")
    print(f"CA certificate: {handle.ca_file}")
    print(f"topics created, {len(plan.add)} ACLs granted; one environment file per user (mode 0600):")
    for user in sorted(security.all_users()):
        print(f"  source {env_dir / (user + '.env')}")
    return 0


def _add_principal_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("principals (Kafka user names, without 'User:')")
    g.add_argument("--nodes", help=f"node agents' users, comma-separated ({ENV_NODES}; default: none)")
    g.add_argument("--fold", help=f"the fold's user ({ENV_FOLD}; default fold)")
    g.add_argument("--sink", help=f"the sink's user ({ENV_SINK}; default sink)")
    g.add_argument(
        "--consumers", help=f"read-only users, comma-separated ({ENV_CONSUMERS}; default consumer)"
    )
    g.add_argument(
        "--consumer-group-prefix",
        help=f"consumers' group ids must start with this ({ENV_GROUP_PREFIX};"
        " default <topic prefix>consumer.)",
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    family = sub.add_parser(
        "acls",
        help="Kafka users and ACLs: grant each role what it needs, and nothing more",
        description="Kafka authorization for podledger's roles (node agents, fold, sink, consumers)."
        " See README.md, 'Securing Kafka'.",
    )
    actions = family.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = actions.add_parser(
        "apply",
        help="make the ACLs on podledger's topics and groups exactly the roles' grants",
        description="Adds the grants that are missing, removes other ALLOW bindings on podledger's"
        " topics and groups, and prints what it changed; running it twice changes nothing. DENY"
        " bindings and other resources are left alone. Run it as a Kafka admin.",
    )
    p.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
    _add_principal_options(p)
    add_connection_options(p)
    p.set_defaults(func=cmd_acls)

    p = actions.add_parser("show", help="print the grants of each role (no broker needed)")
    _add_principal_options(p)
    add_connection_options(p)
    p.set_defaults(func=cmd_acls)

    p = actions.add_parser(
        "user",
        help="create or change SCRAM users (passwords from stdin)",
        description="Sets the SCRAM credential of each NAME, reading one password per line from stdin"
        " (or prompting on a terminal). The password is salted and hashed here: it is never sent,"
        " printed or logged. Run it as a Kafka admin.",
    )
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--mechanism", default="SCRAM-SHA-512", choices=["SCRAM-SHA-256", "SCRAM-SHA-512"])
    add_connection_options(p)
    p.set_defaults(func=cmd_user)

    p = actions.add_parser(
        "local-broker",
        help="start a local broker with SASL_SSL, a SCRAM user per role, topics and ACLs",
        description="Starts a detached single-node broker in DIR (TLS certificates from a CA made for"
        " it, SCRAM-SHA-512 users with random passwords, the StandardAuthorizer), creates the topics,"
        " applies the ACLs, and writes one environment file per user into DIR/env (mode 0600).",
    )
    p.add_argument("dir", metavar="DIR", help="a new (or empty) directory for the broker's files")
    _add_principal_options(p)
    add_connection_options(p)
    p.set_defaults(func=cmd_local_broker)
