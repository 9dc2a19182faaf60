"""The Kafka grants of each role and how `podledger acls apply` plans its changes (podledger/acls.py),
plus the places where Kafka credentials could leak: Settings' repr and checks, aiokafka's debug
lines, the SCRAM request. The broker's side is in tests/integration/test_kafka_auth.py."""

from __future__ import annotations

import logging

import pytest

from podledger import acls
from podledger.acls import Binding, Namespace, Operation, PatternType, Permission, Principals, ResourceType
from podledger.config import Settings
from podledger.errors import UserError

NS = Namespace(topic_prefix="pl.", fold_app_id="pl.fold", consumer_group_prefix="pl.consumer.")
ALL = Principals(nodes=("node-a", "node-b"), fold="fold", sink="sink", consumers=("consumer",))


def grants(role: str, user: str, ns: Namespace = NS) -> set[str]:
    return {str(b) for b in acls.role_bindings(ns, role, user)}


# --------------------------------------------------------------------------------------------------
# The grants of each role
# --------------------------------------------------------------------------------------------------

ROLE_GRANTS = [
    (
        "node",
        {
            "User:n WRITE topic pl.pod-updates",
            "User:n WRITE topic pl.pleg",
            "User:n WRITE topic pl.probe-results",
            "User:n WRITE topic pl.pod-lifecycle",
            "User:n READ topic pl.pod-updates",
            "User:n READ topic pl.pod-lifecycle",
            "User:n READ topic pl.pod-status",
        },
    ),
    (
        "fold",
        {
            "User:n READ topic pl.pod-updates",
            "User:n READ topic pl.pleg",
            "User:n READ topic pl.probe-results",
            "User:n READ topic pl.pod-lifecycle",
            "User:n READ topic pl.journal",
            "User:n READ topic pl.pod-status-history",
            "User:n READ topic pl.fold-state",
            "User:n READ topic pl.pod-status-watermarks",
            "User:n WRITE topic pl.journal",
            "User:n WRITE topic pl.pod-status",
            "User:n WRITE topic pl.pod-status-history",
            "User:n WRITE topic pl.dead-letter",
            "User:n WRITE topic pl.fold-state",
            "User:n WRITE topic pl.pod-status-watermarks",
            "User:n DESCRIBE_CONFIGS topic pl.pod-updates",
            "User:n DESCRIBE_CONFIGS topic pl.pleg",
            "User:n DESCRIBE_CONFIGS topic pl.probe-results",
            "User:n DESCRIBE_CONFIGS topic pl.pod-lifecycle",
            "User:n CREATE topic pl.fold-__assignor-__leader",
            "User:n READ topic pl.fold-__assignor-__leader",
            "User:n READ group pl.fold",
        },
    ),
    (
        "sink",
        {
            "User:n READ topic pl.pod-status",
            "User:n READ topic pl.sink-state",
            "User:n WRITE topic pl.sink-state",
            "User:n WRITE topic pl.pod-deletions",
            "User:n READ group pl.sink",
            "User:n CREATE topic pl.sink-worker-__assignor-__leader",
            "User:n READ topic pl.sink-worker-__assignor-__leader",
            "User:n READ group pl.sink-worker",
        },
    ),
    (
        "consumer",
        {
            "User:n READ topic pl.pod-status",
            "User:n READ topic pl.pod-status-history",
            "User:n READ topic pl.pod-deletions",
            "User:n READ topic pl.journal",
            "User:n READ topic pl.pod-status-watermarks",
            "User:n READ group pl.consumer.*",
        },
    ),
]


@pytest.mark.parametrize(("role", "expected"), ROLE_GRANTS, ids=[r for r, _ in ROLE_GRANTS])
def test_each_role_gets_exactly_its_grants(role: str, expected: set[str]) -> None:
    bindings = acls.role_bindings(NS, role, "n")
    assert {str(b) for b in bindings} == expected
    assert len(bindings) == len(expected)  # no binding twice
    assert all(b.permission is Permission.ALLOW and b.host == "*" for b in bindings)


