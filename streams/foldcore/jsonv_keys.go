package foldcore

// The keys the fold and the schema test look up. Parse hands out these very strings (the string
// constants of the same text in the code share their bytes), so that a lookup's key comparison
// finds the two strings at the same address and stops there, without reading either one's bytes.

// knownKeys maps each key to itself.
var knownKeys = func() map[string]string {
	keys := [...]string{
		// ingress models and journal entries
		"op", "source", "node", "pod", "ts_ms", "uid", "type", "container_id", "runtime",
		"container_name", "probe", "result", "kind", "sync_results", "grace_s", "backoff", "event",
		"topic", "partition", "offset", "container", "reason", "message",
		// runtime snapshots
		"containers", "ips", "host_ips", "runtime_type", "sandbox", "id", "name", "image",
		"image_id", "state", "exit_code", "created_at", "started_at", "finished_at",
		"restart_count", "ready",
		// pods and their statuses
		"apiVersion", "metadata", "namespace", "labels", "annotations", "deletionTimestamp",
		"spec", "nodeName", "restartPolicy", "initContainers", "ephemeralContainers",
		"readinessGates", "conditionType", "resources", "requests", "limits", "cpu", "memory",
		"startupProbe", "readinessProbe", "livenessProbe", "status", "phase", "qosClass",
		"conditions", "lastProbeTime", "lastTransitionTime", "startTime", "hostIP", "hostIPs",
		"podIP", "podIPs", "ip", "containerStatuses", "initContainerStatuses",
		"ephemeralContainerStatuses", "lastState", "running", "waiting", "terminated",
		"exitCode", "startedAt", "finishedAt", "containerID", "imageID", "restartCount",
		"started", ConfigSourceAnnotation,
		// the rest of the schemas' properties
		"command", "args", "workingDir", "env", "value", "ports", "securityContext", "delay",
		"last_update",
	}
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = k
	}
	return m
}()
