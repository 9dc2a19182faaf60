package foldcore

// Status generation (streams/status.py generate_api_status): the kubelet's generateAPIPodStatus
// over the desired pod, the cached status, the runtime snapshot, probe results and the pod
// worker's reason cache. Its parts live in gen_containers.go (container statuses), gen_probes.go
// (started and ready), gen_conditions.go (phase, conditions, QoS) and gen_podjson.go (the shared
// vocabulary).

// GenerateAPIStatus is generate_api_status(pod, old, runtime, probes=probes, reasons=reasons,
// pod_is_terminal=podIsTerminal); a nil old or runtime is Python's None, nil probes or reasons
// read as empty. Conditions carry no times: the status manager stamps them. The status, its lists,
// its container statuses and its conditions are new objects the caller may change; what lies below
// them may be shared with old, pod and runtime, and must not be changed.
func GenerateAPIStatus(pod, old, runtime, probes, reasons *Obj, podIsTerminal bool) *Obj {
	apiStatus := asObj(pod.Get("status"), "status")
	if old == nil {
		old = apiStatus
	}
	spec := asObj(pod.Get("spec"), "spec")

	status := NewObj(12)
	if runtime.Len() > 0 {
		if hostIPs := asList(runtime.Get("host_ips"), "host_ips"); len(hostIPs) > 0 {
			genPut(status, "hostIP", hostIPs[0])
			status.Set("hostIPs", ipEntries(hostIPs))
		}
		if ips := asList(runtime.Get("ips"), "ips"); len(ips) > 0 {
			genPut(status, "podIP", ips[0])
			status.Set("podIPs", ipEntries(ips))
		}
	}
	qos := apiStatus.Get("qosClass")
	if !Truthy(qos) {
		qos = qosClass(pod)
	}
	genPut(status, "qosClass", qos)

	var initStatuses []*Obj
	if initContainers := spec.Get("initContainers"); Truthy(initContainers) {
		initStatuses = convertContainerStatuses(pod, containersOf(initContainers, "initContainers"),
			old.Get("initContainerStatuses"), runtime, reasons, true)
	}
	statuses := convertContainerStatuses(pod, containersOf(spec.Get("containers"), "containers"),
		old.Get("containerStatuses"), runtime, reasons, false)
	if len(initStatuses) > 0 {
		status.Set("initContainerStatuses", anyList(initStatuses))
	}
	if len(statuses) > 0 {
		status.Set("containerStatuses", anyList(statuses))
	}

	phase := finalPhase(status, old, apiStatus, getPhase(pod, initStatuses, statuses, podIsTerminal))
	status.Set("phase", phase)

	applyProbeResults(pod, statuses, initStatuses, probes)

	// Others' conditions are copied at the top level: the status manager sets their times.
	var conditions []any
	for _, item := range asList(apiStatus.Get("conditions"), "API conditions") {
		c := conditionObj(item)
		if !InConditionSet(KubeletOwnedConditions, c.Get("type")) {
			conditions = append(conditions, c.Copy())
		}
	}
	for _, item := range asList(old.Get("conditions"), "old conditions") {
		c := conditionObj(item)
		if kind, ok := c.Get("type").(string); ok && kind == "DisruptionTarget" {
			conditions = replaceOrAppendCondition(conditions, c.Copy())
			break
		}
	}
	conditions = append(conditions, readyToStartContainersCondition(runtime))
	conditions = append(conditions, initializedCondition(pod, initStatuses, statuses, phase))
	containersReady := containersReadyCondition(pod, initStatuses, statuses, phase)
	conditions = append(conditions, readyCondition(pod, conditions, containersReady))
	conditions = append(conditions, containersReady, condition("PodScheduled", "True", "", ""))
	status.Set("conditions", conditions)
	return status
}

// finalPhase is the generated phase after the cached and API phases have their say: a terminal
// phase is never left, and the apiserver's terminal phase always wins. When the phase is the
// cached one, the cached (or API) reason and message are kept on status.
func finalPhase(status, old, apiStatus *Obj, phase string) string {
	oldPhase := old.Get("phase")
	apiPhase := apiStatus.Get("phase")
	if !IsTerminalPhase(phase) {
		if IsTerminalPhase(oldPhase) {
			phase = oldPhase.(string)
		} else if IsTerminalPhase(apiPhase) {
			phase = apiPhase.(string)
		}
	}
	if p, ok := oldPhase.(string); ok && p == phase {
		for _, key := range [...]string{"reason", "message"} {
			value := old.Get(key)
			if !Truthy(value) {
				value = apiStatus.Get(key)
			}
			if Truthy(value) {
				genPut(status, key, value)
			}
		}
	}
	if IsTerminalPhase(apiPhase) && apiPhase.(string) != phase {
		phase = apiPhase.(string)
	}
	return phase
}

// conditionObj is a condition of the API or cached status, which Python reads with .get.
func conditionObj(item any) *Obj {
	c, ok := item.(*Obj)
	if !ok {
		unsupported("a condition is a %T", item)
	}
	return c
}

// ipEntries is [{"ip": ip} for the first two addresses], each entry canonical (no empty ip).
func ipEntries(addresses []any) []any {
	if len(addresses) > 2 {
		addresses = addresses[:2]
	}
	out := make([]any, len(addresses))
	for i, ip := range addresses {
		entry := NewObj(1)
		genPut(entry, "ip", ip)
		out[i] = entry
	}
	return out
}

// anyList is a status list as a JSON list.
func anyList(statuses []*Obj) []any {
	out := make([]any, len(statuses))
	for i, s := range statuses {
		out[i] = s
	}
	return out
}