def test_the_consumer_group_prefix_is_a_prefixed_pattern_and_the_rest_literal() -> None:
    bindings = acls.desired(NS, ALL)
    prefixed = {b for b in bindings if b.pattern is PatternType.PREFIXED}
    assert prefixed == {
        Binding("User:consumer", ResourceType.GROUP, "pl.consumer.", PatternType.PREFIXED, Operation.READ)
    }


# Writes outside each grant, which the broker must refuse (tests/integration/test_kafka_auth.py
# checks the same on a real broker).
FORBIDDEN_WRITES = [
    ("node", "pod-status"),
    ("node", "journal"),
    ("node", "fold-state"),
    ("fold", "pod-updates"),
    ("fold", "pod-deletions"),
    ("sink", "pod-status"),
    ("sink", "journal"),
    *(("consumer", t) for t in ("pod-status", "pod-status-history", "pod-deletions", "journal")),
]


@pytest.mark.parametrize(("role", "topic"), FORBIDDEN_WRITES)
def test_no_role_may_write_outside_its_grant(role: str, topic: str) -> None:
    assert f"User:n WRITE topic pl.{topic}" not in grants(role, "n")


def test_only_the_fold_may_join_the_folds_group_and_nobody_may_create_podledgers_topics() -> None:
    bindings = acls.desired(NS, ALL)
    fold_group = {
        b.principal for b in bindings if b.resource_type is ResourceType.GROUP and b.name == "pl.fold"
    }
    assert fold_group == {"User:fold"}
    # Consumers' groups never cover the fold's or the sink's.
    assert not "pl.fold".startswith(NS.consumer_group_prefix)
    assert not NS.sink_group.startswith(NS.consumer_group_prefix)
    created = {b.name for b in bindings if b.operation is Operation.CREATE}
    assert created == {"pl.fold-__assignor-__leader", "pl.sink-worker-__assignor-__leader"}
    assert not any(b.resource_type is ResourceType.CLUSTER for b in bindings)


def test_a_role_without_a_user_gets_nothing() -> None:
    only_nodes = acls.desired(NS, Principals(nodes=("node-a",)))
    assert {b.principal for b in only_nodes} == {"User:node-a"}
    assert acls.desired(NS, Principals()) == frozenset()


def test_unknown_role() -> None:
    with pytest.raises(ValueError, match="unknown role"):
        acls.role_bindings(NS, "admin", "root")


# --------------------------------------------------------------------------------------------------
# What apply owns, and its plan
# --------------------------------------------------------------------------------------------------


def topic(
    name: str,
    op: Operation = Operation.READ,
    principal: str = "User:x",
    pattern: PatternType = PatternType.LITERAL,
    permission: Permission = Permission.ALLOW,
    host: str = "*",
) -> Binding:
    return Binding(principal, ResourceType.TOPIC, name, pattern, op, permission, host)


def group(name: str, pattern: PatternType = PatternType.LITERAL) -> Binding:
    return Binding("User:x", ResourceType.GROUP, name, pattern, Operation.READ)


OWNS = [
    ("a podledger topic", topic("pl.pod-status"), True),
    ("a prefixed pattern under the prefix", topic("pl.", pattern=PatternType.PREFIXED), True),
    ("a topic of the fold's app", topic("pl.fold-__assignor-__leader"), True),
    ("another deployment's topic", topic("other.pod-status"), False),
    ("a shorter prefix pattern", topic("p", pattern=PatternType.PREFIXED), False),
    ("a DENY binding", topic("pl.pod-status", permission=Permission.DENY), False),
    ("the fold's group", group("pl.fold"), True),
    ("the sink's group", group("pl.sink"), True),
    ("the sink worker's group", group("pl.sink-worker"), True),
    ("a consumer group", group("pl.consumer.audit"), True),
    ("someone else's group", group("team-x"), False),
    (
        "the cluster",
        Binding(
            "User:x", ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, Operation.IDEMPOTENT_WRITE
        ),
        False,
    ),
]


