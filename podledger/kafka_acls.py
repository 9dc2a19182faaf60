"""Kafka ACLs and SCRAM users on a real cluster: the I/O half of `podledger acls`.

aiokafka's admin client has no ACL or SCRAM methods, but its protocol module defines the
DescribeAcls, CreateAcls and DeleteAcls requests (v1, which knows PREFIXED patterns); they are
sent through the admin client's connection. AlterUserScramCredentials is not defined there: it is
declared below in aiokafka's protocol types, and the password is salted and hashed here, so only
the SCRAM verifier travels (over TLS when the cluster uses it). What to grant is decided by the
pure module podledger.acls.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, for_code
from aiokafka.protocol.admin import (
    CreateAclsRequest_v1,
    DeleteAclsRequest_v1,
    DescribeAclsRequest_v1,
)
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    CompactArray,
    CompactBytes,
    CompactString,
    Int8,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from podledger import acls
from podledger.acls import Binding, Namespace, PatternType, Permission, Plan, Principals, ResourceType
from podledger.config import Settings
from podledger.errors import UserError
from podledger.streams.topics import start_admin

log = logging.getLogger(__name__)

_ANY = 1  # the "any" code of resource type, pattern type, operation and permission filters
_MATCH = 2  # pattern type filter: every pattern that matches the name


# ------------------------------------------------------------------------------ connecting


# ------------------------------------------------------------------------------ ACLs


class _DescribeAcls(Request[DescribeAclsRequest_v1]):
    API_KEY = 29

    def build(self, request_struct_class: type[DescribeAclsRequest_v1]) -> DescribeAclsRequest_v1:
        # Every binding: any resource type, any name, any pattern, principal, host, operation, permission.
        return request_struct_class(_ANY, None, _ANY, None, None, _ANY, _ANY)


class _CreateAcls(Request[CreateAclsRequest_v1]):
    API_KEY = 30

    def __init__(self, bindings: Iterable[Binding]) -> None:
        self.bindings = list(bindings)

    def build(self, request_struct_class: type[CreateAclsRequest_v1]) -> CreateAclsRequest_v1:
        return request_struct_class([_row(b) for b in self.bindings])


class _DeleteAcls(Request[DeleteAclsRequest_v1]):
    API_KEY = 31

    def __init__(self, bindings: Iterable[Binding]) -> None:
        self.bindings = list(bindings)

    def build(self, request_struct_class: type[DeleteAclsRequest_v1]) -> DeleteAclsRequest_v1:
        # A filter with every field given matches exactly one binding.
        return request_struct_class([_row(b) for b in self.bindings])


def _row(b: Binding) -> tuple[Any, ...]:
    return (
        int(b.resource_type),
        b.name,
        int(b.pattern),
        b.principal,
        b.host,
        int(b.operation),
        int(b.permission),
    )


async def describe_acls(admin: AIOKafkaAdminClient) -> set[Binding]:
    """Every binding of the cluster that podledger's vocabulary can express."""
    response = await admin._send_request(_DescribeAcls())
    if response.error_code:
        raise for_code(response.error_code)(f"describing ACLs: {response.error_message or ''}")
    out: set[Binding] = set()
    for resource_type, name, pattern, entries in response.resources:
        for principal, host, operation, permission in entries:
            try:
                out.add(
                    Binding(
                        principal,
                        ResourceType(resource_type),
                        name,
                        PatternType(pattern),
                        acls.Operation(operation),
                        Permission(permission),
                        host,
                    )
                )
            except ValueError:  # a type or operation podledger never grants: not ours to manage
                continue
    return out


async def create_acls(admin: AIOKafkaAdminClient, bindings: Iterable[Binding]) -> None:
    bindings = list(bindings)
    if not bindings:
        return
    response = await admin._send_request(_CreateAcls(bindings))
    for binding, (code, message) in zip(bindings, response.creation_responses, strict=True):
        if code:
            raise UserError(
                f"creating ACL {binding} failed: {for_code(code).__name__} {message or ''}".strip()
            )


async def delete_acls(admin: AIOKafkaAdminClient, bindings: Iterable[Binding]) -> None:
    bindings = list(bindings)
    if not bindings:
        return
    response = await admin._send_request(_DeleteAcls(bindings))
    for binding, (code, message, _matching) in zip(bindings, response.filter_responses, strict=True):
        if code:
            raise UserError(
                f"deleting ACL {binding} failed: {for_code(code).__name__} {message or ''}".strip()
            )


async def _until_described(admin: AIOKafkaAdminClient, plan: Plan, timeout: float = 30.0) -> None:
    """ACL changes reach the brokers through the metadata log: wait until they show."""
    added, removed = set(plan.add), set(plan.remove)
    try:
        async with asyncio.timeout(timeout):
            while True:
                current = await describe_acls(admin)
                if added <= current and not (removed & current):
                    return
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise UserError(f"the broker did not confirm the ACL changes within {timeout:.0f}s") from None


