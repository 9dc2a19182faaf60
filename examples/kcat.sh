#!/bin/sh
# The latest status of every pod, straight from the compacted pod-status topic with kcat: one line per
# record (partition, offset, pod UID, the VersionedPodStatus JSON; an empty value is a removed pod).
# -e stops at the end of the topic; drop it to keep following.
kcat -C -b "${PODLEDGER_BOOTSTRAP:?set PODLEDGER_BOOTSTRAP}" -t "${PODLEDGER_TOPIC_PREFIX:-podledger.}pod-status" -e -q -f '%p %o %k %s\n'
