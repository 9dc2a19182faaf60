package foldcore

// Container statuses (streams/container_status.py): the kubelet's convertToAPIContainerStatuses
// over a runtime snapshot (probe results are applied in gen_probes.go). The statuses built here
// are new objects; parts of old statuses they keep (a terminated status's fields, a lastState)
// are shared and never changed, and so are states equal to the ones the old statuses hold (see
// gen_reuse.go).

// runtimeType is the runtime's type, which container IDs start with ("<type>://<id>").
func runtimeType(runtime *Obj) string {
	t := runtime.Get("runtime_type")
	if !Truthy(t) {
		return "process"
	}
	return pyStr(t)
}

// runtimeContainerID is the API container ID of runtime container rc, "<type>://<id>" (a string,
// boxed once for the places it goes): stored, the ID the old status holds in its place, when
// that is the same.
func runtimeContainerID(rc *Obj, kind string, stored any) any {
	idValue, ok := rc.Lookup("id")
	if !ok {
		unsupported("a runtime container has no id")
	}
	id := pyStr(idValue)
	if s, isStr := stored.(string); isStr && len(s) == len(kind)+3+len(id) &&
		s[:len(kind)] == kind && s[len(kind):len(kind)+3] == "://" && s[len(kind)+3:] == id {
		return stored
	}
	return kind + "://" + id
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

// runtimeState is the API state of runtime container rc (cid its container ID, a string; old the
// old status of its name, nil when none), or stored (the state the old status holds in its
// place) when that is the same.
func runtimeState(rc *Obj, cid any, old *Obj, stored any) *Obj {
	var state fields
	switch stateField(rc) {
	case "running":
		var running fields
		running.put("startedAt", rc.Get("started_at"))
		state.add("running", running.objOr(storedField(stored, "running")))
		return state.objOr(stored)
	case "exited":
		var terminated fields
		terminated.add("exitCode", intOr0(rc.Get("exit_code")))
		if reason := rc.Get("reason"); Truthy(reason) {
			terminated.put("reason", reason)
		}
		if message := rc.Get("message"); Truthy(message) {
			terminated.put("message", message)
		}
		terminated.put("startedAt", rc.Get("started_at"))
		terminated.put("finishedAt", rc.Get("finished_at"))
		terminated.add("containerID", cid)
		state.add("terminated", terminated.objOr(storedField(stored, "terminated")))
		return state.objOr(stored)
	case "unknown":
		if old != nil && StateOf(old) == "running" {
			// It ran and vanished between relists: terminated with an unknown reason, never
			// waiting, so a run-once pod is not run twice.
			state.add("terminated", unknownTermination(GoneWhenTerminated, storedField(stored, "terminated")))
			return state.objOr(stored)
		}
	}
	// Created, or unknown without a running past: waiting to run.
	state.add("waiting", emptyObjOr(storedField(stored, "waiting")))
	return state.objOr(stored)
}

// unknownTermination is the terminated state of a container that could not be located, or stored
// when that is the same.
func unknownTermination(message any, stored any) *Obj {
	var t fields
	t.add("exitCode", UnknownExitCode)
	t.add("reason", StatusUnknownReason)
	t.add("message", message)
	return t.objOr(stored)
}

// intOr0 is int(v or 0).
func intOr0(v any) int64 {
	if !Truthy(v) {
		return 0
	}
	return PyInt(v)
}

// stringOrEmpty is `v or ""`, for put.
func stringOrEmpty(v any) any {
	if !Truthy(v) {
		return ""
	}
	return v
}

// convertRuntimeContainer is the status of the container whose newest runtime container is rc
// (old: the old status of its name, nil when none), its object from pool.
func convertRuntimeContainer(pool *statusPool, rc *Obj, old *Obj, kind string) *Obj {
	cid := runtimeContainerID(rc, kind, old.Get("containerID"))
	// A new object with distinct keys: each is appended without a lookup.
	var f fields
	f.add("name", rc.Get("name"))
	f.add("restartCount", intOr0(rc.Get("restart_count")))
	f.put("image", stringOrEmpty(rc.Get("image")))
	f.put("imageID", stringOrEmpty(rc.Get("image_id")))
	f.add("containerID", cid)
	state := runtimeState(rc, cid, old, old.Get("state"))
	f.add("state", state)
	f.add("lastState", emptyObjOr(old.Get("lastState")))
	f.add("ready", false)
	status := f.into(pool.obj()) // with room for started (applyProbeResults)
	if old != nil && stateField(rc) == "unknown" && state.Has("terminated") {
		// It vanished while running.
		status.Set("restartCount", addOne(intOr0(old.Get("restartCount"))))
	}
	return status
}

// shouldContainerBeRestarted is ShouldContainerBeRestarted over the newest runtime container of
// that name (nil when none).
func shouldContainerBeRestarted(gp *genPod, container, latest *Obj) bool {
	if gp.isDeleted() {
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
		policy = gp.restartPolicy()
	}
	if policy == "Never" {
		return false
	}
	return !(policy == "OnFailure" && intOr0(latest.Get("exit_code")) == 0)
}

// slotOf is the position of the first of names that is name, or -1: a name's place in Python's
// statuses dict (a repeated name shares the first one's status).
func slotOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// convertContainerStatuses is convertToAPIContainerStatuses for one list (init or regular) of the
// spec, appended to dst: regular statuses sorted by name, init statuses in spec order. Their
// objects come from pool.
func convertContainerStatuses(dst []*Obj, pool *statusPool, gp *genPod, isInit bool, oldStatuses any, runtime *Obj, reasons *Obj) []*Obj {
	containers, names := gp.containers, gp.names
	if isInit {
		containers, names = gp.initContainers, gp.initNames
	}
	if len(containers) == 0 {
		return nil
	}
	old := checkedStatuses(oldStatuses, "old container statuses")
	n := len(containers)
	// Per slot: its status, the newest runtime container of its name, and how many of the name
	// were seen; on the stack for the usual few containers.
	var statusBuf, latestBuf [8]*Obj
	var seenBuf [8]int
	statuses, latest, seen := statusBuf[:0], latestBuf[:0], seenBuf[:0]
	if n <= len(statusBuf) {
		statuses, latest, seen = statusBuf[:n], latestBuf[:n], seenBuf[:n]
	} else {
		statuses, latest, seen = make([]*Obj, n), make([]*Obj, n), make([]int, n)
	}
	builtFromRuntime := 0

	// Runtime containers, newest first: the newest of a name is its state, the next its lastState.
	runtimeContainers := asList(runtime.Get("containers"), "runtime containers")
	if len(runtimeContainers) > 0 {
		kind := runtimeType(runtime)
		var rcBuf [8]*Obj
		newestFirst := rcBuf[:0]
		for _, item := range runtimeContainers {
			rc, ok := item.(*Obj)
			if !ok {
				unsupported("a runtime container is a %T", item)
			}
			newestFirst = append(newestFirst, rc)
		}
		if len(newestFirst) > 1 {
			sortNewestFirst(newestFirst)
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
				slot = slotOf(names, name)
			}
			if slot < 0 {
				continue
			}
			switch seen[slot] {
			case 0:
				statuses[slot] = convertRuntimeContainer(pool, rc, lastNamedIn(old, name), kind)
				latest[slot] = rc
				builtFromRuntime++
			case 1:
				oldStatus := lastNamedIn(old, name)
				stored := oldStatus.Get("lastState")
				cid := runtimeContainerID(rc, kind, storedField(storedField(stored, "terminated"), "containerID"))
				statuses[slot].Set("lastState", runtimeState(rc, cid, oldStatus, stored))
			}
			seen[slot]++
		}
	}

	// The others, from their old status: a terminated one is kept; any other waits to be created.
	if builtFromRuntime < n {
		var defaultReason any = ContainerCreating
		if len(gp.initContainers) > 0 {
			defaultReason = PodInitializing
		}
		deleted := gp.isDeleted()
		for i, container := range containers {
			name := names[i]
			slot := slotOf(names, name)
			if latest[slot] != nil {
				continue
			}
			statuses[slot] = statusWithoutRuntime(pool, container, lastNamedIn(old, name), defaultReason, deleted)
		}
	}

	// Containers that will restart show the pod worker's last sync error (the reason cache).
	if reasons.Len() > 0 {
		for i, container := range containers {
			name := names[i]
			reasonValue := reasons.Get(name)
			if !Truthy(reasonValue) {
				continue
			}
			slot := slotOf(names, name)
			newest := latest[slot]
			if isInit && newest != nil && stateField(newest) == "exited" && !Truthy(newest.Get("exit_code")) {
				continue // an init container that succeeded is not restarted
			}
			if !shouldContainerBeRestarted(gp, container, newest) {
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
			var waiting, state fields
			if r, found := reason.Lookup("reason"); found {
				waiting.put("reason", r)
			}
			if message := reason.Get("message"); Truthy(message) {
				waiting.put("message", message)
			}
			stored := lastNamedIn(old, name).Get("state")
			state.add("waiting", waiting.objOr(storedField(stored, "waiting")))
			status.Set("state", state.objOr(stored))
		}
	}

	start := len(dst)
	for _, name := range names {
		dst = append(dst, statuses[slotOf(names, name)])
	}
	ordered := dst[start:]
	if !isInit {
		sortByName(ordered)
	}
	return ordered
}

// statusWithoutRuntime is the status of a container the runtime does not report, from its old
// status (nil when none).
func statusWithoutRuntime(pool *statusPool, container, old *Obj, defaultReason any, deleted bool) *Obj {
	oldState := StateOf(old)
	if old != nil && oldState == "terminated" {
		return old.Copy() // the top level only: the fields below are replaced, not changed
	}
	var f, waitingReason, state fields
	f.add("name", container.Get("name"))
	waitingReason.add("reason", defaultReason)
	stored := old.Get("state")
	state.add("waiting", waitingReason.objOr(storedField(stored, "waiting")))
	f.add("state", state.objOr(stored))
	f.add("lastState", emptyObjOr(old.Get("lastState")))
	f.add("ready", false)
	f.add("restartCount", int64(0))
	f.put("image", stringOrEmpty(container.Get("image"))) // and no imageID: it is empty
	status := f.into(pool.obj())
	if old != nil {
		restartCount, found := old.Lookup("restartCount")
		if !found {
			restartCount = int64(0)
		}
		status.Set("restartCount", restartCount)
		lastState := old.Get("lastState")
		if !Truthy(lastState) {
			lastState = emptyObjOr(lastState)
		}
		status.Set("lastState", lastState)
		if oldState == "running" && LastTerminated(status) == nil {
			// It was running and the runtime no longer reports it.
			gone := NewObj(1)
			gone.Set("terminated", unknownTermination(GoneWhenDeleted, nil))
			status.Set("lastState", gone)
			if !deleted {
				status.Set("restartCount", addOne(intOr0(status.Get("restartCount"))))
			}
		}
	}
	return status
}
