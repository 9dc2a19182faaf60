package foldcore

import "strings"

// Pod phase and the kubelet-owned pod conditions (streams/pod_conditions.py): getPhase, the
// condition generators of the kubelet's status/generate.go, and GetPodQOS, over the pod and the
// container statuses just generated. Status generation always passes both status lists (never
// None), so the None branches of the Python functions are not ported.

// getPhase is the kubelet's getPhase.
func getPhase(pod *Obj, initStatuses, statuses []*Obj, podIsTerminal bool) string {
	spec := asObj(pod.Get("spec"), "spec")
	var pendingInit, pendingSidecars, failedInit int
	var unknown, running, waiting, stopped, succeeded int

	for _, container := range containersOf(spec.Get("initContainers"), "initContainers") {
		status := lastNamed(initStatuses, nameOf(container))
		state := StateOf(status)
		if IsSidecar(container) {
			switch {
			case status == nil:
				unknown++
			case state == "running":
				running++
				if !Truthy(status.Get("started")) {
					pendingSidecars++
				}
			case state == "terminated" || (state == "waiting" && LastTerminated(status) != nil):
				// a stopped sidecar does not count toward the phase
			case state == "waiting":
				pendingSidecars++
				waiting++
			default:
				pendingSidecars++
				unknown++
			}
			continue
		}
		switch {
		case status == nil || state == "running" || state == "":
			pendingInit++
		case state == "terminated":
			if ExitCode(status) != 0 {
				failedInit++
			}
		default: // waiting
			last := LastTerminated(status)
			if last == nil {
				pendingInit++
			} else if lastExitCode(last) != 0 {
				failedInit++
			}
		}
	}

	for _, container := range containersOf(spec.Get("containers"), "containers") {
		status := lastNamed(statuses, nameOf(container))
		if status == nil {
			unknown++
			continue
		}
		current := asObj(status.Get("state"), "container state")
		switch {
		case current.Get("running") != nil:
			running++
		case current.Get("terminated") != nil:
			stopped++
			if ExitCode(status) == 0 {
				succeeded++
			}
		case current.Get("waiting") == nil:
			unknown++ // a status without a state
		case LastTerminated(status) != nil:
			stopped++ // waiting to restart after a termination (CrashLoopBackOff)
		default:
			waiting++
		}
	}

	if failedInit > 0 && RestartPolicy(pod) == "Never" {
		return "Failed"
	}
	if pendingInit > 0 || (pendingSidecars > 0 && !hasAnyRegularContainerStarted(pod, statuses)) {
		return "Pending"
	}
	if waiting > 0 {
		return "Pending"
	}
	if running > 0 && unknown == 0 {
		return "Running"
	}
	if running == 0 && stopped > 0 && unknown == 0 {
		policy := RestartPolicy(pod)
		if podIsTerminal && !IsStatic(pod) {
			if stopped == succeeded {
				return "Succeeded"
			}
			return "Failed"
		}
		if policy == "Always" {
			return "Running"
		}
		if stopped == succeeded {
			return "Succeeded"
		}
		if policy == "Never" {
			return "Failed"
		}
		return "Running"
	}
	return "Pending"
}

// lastExitCode is int(last.get("exitCode", 0)) of a lastState.terminated.
func lastExitCode(last any) int64 {
	o, ok := last.(*Obj)
	if !ok {
		unsupported("lastState.terminated is a %T", last)
	}
	code, found := o.Lookup("exitCode")
	if !found {
		return 0
	}
	return PyInt(code)
}

// containersCondition is True, or False with reason and the unknown and <what> containers named.
func containersCondition(kind, reason string, unknown []string, what string, names []string) *Obj {
	var messages []string
	if len(unknown) > 0 {
		messages = append(messages, "containers with unknown status: "+goList(unknown))
	}
	if len(names) > 0 {
		messages = append(messages, "containers with "+what+" status: "+goList(names))
	}
	if len(messages) > 0 {
		return condition(kind, "False", reason, strings.Join(messages, ", "))
	}
	return condition(kind, "True", "", "")
}

// containersReadyCondition is ContainersReady: every sidecar and regular container ready.
func containersReadyCondition(pod *Obj, initStatuses, statuses []*Obj, phase string) *Obj {
	if phase == "Failed" {
		return condition("ContainersReady", "False", PodFailed, "")
	}
	known := statuses
	if len(initStatuses) > 0 {
		known = append(append([]*Obj(nil), initStatuses...), statuses...)
	}
	spec := asObj(pod.Get("spec"), "spec")
	var unknown, unready []string
	check := func(container *Obj) {
		name := nameOf(container)
		status := lastNamed(known, name)
		if status == nil {
			unknown = append(unknown, name)
		} else if !Truthy(status.Get("ready")) {
			unready = append(unready, name)
		}
	}
	for _, c := range containersOf(spec.Get("initContainers"), "initContainers") {
		if IsSidecar(c) {
			check(c)
		}
	}
	for _, c := range containersOf(spec.Get("containers"), "containers") {
		check(c)
	}
	if phase == "Succeeded" && len(unknown) == 0 {
		return condition("ContainersReady", "False", PodCompleted, "")
	}
	return containersCondition("ContainersReady", ContainersNotReady, unknown, "unready", unready)
}

