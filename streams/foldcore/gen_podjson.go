package foldcore

import "time"

// The pod and status JSON vocabulary that status generation and the status manager share
// (streams/pod_json.py), and the Python built-ins they lean on (int(), str(), hashing), each
// giving up where Python would raise.

// KubeletOwnedConditions are the condition types the kubelet owns; the API status's others belong
// to other controllers.
var KubeletOwnedConditions = map[string]bool{
	"PodScheduled": true, "Ready": true, "Initialized": true, "ContainersReady": true,
	"PodReadyToStartContainers": true,
}

// SharedConditions are owned by the kubelet and other controllers alike.
var SharedConditions = map[string]bool{"DisruptionTarget": true}

// Container waiting reasons, the unknown-status termination and the condition reasons the kubelet uses.
const (
	ContainerCreating        = "ContainerCreating"
	PodInitializing          = "PodInitializing"
	StatusUnknownReason      = "ContainerStatusUnknown"
	GoneWhenDeleted          = "The container could not be located when the pod was deleted.  The container used to be Running"
	GoneWhenTerminated       = "The container could not be located when the pod was terminated"
	UnknownExitCode          = int64(137)
	UnknownContainerStatuses = "UnknownContainerStatuses"
	PodCompleted             = "PodCompleted"
	PodFailed                = "PodFailed"
	ContainersNotReady       = "ContainersNotReady"
	ContainersNotInitialized = "ContainersNotInitialized"
	ReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// ConfigSourceAnnotation names the pod source a pod came from; file and http make a static pod.
const ConfigSourceAnnotation = "kubernetes.io/config.source"

// maxFormattedSecond is the last second of year 9999, past which Python's strftime stops giving
// four-digit years.
const maxFormattedSecond = 253402300799

// RFC3339FromMs is pod_json.rfc3339(ts_ms / 1000): the second of tsMs in UTC, seconds precision.
// Python's true division then floor equals integer division for every tsMs it covers (tsMs >= 0 and
// years below 10000).
func RFC3339FromMs(tsMs int64) string {
	if tsMs < 0 || tsMs/1000 > maxFormattedSecond {
		unsupported("timestamp %d ms out of the covered range", tsMs)
	}
	return time.Unix(tsMs/1000, 0).UTC().Format("2006-01-02T15:04:05Z")
}

// IsTerminalPhase is `phase in TERMINAL_PHASES` for any JSON value (a list or object cannot be
// hashed: Python raises).
func IsTerminalPhase(phase any) bool {
	switch p := phase.(type) {
	case string:
		return p == "Succeeded" || p == "Failed"
	case nil, bool, int64:
		return false
	}
	unsupported("phase of type %T is unhashable", phase)
	return false
}

// InConditionSet is `value in set` for a condition type of any JSON type, set being one of the
// condition-type sets above.
func InConditionSet(set map[string]bool, value any) bool {
	switch v := value.(type) {
	case string:
		return set[v]
	case nil, bool, int64:
		return false
	}
	unsupported("condition type of type %T is unhashable", value)
	return false
}

// IsSidecar reports a restartable init container (restartPolicy Always).
func IsSidecar(container *Obj) bool {
	p, ok := container.Get("restartPolicy").(string)
	return ok && p == "Always"
}

// IsStatic reports a pod from a file or http source (pod_json.is_static).
func IsStatic(pod *Obj) bool {
	source := asObj(asObj(pod.Get("metadata"), "metadata").Get("annotations"), "annotations").Get(ConfigSourceAnnotation)
	if source == nil {
		return false
	}
	s, ok := source.(string)
	return !ok || s != "api"
}

// RestartPolicy is the pod's restart policy, Always when unset (str() of what the spec holds).
func RestartPolicy(pod *Obj) string {
	policy := asObj(pod.Get("spec"), "spec").Get("restartPolicy")
	if !Truthy(policy) {
		return "Always"
	}
	return pyStr(policy)
}

// StateOf is a container status's state: "running", "waiting", "terminated", or "" for a status
// (or a nil one) without a state (Python's None).
func StateOf(status *Obj) string {
	state := asObj(status.Get("state"), "container state")
	// One pass over the state's keys (it has one, as a rule) for the three Gets, in their order
	// of precedence.
	var running, terminated, waiting bool
	for i, key := range state.Keys() {
		if state.vals[i] == nil {
			continue
		}
		switch key {
		case "running":
			running = true
		case "terminated":
			terminated = true
		case "waiting":
			waiting = true
		}
	}
	switch {
	case running:
		return "running"
	case terminated:
		return "terminated"
	case waiting:
		return "waiting"
	}
	return ""
}

// LastTerminated is a container status's lastState.terminated when truthy, else nil (None).
func LastTerminated(status *Obj) any {
	last := asObj(status.Get("lastState"), "lastState").Get("terminated")
	if Truthy(last) {
		return last
	}
	return nil
}

// ExitCode is int() of a container status's state.terminated.exitCode, 0 when missing.
func ExitCode(status *Obj) int64 {
	terminated := asObj(asObj(status.Get("state"), "container state").Get("terminated"), "terminated state")
	code, ok := terminated.Lookup("exitCode")
	if !ok {
		return 0
	}
	return PyInt(code)
}

// checkedStatuses is by_name's walk over a list of statuses: each must be an object with a
// hashable name. Lookups go through lastNamedIn, so the list itself is kept.
func checkedStatuses(v any, what string) []any {
	items := asList(v, what)
	for _, item := range items {
		s, ok := item.(*Obj)
		if !ok {
			unsupported("an item of %s is a %T", what, item)
		}
		name, found := s.Lookup("name")
		if !found {
			unsupported("an item of %s has no name", what)
		}
		checkHashable(name, "a name")
	}
	return items
}

// statusesOf is checkedStatuses as a list of objects (the status manager uses it).
func statusesOf(v any, what string) []*Obj {
	items := checkedStatuses(v, what)
	if len(items) == 0 {
		return nil
	}
	out := make([]*Obj, len(items))
	for i, item := range items {
		out[i] = item.(*Obj)
	}
	return out
}

// lastNamedIn is by_name(list).get(name) over a list statusesOf has checked.
func lastNamedIn(list []any, name string) *Obj {
	for i := len(list) - 1; i >= 0; i-- {
		s := list[i].(*Obj)
		if n, ok := s.Get("name").(string); ok && n == name {
			return s
		}
	}
	return nil
}

// containersOf is a spec's container list, each an object with a string name (a name of any other
// type is not covered).
func containersOf(v any, what string) []*Obj {
	items := asList(v, what)
	if len(items) == 0 {
		return nil
	}
	out := make([]*Obj, len(items))
	for i, item := range items {
		c, ok := item.(*Obj)
		if !ok {
			unsupported("an item of %s is a %T", what, item)
		}
		name, found := c.Lookup("name")
		if !found {
			unsupported("an item of %s has no name", what)
		}
		if _, ok := name.(string); !ok {
			unsupported("a container of %s has a name that is not a string", what)
		}
		out[i] = c
	}
	return out
}

// lastNamed is by_name(list).get(name): the last item named name, or nil.
func lastNamed(list []*Obj, name string) *Obj {
	for i := len(list) - 1; i >= 0; i-- {
		if n, ok := list[i].Get("name").(string); ok && n == name {
			return list[i]
		}
	}
	return nil
}

// lastNamedOf is by_name(first + second).get(name): the last of the second list, else of the first.
func lastNamedOf(first, second []*Obj, name string) *Obj {
	if s := lastNamed(second, name); s != nil {
		return s
	}
	return lastNamed(first, name)
}

// nameOf is the (string) name of a container or of a status generation built.
func nameOf(c *Obj) string {
	n, _ := c.Get("name").(string)
	return n
}

// namesOf is the names of containers containersOf has checked.
func namesOf(containers []*Obj) []string {
	if len(containers) == 0 {
		return nil
	}
	names := make([]string, len(containers))
	for i, c := range containers {
		names[i] = nameOf(c)
	}
	return names
}

// replaceOrAppendCondition puts cond where a condition of its type is, or at the end.
func replaceOrAppendCondition(conditions []any, cond *Obj) []any {
	for i, existing := range conditions {
		if Equal(existing.(*Obj).Get("type"), cond.Get("type")) {
			conditions[i] = cond
			return conditions
		}
	}
	return append(conditions, cond)
}

// hasAnyRegularContainerStarted: some regular container is running or terminated now, by the
// statuses first + second.
func hasAnyRegularContainerStarted(gp *genPod, first, second []*Obj) bool {
	if len(first) == 0 && len(second) == 0 {
		return false
	}
	for _, name := range gp.names {
		switch StateOf(lastNamedOf(first, second, name)) {
		case "running", "terminated":
			return true
		}
	}
	return false
}
