"""Which Kafka ACLs each podledger role needs, and how to get from the ACLs a cluster has to those.

Pure: names in, bindings out. `podledger acls apply` (podledger/kafka_acls.py) reads the cluster's
bindings, asks `plan` what to add and remove, and does it. The grants, per role (every topic name
carries the topic prefix; docs/architecture.md, "Trust boundaries"):

- node agent: writes pod-updates, pleg, probe-results, pod-lifecycle; reads pod-updates,
  pod-lifecycle and pod-status (it replays its partition without a consumer group);
- fold: reads the four ingress topics, journal, pod-status-history, fold-state and
  pod-status-watermarks; writes journal, pod-status, pod-status-history, dead-letter, fold-state
  and pod-status-watermarks; describes the ingress topics' configs (the watermark claims nothing
  for a topic the broker does not stamp); consumer group: the fold's app id;
- sink: reads pod-status and sink-state; writes sink-state and pod-deletions; consumer group
  `<prefix>sink`;
- consumer: reads pod-status, pod-status-history, pod-deletions, journal and
  pod-status-watermarks; consumer groups whose id starts with the consumer group prefix (never the
  fold's or the sink's).

Each Faust worker also joins the consumer group named after its app id and declares (creates if
missing) and reads its leader topic `<app id>-__assignor-__leader`: the fold's app id is
`Settings.fold_app_id`; a `podledger run --roles sink` worker has its own app id,
`<prefix>sink-worker` (podledger.compose gives it one), so the sink cannot commit the fold's offsets. READ and
WRITE imply DESCRIBE in Kafka, so no DESCRIBE binding is needed. Nobody but the admin creates
podledger's topics (`podledger topics create`).

What `apply` owns: every ALLOW binding on a podledger resource (a topic whose name or prefix
pattern starts with the topic prefix or the fold's app id, a group named after the fold, the sink,
or under the consumer group prefix), whoever its principal. Those are made exactly the wanted set;
DENY bindings and bindings on other resources are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from podledger.types import INGRESS_TOPICS, Topic


class ResourceType(IntEnum):
    """Kafka's resource type codes (the ACL protocol's resource_type)."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(IntEnum):
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(IntEnum):
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True, order=True)
class Binding:
    """One ACL: `principal` may (or may not) do `operation` on a resource, from any host."""

    principal: str  # "User:<name>"
    resource_type: ResourceType
    name: str
    pattern: PatternType
    operation: Operation
    permission: Permission = Permission.ALLOW
    host: str = "*"

    def __str__(self) -> str:
        kind = self.resource_type.name.lower().replace("_", "-")
        name = self.name + ("*" if self.pattern is PatternType.PREFIXED else "")
        deny = " DENY" if self.permission is Permission.DENY else ""
        host = "" if self.host == "*" else f" from {self.host}"
        return f"{self.principal}{deny} {self.operation.name} {kind} {name}{host}"


def leader_topic(app_id: str) -> str:
    """The topic a Faust worker's leader assignor declares and subscribes to."""
    return f"{app_id}-__assignor-__leader"


@dataclass(frozen=True, slots=True)
class Namespace:
    """The names podledger's resources have in one deployment."""

    topic_prefix: str
    fold_app_id: str  # the fold's Faust app id: its consumer group, and its internal topics' prefix
    consumer_group_prefix: str  # consumers must use group ids starting with this

    def topic(self, name: str) -> str:
        return self.topic_prefix + name

    @property
    def sink_group(self) -> str:
        """The consumer group of the sink (agents/sink/writer.py)."""
        return f"{self.topic_prefix}sink"

    @property
    def sink_app_id(self) -> str:
        """The Faust app id of a `podledger run --roles sink` worker (its PODLEDGER_APP_ID).

        Not the fold's: a Faust worker joins the consumer group named after its app id, and the
        sink's principal must not be able to commit the fold's offsets.
        """
        return f"{self.topic_prefix}sink-worker"

    @property
    def fold_leader_topic(self) -> str:
        """The topic Faust's leader assignor declares and subscribes to."""
        return leader_topic(self.fold_app_id)

    @property
    def sink_leader_topic(self) -> str:
        return leader_topic(self.sink_app_id)

    def owns(self, binding: Binding) -> bool:
        """Whether `apply` manages this binding (see the module docstring)."""
        if binding.permission is not Permission.ALLOW:
            return False
        name = binding.name
        if binding.resource_type is ResourceType.TOPIC:
            # An empty prefix would claim every topic of the cluster: then only podledger's own names.
            if name in {self.topic(t) for t in Topic} | {self.fold_leader_topic, self.sink_leader_topic}:
                return True
            return any(p and name.startswith(p) for p in (self.topic_prefix, self.fold_app_id))
        if binding.resource_type is ResourceType.GROUP:
            if name in (self.fold_app_id, self.sink_group, self.sink_app_id):
                return True
            return bool(self.consumer_group_prefix) and name.startswith(self.consumer_group_prefix)
        return False


