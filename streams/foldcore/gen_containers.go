package foldcore

import "sort"

// Container statuses (streams/container_status.py): the kubelet's convertToAPIContainerStatuses
// over a runtime snapshot, and the prober manager's UpdatePodStatus (started and ready from probe
// results). The statuses built here are new objects; parts of old statuses they keep (a terminated
// status's fields, a lastState) are shared and never changed.

// idPrefix is "<runtime type>://", the prefix of every container ID.
func idPrefix(runtime *Obj) string {
	t := runtime.Get("runtime_type")
	if !Truthy(t) {
		return "process://"
	}
	return pyStr(t) + "://"
}

// runtimeContainerID is the API container ID of runtime container rc.
func runtimeContainerID(rc *Obj, prefix string) string {
	id, ok := rc.Lookup("id")
	if !ok {
		unsupported("a runtime container has no id")
	}
	return prefix + pyStr(id)
}

// stateField is rc[key] for a key Python reads with [] (a missing one raises).
func stateField(rc *Obj) string {
	state, ok := rc.Lookup("state")
	if !ok {
		unsupported("a runtime container has no state")
	}
	s, _ := state.(string) // any other type equals none of the states
	return s
}

// runtimeState is the API state of runtime container rc (cid its container ID, old the old status
// of its name, nil when none).
func runtimeState(rc *Obj, cid string, old *Obj) *Obj {
	state := NewObj(1)
	switch stateField(rc) {
	case "running":
		running := NewObj(1)
		genPut(running, "startedAt", rc.Get("started_at"))
		state.Set("running", running)
		return state
	case "exited":
		terminated := NewObj(6)
		terminated.Set("exitCode", intOr0(rc.Get("exit_code")))
		if reason := rc.Get("reason"); Truthy(reason) {
			genPut(terminated, "reason", reason)
		}
		if message := rc.Get("message"); Truthy(message) {
			genPut(terminated, "message", message)
		}
		genPut(terminated, "startedAt", rc.Get("started_at"))
		genPut(terminated, "finishedAt", rc.Get("finished_at"))
		terminated.Set("containerID", cid)
		state.Set("terminated", terminated)
		return state
	case "unknown":
		if old != nil && StateOf(old) == "running" {
			// It ran and vanished between relists: terminated with an unknown reason, never
			// waiting, so a run-once pod is not run twice.
			state.Set("terminated", unknownTermination(GoneWhenTerminated))
			return state
		}
	}
	state.Set("waiting", NewObj(0)) // created, or unknown without a running past: waiting to run
	return state
}

// unknownTermination is the terminated state of a container that could not be located.
func unknownTermination(message string) *Obj {
	t := NewObj(3)
	t.Set("exitCode", UnknownExitCode)
	t.Set("reason", StatusUnknownReason)
	t.Set("message", message)
	return t
}

// intOr0 is int(v or 0).
func intOr0(v any) int64 {
	if !Truthy(v) {
		return 0
	}
	return PyInt(v)
}

// stringOrEmpty is `v or ""`, for genPut.
func stringOrEmpty(v any) any {
	if !Truthy(v) {
		return ""
	}
	return v
}

// convertRuntimeContainer is the status of the container whose newest runtime container is rc.
func convertRuntimeContainer(rc *Obj, old *Obj, prefix string) *Obj {
	cid := runtimeContainerID(rc, prefix)
	status := NewObj(10)
	status.Set("name", rc.Get("name"))
	status.Set("restartCount", intOr0(rc.Get("restart_count")))
	genPut(status, "image", stringOrEmpty(rc.Get("image")))
	genPut(status, "imageID", stringOrEmpty(rc.Get("image_id")))
	status.Set("containerID", cid)
	state := runtimeState(rc, cid, old)
	status.Set("state", state)
	status.Set("lastState", NewObj(0))
	status.Set("ready", false)
	if old != nil && stateField(rc) == "unknown" && state.Has("terminated") { // it vanished running
		status.Set("restartCount", addOne(intOr0(old.Get("restartCount"))))
	}
	return status
}

// shouldContainerBeRestarted is ShouldContainerBeRestarted over the newest runtime container of
// that name (nil when none).
func shouldContainerBeRestarted(pod, container, latest *Obj) bool {
	if Truthy(asObj(pod.Get("metadata"), "metadata").Get("deletionTimestamp")) {
		return false
	}
	if latest == nil {
		return true
	}
	switch stateField(latest) {
	case "running":
		return false
	case "unknown", "created":
		return true
	}
	policy := "Always"
	if !IsSidecar(container) {
		policy = RestartPolicy(pod)
	}
	if policy == "Never" {
		return false
	}
	return !(policy == "OnFailure" && intOr0(latest.Get("exit_code")) == 0)
}

// createdAt is the sort key of a runtime container: created_at or "".
func createdAt(rc *Obj) string {
	v := rc.Get("created_at")
	if !Truthy(v) {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		unsupported("created_at is a %T", v)
	}
	return s
}

// slotOf is the position of the first container named name, or -1: a name's place in Python's
// statuses dict (a repeated name shares the first one's status).
func slotOf(containers []*Obj, name string) int {
	for i, c := range containers {
		if nameOf(c) == name {
			return i
		}
	}
	return -1
}