@pytest.mark.parametrize(("binding", "owned"), [(b, o) for _, b, o in OWNS], ids=[i for i, _, _ in OWNS])
def test_what_apply_owns(binding: Binding, owned: bool) -> None:
    assert NS.owns(binding) is owned


def test_with_an_empty_topic_prefix_apply_owns_only_podledgers_names() -> None:
    ns = Namespace(topic_prefix="", fold_app_id="fold", consumer_group_prefix="consumer.")
    assert ns.owns(topic("pod-status"))
    assert ns.owns(topic("fold-__assignor-__leader"))
    assert not ns.owns(topic("payments"))
    assert all(ns.owns(b) for b in acls.desired(ns, ALL))


def test_plan_adds_everything_then_nothing() -> None:
    wanted = acls.desired(NS, ALL)
    first = acls.plan(NS, wanted, [])
    assert set(first.add) == wanted and first.remove == () and first.changes
    second = acls.plan(NS, wanted, wanted)
    assert not second.changes and set(second.unchanged) == wanted


def test_plan_removes_stale_grants_it_owns_and_leaves_the_rest() -> None:
    wanted = acls.desired(NS, ALL)
    stale = topic("pl.pod-status", Operation.WRITE, "User:consumer")
    gone_node = acls.role_bindings(NS, "node", "node-old")
    foreign = [
        topic("other.pod-status", Operation.WRITE, "User:consumer"),
        topic("pl.pod-status", Operation.WRITE, "User:mallory", permission=Permission.DENY),
    ]
    result = acls.plan(NS, wanted, [*wanted, stale, *gone_node, *foreign])
    assert result.add == ()
    assert set(result.remove) == {stale, *gone_node}
    assert result.remove == tuple(sorted(result.remove))  # printed in a stable order


def test_plan_refuses_to_want_what_it_does_not_own() -> None:
    with pytest.raises(ValueError, match="outside podledger's resources"):
        acls.plan(NS, [topic("other.x")], [])


def test_binding_text() -> None:
    assert str(group("pl.consumer.", PatternType.PREFIXED)) == "User:x READ group pl.consumer.*"
    assert str(topic("pl.a", permission=Permission.DENY, host="10.0.0.1")) == (
        "User:x DENY READ topic pl.a from 10.0.0.1"
    )


PRINCIPAL_PROBLEMS = [
    (Principals(fold="fold", sink="sink"), []),
    (Principals(nodes=("User:node-a",)), ["node principal 'User:node-a'"]),
    (Principals(consumers=("a b",)), ["consumer principal 'a b'"]),
    (Principals(fold="svc", sink="svc"), ["user 'svc' is both fold and sink"]),
    (Principals(nodes=("n", "n")), []),  # the same node twice is one node
]


@pytest.mark.parametrize(("principals", "problems"), PRINCIPAL_PROBLEMS)
def test_principal_names_are_checked(principals: Principals, problems: list[str]) -> None:
    found = principals.check()
    assert len(found) == len(problems)
    for line, start in zip(found, problems, strict=True):
        assert line.startswith(start)


# --------------------------------------------------------------------------------------------------
# Credentials never shown
# --------------------------------------------------------------------------------------------------

SECRET = "s3cret-Pa55word-never-shown"


def sasl_settings(**overrides: str) -> Settings:
    values = {
        "kafka_security_protocol": "SASL_SSL",
        "kafka_sasl_mechanism": "SCRAM-SHA-512",
        "kafka_sasl_username": "fold",
        "kafka_sasl_password": SECRET,
        **overrides,
    }
    return Settings.from_env(env={}, bootstrap="127.0.0.1:9093", **values)