// readyCondition is Ready: ContainersReady's verdict, then the readiness gates against the
// conditions gathered so far.
func readyCondition(pod *Obj, conditions []any, containersReady *Obj) *Obj {
	if s := containersReady.Get("status").(string); s != "True" {
		reason, _ := containersReady.Get("reason").(string)
		message, _ := containersReady.Get("message").(string)
		return condition("Ready", s, reason, message)
	}
	gates := asObj(pod.Get("spec"), "spec").Get("readinessGates")
	if !Truthy(gates) {
		return condition("Ready", "True", "", "")
	}
	present := make(map[string]*Obj, len(conditions))
	for _, c := range conditions {
		o := c.(*Obj)
		present[hashKey(o.Get("type"))] = o
	}
	var messages []string
	for _, g := range asList(gates, "readinessGates") {
		gate, ok := g.(*Obj)
		if !ok {
			unsupported("a readiness gate is a %T", g)
		}
		kind, found := gate.Lookup("conditionType")
		if !found {
			kind = ""
		}
		cond := present[hashKey(kind)]
		if cond == nil {
			messages = append(messages, `corresponding condition of pod readiness gate "`+pyStr(kind)+`" does not exist.`)
		} else if status, ok := cond.Get("status").(string); !ok || status != "True" {
			messages = append(messages, `the status of pod readiness gate "`+pyStr(kind)+
				`" is not "True", but `+pyStr(cond.Get("status")))
		}
	}
	if len(messages) > 0 {
		return condition("Ready", "False", ReadinessGatesNotReady, strings.Join(messages, ", "))
	}
	return condition("Ready", "True", "", "")
}

// initializedCondition is Initialized: every init container done (a sidecar started, any other
// ready), or a regular container already started.
func initializedCondition(pod *Obj, initStatuses, statuses []*Obj, phase string) *Obj {
	initContainers := containersOf(asObj(pod.Get("spec"), "spec").Get("initContainers"), "initContainers")
	if len(initContainers) == 0 {
		if phase == "Succeeded" {
			return condition("Initialized", "True", PodCompleted, "")
		}
		return condition("Initialized", "True", "", "")
	}
	everything := append(append([]*Obj(nil), initStatuses...), statuses...)
	var unknown, incomplete []string
	for _, container := range initContainers {
		name := nameOf(container)
		status := lastNamed(everything, name)
		if status == nil {
			unknown = append(unknown, name)
		} else if sidecar := IsSidecar(container); (sidecar && !Truthy(status.Get("started"))) ||
			(!sidecar && !Truthy(status.Get("ready"))) {
			incomplete = append(incomplete, name)
		}
	}
	if phase == "Succeeded" && len(unknown) == 0 {
		return condition("Initialized", "True", PodCompleted, "")
	}
	if hasAnyRegularContainerStarted(pod, everything) {
		return condition("Initialized", "True", "", "")
	}
	return containersCondition("Initialized", ContainersNotInitialized, unknown, "incomplete", incomplete)
}

// readyToStartContainersCondition is True iff the pod has a ready sandbox.
func readyToStartContainersCondition(runtime *Obj) *Obj {
	sandbox := runtime.Get("sandbox")
	ready := false
	if sandbox != nil {
		o, ok := sandbox.(*Obj)
		if !ok {
			unsupported("sandbox is a %T", sandbox)
		}
		ready = Truthy(o.Get("ready"))
	}
	if ready {
		return condition("PodReadyToStartContainers", "True", "", "")
	}
	return condition("PodReadyToStartContainers", "False", "", "")
}

// qosClass is GetPodQOS over cpu and memory of every container, init containers included.
func qosClass(pod *Obj) string {
	spec := asObj(pod.Get("spec"), "spec")
	anySet, guaranteed := false, true
	all := append(append([]any(nil), asList(spec.Get("initContainers"), "initContainers")...),
		asList(spec.Get("containers"), "containers")...)
	for _, item := range all {
		c, ok := item.(*Obj)
		if !ok {
			unsupported("a container is a %T", item)
		}
		resources := c.Get("resources")
		if !Truthy(resources) { // neither requests nor limits: not guaranteed, nothing set
			guaranteed = false
			continue
		}
		r, ok := resources.(*Obj)
		if !ok {
			unsupported("resources is a %T", resources)
		}
		requests := resourceMap(r.Get("requests"))
		limits := resourceMap(r.Get("limits"))
		for _, res := range [...]string{"cpu", "memory"} {
			if requests.Has(res) || limits.Has(res) {
				anySet = true
			}
			limit, limited := limits.Lookup(res)
			request, requested := requests.Lookup(res)
			if !requested {
				request = limit
			}
			if !limited || !Equal(request, limit) {
				guaranteed = false
			}
		}
	}
	if !anySet {
		return "BestEffort"
	}
	if guaranteed {
		return "Guaranteed"
	}
	return "Burstable"
}

// resourceMap is `v or {}` for requests or limits; a truthy non-object (where Python's `in` would
// search a list or a string) is not covered.
func resourceMap(v any) *Obj {
	if o, ok := v.(*Obj); ok {
		return o
	}
	if Truthy(v) {
		unsupported("resource requests or limits are a %T", v)
	}
	return nil
}
