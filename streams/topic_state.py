"""What the broker reports of topics: partitions, replicas and configs. Reads only; the topics
themselves are declared and created in streams/topics.py."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

# DescribeConfigs v1 and later name where a value comes from; this source is the topic's own config.
DYNAMIC_TOPIC_CONFIG = 1


async def topic_partitions(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, int]:
    described = await admin.describe_topics(names)
    return {t["topic"]: len(t["partitions"]) for t in described}


async def topic_replication(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, int]:
    """The fewest replicas any partition of each topic has."""
    described = await admin.describe_topics(names)
    return {t["topic"]: min((len(p["replicas"]) for p in t["partitions"]), default=0) for t in described}


async def topic_configs(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, dict[str, str]]:
    """Every config of each topic as it is in force, defaults included (a sensitive value, which
    the broker does not tell, left out)."""
    return {
        name: {k: value for k, (value, _) in configs.items() if value is not None}
        for name, configs in (await _described(admin, names)).items()
    }


async def topic_overrides(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, dict[str, str]]:
    """The configs set on each topic itself, by podledger or by anyone else (not the defaults, not
    the broker's); a sensitive value, which the broker does not tell, is left out."""
    return {
        name: {k: value for k, (value, own) in configs.items() if own and value is not None}
        for name, configs in (await _described(admin, names)).items()
    }


async def configs_match(admin: AIOKafkaAdminClient, wanted: dict[str, dict[str, str]]) -> bool:
    """Whether each topic in `wanted` has (at least) those configs in force."""
    current = await topic_configs(admin, list(wanted))
    return all(current[name].get(k) == v for name, configs in wanted.items() for k, v in configs.items())


async def _described(
    admin: AIOKafkaAdminClient, names: list[str]
) -> dict[str, dict[str, tuple[str | None, bool]]]:
    """Each topic's configs: name -> (value, whether it is set on the topic itself)."""
    responses = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
    )
    out: dict[str, dict[str, tuple[str | None, bool]]] = {}
    for response in responses:
        for resource in response.resources:
            _err, _msg, _rtype, rname, entries = resource[:5]
            if response.API_VERSION >= 1:  # (name, value, read_only, source, sensitive, ...)
                out[rname] = {e[0]: (e[1], e[3] == DYNAMIC_TOPIC_CONFIG) for e in entries}
            else:  # v0 tells only whether a value is the default: the broker's own count as set
                out[rname] = {e[0]: (e[1], not e[3] and not e[2]) for e in entries}
    return out