// convertContainerStatuses is convertToAPIContainerStatuses for one list (init or regular) of the
// spec: regular statuses sorted by name, init statuses in spec order.
func convertContainerStatuses(pod *Obj, containers []*Obj, oldStatuses any, runtime *Obj, reasons *Obj, isInit bool) []*Obj {
	if len(containers) == 0 {
		return nil
	}
	old := statusesOf(oldStatuses, "old container statuses")
	n := len(containers)
	statuses := make([]*Obj, n) // by slot
	latest := make([]*Obj, n)   // the newest runtime container of a slot
	builtFromRuntime := 0

	// Runtime containers, newest first: the newest of a name is its state, the next its lastState.
	runtimeContainers := asList(runtime.Get("containers"), "runtime containers")
	if len(runtimeContainers) > 0 {
		prefix := idPrefix(runtime)
		seen := make([]int, n)
		newestFirst := make([]*Obj, len(runtimeContainers))
		for i, item := range runtimeContainers {
			rc, ok := item.(*Obj)
			if !ok {
				unsupported("a runtime container is a %T", item)
			}
			newestFirst[i] = rc
		}
		if len(newestFirst) > 1 {
			keys := make([]string, len(newestFirst))
			for i, rc := range newestFirst {
				keys[i] = createdAt(rc)
			}
			order := make([]int, len(keys))
			for i := range order {
				order[i] = i
			}
			// Python's sorted(reverse=True) is stable: equal keys keep their order.
			sort.SliceStable(order, func(a, b int) bool { return keys[order[a]] > keys[order[b]] })
			sorted := make([]*Obj, len(order))
			for i, j := range order {
				sorted[i] = newestFirst[j]
			}
			newestFirst = sorted
		}
		for _, rc := range newestFirst {
			nameValue, ok := rc.Lookup("name")
			if !ok {
				unsupported("a runtime container has no name")
			}
			checkHashable(nameValue, "a runtime container's name")
			name, isString := nameValue.(string)
			slot := -1
			if isString {
				slot = slotOf(containers, name)
			}
			if slot < 0 {
				continue
			}
			switch seen[slot] {
			case 0:
				statuses[slot] = convertRuntimeContainer(rc, lastNamed(old, name), prefix)
				latest[slot] = rc
				builtFromRuntime++
			case 1:
				statuses[slot].Set("lastState", runtimeState(rc, runtimeContainerID(rc, prefix), lastNamed(old, name)))
			}
			seen[slot]++
		}
	}

	// The others, from their old status: a terminated one is kept; any other waits to be created.
	if builtFromRuntime < n {
		defaultReason := ContainerCreating
		if Truthy(asObj(pod.Get("spec"), "spec").Get("initContainers")) {
			defaultReason = PodInitializing
		}
		deleted := Truthy(asObj(pod.Get("metadata"), "metadata").Get("deletionTimestamp"))
		for _, container := range containers {
			name := nameOf(container)
			slot := slotOf(containers, name)
			if latest[slot] != nil {
				continue
			}
			statuses[slot] = statusWithoutRuntime(container, lastNamed(old, name), defaultReason, deleted)
		}
	}

	// Containers that will restart show the pod worker's last sync error (the reason cache).
	if reasons.Len() > 0 {
		for _, container := range containers {
			name := nameOf(container)
			reasonValue := reasons.Get(name)
			if !Truthy(reasonValue) {
				continue
			}
			slot := slotOf(containers, name)
			newest := latest[slot]
			if isInit && newest != nil && stateField(newest) == "exited" && !Truthy(newest.Get("exit_code")) {
				continue // an init container that succeeded is not restarted
			}
			if !shouldContainerBeRestarted(pod, container, newest) {
				continue
			}
			reason, ok := reasonValue.(*Obj)
			if !ok {
				unsupported("a reason cache entry is a %T", reasonValue)
			}
			status := statuses[slot]
			if StateOf(status) == "terminated" {
				status.Set("lastState", status.Get("state"))
			}
			waiting := NewObj(2)
			if r, found := reason.Lookup("reason"); found {
				genPut(waiting, "reason", r)
			}
			if message := reason.Get("message"); Truthy(message) {
				genPut(waiting, "message", message)
			}
			state := NewObj(1)
			state.Set("waiting", waiting)
			status.Set("state", state)
		}
	}

	ordered := make([]*Obj, n)
	for i, c := range containers {
		ordered[i] = statuses[slotOf(containers, nameOf(c))]
	}
	if !isInit {
		sort.SliceStable(ordered, func(a, b int) bool { return nameOf(ordered[a]) < nameOf(ordered[b]) })
	}
	return ordered
}

// statusWithoutRuntime is the status of a container the runtime does not report, from its old
// status (nil when none).
func statusWithoutRuntime(container, old *Obj, defaultReason string, deleted bool) *Obj {
	oldState := StateOf(old)
	if old != nil && oldState == "terminated" {
		return old.Copy() // the top level only: the fields below are replaced, not changed
	}
	status := NewObj(7)
	status.Set("name", container.Get("name"))
	waitingReason := NewObj(1)
	waitingReason.Set("reason", defaultReason)
	state := NewObj(1)
	state.Set("waiting", waitingReason)
	status.Set("state", state)
	status.Set("lastState", NewObj(0))
	status.Set("ready", false)
	status.Set("restartCount", int64(0))
	genPut(status, "image", stringOrEmpty(container.Get("image"))) // and no imageID: it is empty
	if old != nil {
		restartCount, found := old.Lookup("restartCount")
		if !found {
			restartCount = int64(0)
		}
		status.Set("restartCount", restartCount)
		lastState := old.Get("lastState")
		if !Truthy(lastState) {
			lastState = NewObj(0)
		}
		status.Set("lastState", lastState)
		if oldState == "running" && LastTerminated(status) == nil {
			// It was running and the runtime no longer reports it.
			gone := NewObj(1)
			gone.Set("terminated", unknownTermination(GoneWhenDeleted))
			status.Set("lastState", gone)
			if !deleted {
				status.Set("restartCount", addOne(intOr0(status.Get("restartCount"))))
			}
		}
	}
	return status
}
