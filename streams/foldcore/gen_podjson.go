package foldcore

import (
	"strings"
	"time"
)

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
	switch {
	case state.Get("running") != nil:
		return "running"
	case state.Get("terminated") != nil:
		return "terminated"
	case state.Get("waiting") != nil:
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

// statusesOf is by_name's walk over a list of statuses (or containers): each must be an object
// with a hashable name. Lookups go through lastNamed, so only the list is kept.
func statusesOf(v any, what string) []*Obj {
	items := asList(v, what)
	if len(items) == 0 {
		return nil
	}
	out := make([]*Obj, len(items))
	for i, item := range items {
		s, ok := item.(*Obj)
		if !ok {
			unsupported("an item of %s is a %T", what, item)
		}
		name, found := s.Lookup("name")
		if !found {
			unsupported("an item of %s has no name", what)
		}
		checkHashable(name, "a name")
		out[i] = s
	}
	return out
}

// containersOf is a spec's container list, each an object with a string name (a name of any other
// type is not covered).
func containersOf(v any, what string) []*Obj {
	out := statusesOf(v, what)
	for _, c := range out {
		if _, ok := c.Get("name").(string); !ok {
			unsupported("a container of %s has a name that is not a string", what)
		}
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

// nameOf is a container's (string) name; containersOf has checked it.
func nameOf(c *Obj) string {
	n, _ := c.Get("name").(string)
	return n
}

// goList is Go's %s of a []string: [a b c].
func goList(names []string) string {
	return "[" + strings.Join(names, " ") + "]"
}

// condition is a pod condition with its reason and message only when set.
func condition(kind, status, reason, message string) *Obj {
	c := NewObj(4)
	c.Set("type", kind)
	c.Set("status", status)
	if reason != "" {
		c.Set("reason", reason)
	}
	if message != "" {
		c.Set("message", message)
	}
	return c
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

// hasAnyRegularContainerStarted: some regular container is running or terminated now.
func hasAnyRegularContainerStarted(pod *Obj, statuses []*Obj) bool {
	if len(statuses) == 0 {
		return false
	}
	for _, c := range containersOf(asObj(pod.Get("spec"), "spec").Get("containers"), "containers") {
		switch StateOf(lastNamed(statuses, nameOf(c))) {
		case "running", "terminated":
			return true
		}
	}
	return false
}
