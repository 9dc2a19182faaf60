package foldcore

import "strings"

// Pod phase and the kubelet-owned pod conditions (streams/pod_conditions.py): getPhase, the
// condition generators of the kubelet's status/generate.go, and GetPodQOS, over the pod and the
// container statuses just generated. Status generation always passes both status lists (never
// None), so the None branches of the Python functions are not ported.

// getPhase is the kubelet's getPhase.
func getPhase(gp *genPod, initStatuses, statuses []*Obj, podIsTerminal bool) string {
	var pendingInit, pendingSidecars, failedInit int
	var unknown, running, waiting, stopped, succeeded int

	for i, container := range gp.initContainers {
		status := lastNamed(initStatuses, gp.initNames[i])
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

	for _, name := range gp.names {
		status := lastNamed(statuses, name)
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

	if failedInit > 0 && gp.restartPolicy() == "Never" {
		return "Failed"
	}
	if pendingInit > 0 || (pendingSidecars > 0 && !hasAnyRegularContainerStarted(gp, nil, statuses)) {
		return "Pending"
	}
	if waiting > 0 {
		return "Pending"
	}
	if running > 0 && unknown == 0 {
		return "Running"
	}
	if running == 0 && stopped > 0 && unknown == 0 {
		policy := gp.restartPolicy()
		if podIsTerminal && !gp.isStatic() {
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
func containersCondition(cm *conditionMaker, kind, reason any, unknown []string, what string, names []string) *Obj {
	var buf [256]byte
	message := buf[:0]
	if len(unknown) > 0 {
		message = appendContainersMessage(message, "unknown", unknown)
	}
	if len(names) > 0 {
		message = appendContainersMessage(message, what, names)
	}
	if len(message) > 0 {
		return cm.conditionWith(kind, "False", reason, message)
	}
	return cm.condition(kind, "True", "", "")
}

// containersReadyCondition is ContainersReady: every sidecar and regular container ready.
func containersReadyCondition(cm *conditionMaker, gp *genPod, initStatuses, statuses []*Obj, phase string) *Obj {
	if phase == "Failed" {
		return cm.condition("ContainersReady", "False", PodFailed, "")
	}
	var unknownBuf, unreadyBuf [8]string
	unknown, unready := unknownBuf[:0], unreadyBuf[:0]
	check := func(name string) {
		status := lastNamedOf(initStatuses, statuses, name)
		if status == nil {
			unknown = append(unknown, name)
		} else if !Truthy(status.Get("ready")) {
			unready = append(unready, name)
		}
	}
	for i, c := range gp.initContainers {
		if IsSidecar(c) {
			check(gp.initNames[i])
		}
	}
	for _, name := range gp.names {
		check(name)
	}
	if phase == "Succeeded" && len(unknown) == 0 {
		return cm.condition("ContainersReady", "False", PodCompleted, "")
	}
	return containersCondition(cm, "ContainersReady", ContainersNotReady, unknown, "unready", unready)
}

// readyCondition is Ready: ContainersReady's verdict, then the readiness gates against the
// conditions gathered so far.
func readyCondition(cm *conditionMaker, gp *genPod, conditions []any, containersReady *Obj) *Obj {
	if s := containersReady.Get("status"); s != "True" {
		reason, found := containersReady.Lookup("reason")
		if !found {
			reason = ""
		}
		message, found := containersReady.Lookup("message")
		if !found {
			message = ""
		}
		return cm.condition("Ready", s, reason, message)
	}
	gates := gp.spec.Get("readinessGates")
	if !Truthy(gates) {
		return cm.condition("Ready", "True", "", "")
	}
	// Python builds {type: condition} (the last of a type wins): every type must be hashable.
	for _, c := range conditions {
		checkHashable(c.(*Obj).Get("type"), "a condition type")
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
		checkHashable(kind, "a readiness gate's condition type")
		var cond *Obj
		for i := len(conditions) - 1; i >= 0 && cond == nil; i-- {
			if c := conditions[i].(*Obj); Equal(c.Get("type"), kind) {
				cond = c
			}
		}
		if cond == nil {
			messages = append(messages, `corresponding condition of pod readiness gate "`+pyStr(kind)+`" does not exist.`)
		} else if status, ok := cond.Get("status").(string); !ok || status != "True" {
			messages = append(messages, `the status of pod readiness gate "`+pyStr(kind)+
				`" is not "True", but `+pyStr(cond.Get("status")))
		}
	}
	if len(messages) > 0 {
		return cm.condition("Ready", "False", ReadinessGatesNotReady, strings.Join(messages, ", "))
	}
	return cm.condition("Ready", "True", "", "")
}

// initializedCondition is Initialized: every init container done (a sidecar started, any other
// ready), or a regular container already started.
func initializedCondition(cm *conditionMaker, gp *genPod, initStatuses, statuses []*Obj, phase string) *Obj {
	if len(gp.initContainers) == 0 {
		if phase == "Succeeded" {
			return cm.condition("Initialized", "True", PodCompleted, "")
		}
		return cm.condition("Initialized", "True", "", "")
	}
	var unknownBuf, incompleteBuf [8]string
	unknown, incomplete := unknownBuf[:0], incompleteBuf[:0]
	for i, container := range gp.initContainers {
		name := gp.initNames[i]
		status := lastNamedOf(initStatuses, statuses, name)
		if status == nil {
			unknown = append(unknown, name)
		} else if sidecar := IsSidecar(container); (sidecar && !Truthy(status.Get("started"))) ||
			(!sidecar && !Truthy(status.Get("ready"))) {
			incomplete = append(incomplete, name)
		}
	}
	if phase == "Succeeded" && len(unknown) == 0 {
		return cm.condition("Initialized", "True", PodCompleted, "")
	}
	if hasAnyRegularContainerStarted(gp, initStatuses, statuses) {
		return cm.condition("Initialized", "True", "", "")
	}
	return containersCondition(cm, "Initialized", ContainersNotInitialized, unknown, "incomplete", incomplete)
}

// readyToStartContainersCondition is True iff the pod has a ready sandbox.
func readyToStartContainersCondition(cm *conditionMaker, runtime *Obj) *Obj {
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
		return cm.condition("PodReadyToStartContainers", "True", "", "")
	}
	return cm.condition("PodReadyToStartContainers", "False", "", "")
}

// qosClass is GetPodQOS over cpu and memory of every container, init containers included.
func qosClass(gp *genPod) string {
	anySet, guaranteed := false, true
	for i, n := 0, len(gp.initContainers)+len(gp.containers); i < n; i++ {
		c := gp.containerAt(i)
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
