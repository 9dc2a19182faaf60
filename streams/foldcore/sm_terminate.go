package foldcore

// TerminatePod's status rewrite (streams/status_manager.py terminate_pod_status).

// TerminatePodStatus is terminate_pod_status: a new copy of the cached status (or, without one,
// of the pod's API status) in which every container that may have started gets a terminated
// state and the phase a terminal one.
func TerminatePodStatus(pod, cached *Obj) *Obj {
	source := cached
	if source == nil {
		if source = asObj(pod.Get("status"), "pod status"); source == nil {
			source = NewObj(0)
		}
	}
	status := DeepCopy(source).(*Obj)
	if hasPodInitialized(pod) {
		terminateContainers(asList(status.Get("containerStatuses"), "containerStatuses"))
	}
	terminateContainers(initializedContainers(asList(status.Get("initContainerStatuses"), "initContainerStatuses")))
	if !IsStatic(pod) && !IsTerminalPhase(status.Get("phase")) {
		status.Set("phase", "Failed")
	}
	return status
}

// terminateContainers gives each status not terminated yet the unknown terminated state, in place.
func terminateContainers(statuses []any) {
	for _, item := range statuses {
		if StateOf(asObj(item, "container status")) != "terminated" {
			objItem(item, "container statuses").Set("state", unknownTerminated())
		}
	}
}

// unknownTerminated is the state of a container that could not be found when the pod ended.
func unknownTerminated() *Obj {
	terminated := NewObj(3)
	terminated.Set("exitCode", UnknownExitCode)
	terminated.Set("reason", StatusUnknownReason)
	terminated.Set("message", GoneWhenTerminated)
	state := NewObj(1)
	state.Set("terminated", terminated)
	return state
}

// hasPodInitialized is has_pod_initialized: from the pod's API status, has the pod ever got past
// its init containers?
func hasPodInitialized(pod *Obj) bool {
	initSpec := asObj(pod.Get("spec"), "spec").Get("initContainers")
	if !Truthy(initSpec) {
		return true
	}
	specs := asList(initSpec, "initContainers")
	api := asObj(pod.Get("status"), "pod status")
	for _, item := range asList(api.Get("containerStatuses"), "containerStatuses") {
		cs := objItem(item, "containerStatuses")
		if Truthy(LastTerminated(cs)) || StateOf(cs) != "waiting" {
			return true
		}
	}
	init := asList(api.Get("initContainerStatuses"), "initContainerStatuses")
	if len(init) == 0 {
		return false
	}
	i := len(init) - 1
	if i >= len(specs) {
		return false
	}
	container, last := objItem(specs[i], "initContainers"), objItem(init[i], "initContainerStatuses")
	specName, ok := container.Lookup("name")
	name, found := last.Lookup("name")
	if !ok || !found {
		unsupported("an init container or its status has no name")
	}
	if !Equal(specName, name) {
		return false
	}
	if IsSidecar(container) {
		return StateOf(last) == "running" && Truthy(last.Get("started"))
	}
	for _, which := range [...]string{"state", "lastState"} {
		terminated := asObj(last.Get(which), which).Get("terminated")
		if Truthy(terminated) && smExitCode(terminated) == 0 {
			return true
		}
	}
	return false
}

// initializedContainers is initialized_containers: the init statuses up to the last one that ever
// tried to start (at least the first).
func initializedContainers(statuses []any) []any {
	for i := len(statuses) - 1; i >= 0; i-- {
		cs := asObj(statuses[i], "init container status")
		if StateOf(cs) != "waiting" || Truthy(LastTerminated(cs)) {
			return statuses[:i+1]
		}
	}
	if len(statuses) == 0 {
		return nil
	}
	return statuses[:1]
}