def namespace(settings: Settings, consumer_group_prefix: str) -> Namespace:
    return Namespace(settings.topic_prefix, settings.fold_app_id, consumer_group_prefix)


async def apply_acls(
    settings: Settings, principals: Principals, consumer_group_prefix: str, *, dry_run: bool = False
) -> Plan:
    """Make the ACLs on podledger's resources exactly what the roles need (podledger.acls). Idempotent."""
    problems = principals.check()
    if not consumer_group_prefix:
        problems.append("the consumer group prefix is empty: it would let consumers join any group")
    if problems:
        raise UserError("; ".join(problems))
    ns = namespace(settings, consumer_group_prefix)
    admin = await start_admin(settings, "podledger-acls")
    try:
        try:
            existing = await describe_acls(admin)
        except KafkaError as exc:
            name = exc.__class__.__name__
            raise UserError(
                f"the broker refused to describe ACLs ({name}): run this as a Kafka admin (a super"
                " user, or a user allowed DESCRIBE and ALTER on the cluster)"
                if name.endswith("AuthorizationFailedError")
                else f"describing ACLs failed: {name} {exc}"
            ) from None
        result = acls.plan(ns, acls.desired(ns, principals), existing)
        if result.changes and not dry_run:
            await create_acls(admin, result.add)
            await delete_acls(admin, result.remove)
            await _until_described(admin, result)
        return result
    finally:
        await admin.close()


# ------------------------------------------------------------------------------ SCRAM users

SCRAM_MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
SCRAM_ITERATIONS = 8192  # Kafka accepts 4096 and more


class _AlterUserScramCredentialsResponse_v0(Response):
    API_KEY = 51
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "results",
            CompactArray(
                ("user", CompactString("utf-8")),
                ("error_code", Int16),
                ("error_message", CompactString("utf-8")),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class _AlterUserScramCredentialsRequest_v0(RequestStruct):
    FLEXIBLE_VERSION: ClassVar[bool] = True
    API_KEY = 51
    API_VERSION = 0
    RESPONSE_TYPE = _AlterUserScramCredentialsResponse_v0
    SCHEMA = Schema(
        (
            "deletions",
            CompactArray(("name", CompactString("utf-8")), ("mechanism", Int8), ("tags", TaggedFields)),
        ),
        (
            "upsertions",
            CompactArray(
                ("name", CompactString("utf-8")),
                ("mechanism", Int8),
                ("iterations", Int32),
                ("salt", CompactBytes),
                ("salted_password", CompactBytes),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )

    def __repr__(self) -> str:
        # aiokafka logs every request at debug level: never the salted password.
        return f"{type(self).__name__}(users={[u[0] for u in self.upsertions]})"


_AlterStruct: TypeAlias = _AlterUserScramCredentialsRequest_v0


class _AlterUserScramCredentials(Request[_AlterStruct]):
    API_KEY = 51

    def __init__(self, upsertions: list[tuple[Any, ...]]) -> None:
        self.upsertions = upsertions

    def build(self, request_struct_class: type[_AlterStruct]) -> _AlterStruct:
        return request_struct_class([], self.upsertions, {})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(users={[u[0] for u in self.upsertions]})"


@dataclass(frozen=True, slots=True)
class ScramUser:
    name: str
    password: str = ""

    def __repr__(self) -> str:
        return f"ScramUser(name={self.name!r})"


def _scram_upsertion(user: ScramUser, mechanism: str, iterations: int) -> tuple[Any, ...]:
    code, digest = SCRAM_MECHANISMS[mechanism]
    salt = secrets.token_bytes(32)
    # RFC 5802 Hi(): PBKDF2 with HMAC of the mechanism's hash; the broker stores what it derives from it.
    salted = hashlib.pbkdf2_hmac(digest, user.password.encode(), salt, iterations)
    return (user.name, code, iterations, salt, salted, {})


async def set_scram_users(
    settings: Settings,
    users: Iterable[ScramUser],
    mechanism: str = "SCRAM-SHA-512",
    iterations: int = SCRAM_ITERATIONS,
) -> list[str]:
    """Create or change SCRAM credentials (needs ALTER on the cluster: an admin); returns the names."""
    users = list(users)
    if mechanism not in SCRAM_MECHANISMS:
        raise UserError(f"unknown SCRAM mechanism {mechanism!r}: use {' or '.join(SCRAM_MECHANISMS)}")
    for user in users:
        if not user.name or not user.password:
            raise UserError(f"SCRAM user {user.name!r}: both a name and a password are needed")
    admin = await start_admin(settings, "podledger-acls")
    try:
        request = _AlterUserScramCredentials([_scram_upsertion(u, mechanism, iterations) for u in users])
        response = await admin._send_request(request)
        for name, code, message, _tags in response.results:
            if code:
                raise UserError(
                    f"setting the SCRAM credential of {name!r} failed: {for_code(code).__name__}"
                    f" {message or ''}".strip()
                )
        return [u.name for u in users]
    finally:
        await admin.close()