@dataclass(frozen=True, slots=True)
class Principals:
    """The Kafka user of each role (names without the "User:" type)."""

    nodes: tuple[str, ...] = ()
    fold: str = ""
    sink: str = ""
    consumers: tuple[str, ...] = ()

    def check(self) -> list[str]:
        """Problems with these names, as lines a user can act on (empty: none)."""
        problems = []
        roles = [*(("node", n) for n in self.nodes), ("fold", self.fold), ("sink", self.sink)]
        roles += [("consumer", c) for c in self.consumers]
        seen: dict[str, str] = {}
        for role, name in roles:
            if not name:
                continue
            if any(ch.isspace() for ch in name) or name.startswith("User:"):
                problems.append(f"{role} principal {name!r}: give the user name alone, without spaces")
            if name in seen and seen[name] != role:
                problems.append(f"user {name!r} is both {seen[name]} and {role}: one identity per role")
            seen.setdefault(name, role)
        return problems


INGRESS = INGRESS_TOPICS
NODE_READS = (Topic.POD_UPDATES, Topic.POD_LIFECYCLE, Topic.POD_STATUS)
# pod-status-history too: a worker taking over a partition reads the head of its hash chain there;
# and pod-status-watermarks, where it finds the last watermark of a partition it takes over.
FOLD_READS = (
    *INGRESS,
    Topic.JOURNAL,
    Topic.POD_STATUS_HISTORY,
    Topic.FOLD_STATE,
    Topic.POD_STATUS_WATERMARKS,
)
FOLD_WRITES = (
    Topic.JOURNAL,
    Topic.POD_STATUS,
    Topic.POD_STATUS_HISTORY,
    Topic.DEAD_LETTER,
    Topic.FOLD_STATE,
    Topic.POD_STATUS_WATERMARKS,
)
SINK_READS = (Topic.POD_STATUS, Topic.SINK_STATE)
SINK_WRITES = (Topic.SINK_STATE, Topic.POD_DELETIONS)
CONSUMER_READS = (
    Topic.POD_STATUS,
    Topic.POD_STATUS_HISTORY,
    Topic.POD_DELETIONS,
    Topic.JOURNAL,
    Topic.POD_STATUS_WATERMARKS,
)


def _user(name: str) -> str:
    return f"User:{name}"


def _topics(principal: str, op: Operation, names: Iterable[str]) -> list[Binding]:
    return [Binding(principal, ResourceType.TOPIC, n, PatternType.LITERAL, op) for n in names]


def _faust_worker(principal: str, app_id: str) -> list[Binding]:
    """A Faust worker: its consumer group, and its leader topic, which it creates if missing."""
    topic = leader_topic(app_id)
    out = [
        Binding(principal, ResourceType.TOPIC, topic, PatternType.LITERAL, op)
        for op in (Operation.CREATE, Operation.READ)
    ]
    out.append(Binding(principal, ResourceType.GROUP, app_id, PatternType.LITERAL, Operation.READ))
    return out


def role_bindings(ns: Namespace, role: str, user: str) -> list[Binding]:
    """What one role's user is granted (role: node, fold, sink or consumer)."""
    p = _user(user)
    out: list[Binding] = []
    if role == "node":
        out += _topics(p, Operation.WRITE, map(ns.topic, INGRESS))
        out += _topics(p, Operation.READ, map(ns.topic, NODE_READS))
    elif role == "fold":
        out += _topics(p, Operation.READ, map(ns.topic, FOLD_READS))
        out += _topics(p, Operation.WRITE, map(ns.topic, FOLD_WRITES))
        out += _topics(p, Operation.DESCRIBE_CONFIGS, map(ns.topic, INGRESS))
        out += _faust_worker(p, ns.fold_app_id)
    elif role == "sink":
        out += _topics(p, Operation.READ, map(ns.topic, SINK_READS))
        out += _topics(p, Operation.WRITE, map(ns.topic, SINK_WRITES))
        out.append(Binding(p, ResourceType.GROUP, ns.sink_group, PatternType.LITERAL, Operation.READ))
        out += _faust_worker(p, ns.sink_app_id)
    elif role == "consumer":
        out += _topics(p, Operation.READ, map(ns.topic, CONSUMER_READS))
        out.append(
            Binding(p, ResourceType.GROUP, ns.consumer_group_prefix, PatternType.PREFIXED, Operation.READ)
        )
    else:
        raise ValueError(f"unknown role {role!r}")
    return out


def desired(ns: Namespace, principals: Principals) -> frozenset[Binding]:
    """Every binding the roles need; a role without a user gets nothing."""
    out: list[Binding] = []
    for node in principals.nodes:
        out += role_bindings(ns, "node", node)
    if principals.fold:
        out += role_bindings(ns, "fold", principals.fold)
    if principals.sink:
        out += role_bindings(ns, "sink", principals.sink)
    for consumer in principals.consumers:
        out += role_bindings(ns, "consumer", consumer)
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class Plan:
    add: tuple[Binding, ...]
    remove: tuple[Binding, ...]
    unchanged: tuple[Binding, ...]

    @property
    def changes(self) -> bool:
        return bool(self.add or self.remove)


def plan(ns: Namespace, wanted: Iterable[Binding], existing: Iterable[Binding]) -> Plan:
    """What to add and remove so that the bindings `ns` owns are exactly `wanted`."""
    want, have = set(wanted), set(existing)
    foreign = sorted(b for b in want if not ns.owns(b))
    if foreign:
        raise ValueError(f"wanted bindings outside podledger's resources: {', '.join(map(str, foreign))}")
    return Plan(
        add=tuple(sorted(want - have)),
        remove=tuple(sorted(b for b in have - want if ns.owns(b))),
        unchanged=tuple(sorted(want & have)),
    )