def test_settings_repr_hides_the_password() -> None:
    settings = sasl_settings()
    assert SECRET not in repr(settings) and SECRET not in str(settings)
    assert "kafka_sasl_username='fold'" in repr(settings)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kafka_security_protocol": "SASL_TLS"}, "PODLEDGER_KAFKA_SECURITY_PROTOCOL must be one of"),
        ({"kafka_sasl_mechanism": "GSSAPI"}, "PODLEDGER_KAFKA_SASL_MECHANISM must be one of"),
        ({"kafka_sasl_username": ""}, "SASL_SSL needs PODLEDGER_KAFKA_SASL_USERNAME"),
    ],
)
def test_settings_errors_never_show_the_password(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(UserError, match=message) as err:
        sasl_settings(**overrides)
    assert SECRET not in str(err.value)


@pytest.mark.parametrize("spelling", ["SCRAM-SHA-512", "scram-sha-512", "SCRAM_SHA_512"])
def test_the_mechanism_reaches_aiokafka_and_faust_as_kafka_spells_it(spelling: str) -> None:
    from podledger.streams.app import _faust_credentials

    settings = sasl_settings(kafka_sasl_mechanism=spelling)
    assert settings.kafka_client_options()["sasl_mechanism"] == "SCRAM-SHA-512"
    credentials = _faust_credentials(settings)
    assert credentials.mechanism.value == "SCRAM-SHA-512"
    assert credentials.protocol.value == "SASL_SSL"
    assert SECRET not in repr(credentials)


def test_faust_credentials_over_sasl_plaintext_and_without_security() -> None:
    from podledger.streams.app import _faust_credentials

    plaintext = sasl_settings(kafka_security_protocol="SASL_PLAINTEXT", kafka_sasl_mechanism="PLAIN")
    credentials = _faust_credentials(plaintext)
    assert (credentials.protocol.value, credentials.mechanism.value) == ("SASL_PLAINTEXT", "PLAIN")
    assert _faust_credentials(Settings.from_env(env={}, bootstrap="127.0.0.1:9092")) is None


def test_aiokafka_debug_lines_never_carry_a_sasl_token(caplog: pytest.LogCaptureFixture) -> None:
    """SASL PLAIN sends the password inside SaslAuthenticate, which aiokafka logs at debug level."""
    from aiokafka.protocol.admin import SaslAuthenticateRequest_v0

    sasl_settings(kafka_sasl_mechanism="PLAIN").kafka_client_options()  # installs the filter
    request = SaslAuthenticateRequest_v0(b"\x00fold\x00" + SECRET.encode())
    with caplog.at_level(logging.DEBUG, logger="aiokafka.conn"):
        logging.getLogger("aiokafka.conn").debug("Request to %s:%d %d: %s", "127.0.0.1", 9093, 7, request)
    assert caplog.records and SECRET not in caplog.text
    assert "<SASL token hidden>" in caplog.text


def test_the_scram_request_carries_a_verifier_and_its_repr_only_names() -> None:
    import hashlib

    from podledger.kafka_acls import ScramUser, _AlterUserScramCredentials, _scram_upsertion

    user = ScramUser("node-a", SECRET)
    assert SECRET not in repr(user)
    name, mechanism, iterations, salt, salted, _ = row = _scram_upsertion(user, "SCRAM-SHA-512", 4096)
    assert (name, mechanism, iterations) == ("node-a", 2, 4096)
    assert salted == hashlib.pbkdf2_hmac("sha512", SECRET.encode(), salt, 4096)
    request = _AlterUserScramCredentials([row])
    struct = request.build(request._CLASSES[0])
    encoded = struct.encode()
    assert salted in encoded and SECRET.encode() not in encoded
    assert salted.hex() not in repr(struct) and repr(salted) not in repr(struct)
    assert repr(struct) == "_AlterUserScramCredentialsRequest_v0(users=['node-a'])"
