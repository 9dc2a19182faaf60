package foldcore

// The status manager's rules (streams/status_manager.py, the kubelet's pkg/kubelet/status):
// SetPodStatus is updateStatusInternal, TerminatePodStatus is TerminatePod's status rewrite.

// SetPodStatus is set_pod_status (updateStatusInternal) for a freshly generated status new, which
// it takes over: it may change new, its lists, container statuses and conditions in place, never
// what lies below them, and never cached. It returns the status to store under newVersion, or a
// nil status (and the old version) when nothing changed or the update is an illegal container
// state transition. built says new is GenerateAPIStatus's: over a canonical old status only its
// conditions and container states need making canonical; otherwise the whole status is.
func SetPodStatus(pod, cached *Obj, version int64, new *Obj, now string, force, built bool) (status *Obj, newVersion int64) {
	return setPodStatus(&podFacts{pod: pod}, cached, version, new, now, force, built)
}

// setPodStatus is SetPodStatus of the pod pf answers for; now is a string (boxed once for the
// places it goes).
func setPodStatus(pf *podFacts, cached *Obj, version int64, new *Obj, now any, force, built bool) (status *Obj, newVersion int64) {
	pod := pf.pod
	old := cached
	if old == nil {
		old = asObj(pod.Get("status"), "pod status")
		if old == nil {
			old = NewObj(0)
		}
	}
	if illegalTransition(old, new, pf) {
		return nil, version
	}
	status = new
	if built && (cached != nil || isCanonical(old)) {
		if conditions, ok := status.Lookup("conditions"); ok {
			list, isList := conditions.([]any)
			if !isList {
				unsupported("generated conditions are a %T", conditions)
			}
			canonicalConditions(old, list, now) // in place: status holds the list already
		}
		start := old.Get("startTime")
		if !Truthy(start) {
			start = status.Get("startTime")
		}
		if !Truthy(start) {
			start = now
		}
		status.Set("startTime", truncateTime(start))
		normalizeGenerated(pf, status)
	} else {
		updateLastTransitionTimes(old, status, now)
		if start := old.Get("startTime"); Truthy(start) {
			status.Set("startTime", start)
		} else if !Truthy(status.Get("startTime")) {
			status.Set("startTime", now)
		}
		status = semanticObj(normalizeInPlace(pf, status))
		for _, item := range asList(status.Get("conditions"), "conditions") {
			objItem(item, "conditions").SetDefault("lastProbeTime", nil) // as the API shows it
		}
	}
	if cached != nil && !force && kubeletEqualCanonical(cached, status) {
		return nil, version
	}
	return status, addOne(version)
}

// illegalTransition is check_container_state_transition returning an error: a container that may
// not restart (by the pod's restart policy) left its terminated state, or the init container
// statuses do not match the spec.
func illegalTransition(old, new *Obj, pf *podFacts) bool {
	policy := pf.restartPolicy()
	if policy == "Always" {
		return false
	}
	mayNotRestart := func(status *Obj) bool {
		if StateOf(status) != "terminated" {
			return false
		}
		code := smExitCode(asObj(status.Get("state"), "container state").Get("terminated"))
		return !(code != 0 && policy == "OnFailure")
	}
	newRegular := statusesOf(new.Get("containerStatuses"), "containerStatuses")
	for _, item := range asList(old.Get("containerStatuses"), "containerStatuses") {
		status := asObj(item, "container status")
		if mayNotRestart(status) && StateOf(smNamedOr(newRegular, status)) != "terminated" {
			return true
		}
	}
	specInit := asList(asObj(pf.pod.Get("spec"), "spec").Get("initContainers"), "initContainers")
	oldInit := asList(old.Get("initContainerStatuses"), "initContainerStatuses")
	newInit := statusesOf(new.Get("initContainerStatuses"), "initContainerStatuses")
	for i, item := range oldInit {
		status := objItem(item, "initContainerStatuses")
		name, ok := status.Lookup("name")
		if !ok {
			unsupported("an init container status has no name")
		}
		if i >= len(specInit) {
			return true // a status the spec does not have
		}
		container := objItem(specInit[i], "initContainers")
		specName, found := container.Lookup("name")
		if !found {
			unsupported("an init container has no name")
		}
		if !Equal(specName, name) {
			return true
		}
		if IsSidecar(container) {
			continue
		}
		if mayNotRestart(status) && StateOf(smNamedOr(newInit, status)) != "terminated" {
			return true
		}
	}
	return false
}

// smNamedOr is {s["name"]: s for s in list}.get(status["name"], status).
func smNamedOr(list []*Obj, status *Obj) *Obj {
	name, ok := status.Lookup("name")
	if !ok {
		unsupported("a container status has no name")
	}
	s, isStr := name.(string)
	if !isStr {
		unsupported("a container status has a %T name", name)
	}
	if found := lastNamed(list, s); found != nil {
		return found
	}
	return status
}

// smExitCode is int(terminated.get("exitCode", 0)) for a terminated state Python reads with .get.
func smExitCode(terminated any) int64 {
	t, ok := terminated.(*Obj)
	if !ok || t == nil {
		unsupported("terminated state is a %T", terminated)
	}
	code, found := t.Lookup("exitCode")
	if !found {
		return 0
	}
	return PyInt(code)
}

// kubeletEqualCanonical is _kubelet_equal_canonical: is_pod_status_by_kubelet_equal for two
// canonical statuses, where plain equality suffices. The rest of the status goes first: it tells
// most changes apart in one comparison.
func kubeletEqualCanonical(old, new *Obj) bool {
	// {**old, "conditions": new["conditions"]} (or old without conditions) == new, without the copy.
	size := old.Len()
	if new.Has("conditions") != old.Has("conditions") {
		if new.Has("conditions") {
			size++
		} else {
			size--
		}
	}
	if size != new.Len() {
		return false
	}
	values := new.Values()
	for i, key := range new.Keys() {
		if key == "conditions" {
			continue // new's own conditions on both sides
		}
		if v, ok := old.lookupAt(key, i); !ok || !Equal(v, values[i]) {
			return false
		}
	}
	return ownedConditionsMatch(old, new)
}
