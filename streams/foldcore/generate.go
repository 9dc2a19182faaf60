package foldcore

// Status generation (streams/status.py generate_api_status): the kubelet's generateAPIPodStatus
// over the desired pod, the cached status, the runtime snapshot, probe results and the pod
// worker's reason cache. Its parts live in gen_containers.go and gen_order.go (container
// statuses), gen_probes.go (started and ready), gen_conditions.go (phase, conditions, QoS),
// gen_podjson.go (the shared vocabulary) and gen_python.go (Python built-ins over JSON values).

// GenerateAPIStatus is generate_api_status(pod, old, runtime, probes=probes, reasons=reasons,
// pod_is_terminal=podIsTerminal); a nil old or runtime is Python's None, nil probes or reasons
// read as empty. Conditions carry no times: the status manager stamps them. The status, its
// container status and condition lists, its container statuses and its conditions are new
// objects the caller may change; anything else in it may be shared with old, pod and runtime,
// and must not be changed.
func GenerateAPIStatus(pod, old, runtime, probes, reasons *Obj, podIsTerminal bool) *Obj {
	return generateStatus(newGenPod(pod), old, nil, nil, runtime, probes, reasons, podIsTerminal)
}

// generateForFold is GenerateAPIStatus for the fold, which hands the result to SetPodStatus with
// the same cached status (nil: none): the kubelet conditions that the status manager would keep
// as cached holds them are cached's own (see conditionMaker), and the status's top object and
// container statuses come from pool.
func generateForFold(pool *statusPool, gp *genPod, cached, runtime, probes, reasons *Obj, podIsTerminal bool) *Obj {
	var maker conditionMaker
	cm := &maker
	if cached != nil {
		maker.remember(ListOf(cached.Get("conditions")))
	} else {
		cm = nil
	}
	return generateStatus(gp, cached, cm, pool, runtime, probes, reasons, podIsTerminal)
}

// generateStatus is GenerateAPIStatus of the pod gp has read, its conditions made by cm, its
// top object and container statuses taken from pool.
func generateStatus(gp *genPod, old *Obj, cm *conditionMaker, pool *statusPool, runtime, probes, reasons *Obj, podIsTerminal bool) *Obj {
	apiStatus := gp.apiStatus
	if old == nil {
		old = apiStatus
	}

	// A new object whose keys are each set once: they are appended without a lookup.
	status := pool.obj() // room for the usual fields; a rare eleventh reallocates
	if runtime.Len() > 0 {
		if hostIPs := asList(runtime.Get("host_ips"), "host_ips"); len(hostIPs) > 0 {
			putNew(status, "hostIP", hostIPs[0])
			status.appendNew("hostIPs", ipEntries(hostIPs, old.Get("hostIPs")))
		}
		if ips := asList(runtime.Get("ips"), "ips"); len(ips) > 0 {
			putNew(status, "podIP", ips[0])
			status.appendNew("podIPs", ipEntries(ips, old.Get("podIPs")))
		}
	}
	qos := gp.api.qosClass
	if !Truthy(qos) {
		qos = gp.qosClass()
	}
	putNew(status, "qosClass", qos)

	// The status lists as generation reads them, on the stack for the usual few containers.
	var initBuf, regularBuf [8]*Obj
	var initStatuses []*Obj
	if len(gp.initContainers) > 0 {
		initStatuses = convertContainerStatuses(initBuf[:0], pool, gp, true, old.Get("initContainerStatuses"), runtime, reasons)
	}
	statuses := convertContainerStatuses(regularBuf[:0], pool, gp, false, old.Get("containerStatuses"), runtime, reasons)
	if len(initStatuses) > 0 {
		status.appendNew("initContainerStatuses", anyList(initStatuses))
	}
	if len(statuses) > 0 {
		status.appendNew("containerStatuses", anyList(statuses))
	}

	phase := finalPhase(status, old, &gp.api, getPhase(gp, initStatuses, statuses, podIsTerminal))
	status.appendNew("phase", boxedPhase(phase))

	applyProbeResults(gp, statuses, initStatuses, probes)

	// Others' conditions are copied at the top level: the status manager sets their times.
	apiConditions := asList(gp.api.conditions, "API conditions")
	conditions := make([]any, 0, len(apiConditions)+6)
	for _, item := range apiConditions {
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
	conditions = append(conditions, readyToStartContainersCondition(cm, runtime))
	conditions = append(conditions, initializedCondition(cm, gp, initStatuses, statuses, phase))
	containersReady := containersReadyCondition(cm, gp, initStatuses, statuses, phase)
	conditions = append(conditions, readyCondition(cm, gp, conditions, containersReady))
	conditions = append(conditions, containersReady, cm.condition("PodScheduled", "True", "", ""))
	status.appendNew("conditions", conditions)
	return status
}

// finalPhase is the generated phase after the cached and API phases have their say: a terminal
// phase is never left, and the apiserver's terminal phase always wins. When the phase is the
// cached one, the cached (or API) reason and message are kept on status (which, being built,
// holds neither yet).
func finalPhase(status, old *Obj, api *apiFields, phase string) string {
	oldPhase := old.Get("phase")
	apiPhase := api.phase
	if phase != "Succeeded" && phase != "Failed" { // IsTerminalPhase, for a string
		if IsTerminalPhase(oldPhase) {
			phase = oldPhase.(string)
		} else if IsTerminalPhase(apiPhase) {
			phase = apiPhase.(string)
		}
	}
	if p, ok := oldPhase.(string); ok && p == phase {
		for _, field := range [...]struct {
			key string
			api any
		}{{"reason", api.reason}, {"message", api.message}} {
			value := old.Get(field.key)
			if !Truthy(value) {
				value = field.api
			}
			if Truthy(value) {
				putNew(status, field.key, value)
			}
		}
	}
	if IsTerminalPhase(apiPhase) && apiPhase.(string) != phase {
		phase = apiPhase.(string)
	}
	return phase
}

// boxedPhase is phase as a JSON value; the phases are constants, which Go boxes without allocating.
func boxedPhase(phase string) any {
	switch phase {
	case "Pending":
		return "Pending"
	case "Running":
		return "Running"
	case "Succeeded":
		return "Succeeded"
	case "Failed":
		return "Failed"
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

// ipEntries is [{"ip": ip} for the first two addresses], each entry canonical (no empty ip); it
// is stored (the cached status's list) when that holds the same entries. Nothing changes such a
// list once built.
func ipEntries(addresses []any, stored any) any {
	if len(addresses) > 2 {
		addresses = addresses[:2]
	}
	if same, ok := stored.([]any); ok && len(same) == len(addresses) && sameIPEntries(same, addresses) {
		return stored
	}
	out := make([]any, len(addresses))
	for i, ip := range addresses {
		entry := NewObj(1)
		put(entry, "ip", ip)
		out[i] = entry
	}
	return out
}

// sameIPEntries reports whether entries are ipEntries' entries of addresses, field for field.
func sameIPEntries(entries, addresses []any) bool {
	for i, ip := range addresses {
		var entry fields
		entry.put("ip", ip)
		if !entry.matches(ObjOf(entries[i])) {
			return false
		}
	}
	return true
}

// anyList is a status list as a JSON list.
func anyList(statuses []*Obj) []any {
	out := make([]any, len(statuses))
	for i, s := range statuses {
		out[i] = s
	}
	return out
}
