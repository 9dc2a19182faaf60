package foldcore

// Making the kubelet's pod conditions of one generated status. Generation builds them without
// times; the status manager then times each, and keeps the cached status's condition of the same
// type as it is where it would rebuild exactly that (isCanonicalCondition: same fields, a time,
// no probe time). With the cached conditions at hand, the maker hands out such a stored condition
// at once rather than build an equal one that the status manager drops (canonicalConditions keeps
// a condition that is its stored one). Stored conditions are never changed: they are shared.

// conditionMaker makes the conditions of one generated status; a nil maker builds every one anew.
type conditionMaker struct {
	stored [len(kubeletConditionTypes)]*Obj // the last cached condition of each type, or nil
}

// kubeletConditionTypes are the types of the conditions the maker makes.
var kubeletConditionTypes = [...]string{
	"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled",
}

// remember makes cm the maker for a status whose cached status has these conditions: for each
// type, the last condition of that type, as the status manager finds it (lastOfType).
func (cm *conditionMaker) remember(conditions []any) {
	for _, item := range conditions {
		if c, isObj := item.(*Obj); isObj && c != nil {
			if t, isStr := c.Get("type").(string); isStr {
				if i := kubeletConditionIndex(t); i >= 0 {
					cm.stored[i] = c
				}
			}
		}
	}
}

// kubeletConditionIndex is kind's place in kubeletConditionTypes, or -1.
func kubeletConditionIndex(kind string) int {
	for i, t := range kubeletConditionTypes {
		if t == kind {
			return i
		}
	}
	return -1
}

// previous is the last stored condition of type kind (a string), as the status manager finds it.
func (cm *conditionMaker) previous(kind any) *Obj {
	k, ok := kind.(string)
	if cm == nil || !ok {
		return nil
	}
	if i := kubeletConditionIndex(k); i >= 0 {
		return cm.stored[i]
	}
	return nil
}

// condition is a pod condition with its reason and message only when set (each a string, typed
// any so that constants are not boxed again): the stored one the status manager would keep, or
// a new one with room for the two times the status manager adds.
func (cm *conditionMaker) condition(kind, status, reason, message any) *Obj {
	var f fields
	f.add("type", kind)
	f.add("status", status)
	if reason != "" {
		f.add("reason", reason)
	}
	if message != "" {
		f.add("message", message)
	}
	keys, vals := f.keys[:f.n], f.vals[:f.n]
	if prev := cm.previous(kind); prev != nil && isCanonicalFields(prev, keys, vals) {
		return prev
	}
	return newObjOf(keys, vals, 2)
}

// conditionWith is condition with a message assembled in a buffer (empty: none), made a string
// only for a new condition.
func (cm *conditionMaker) conditionWith(kind, status, reason any, message []byte) *Obj {
	if len(message) == 0 {
		return cm.condition(kind, status, reason, "")
	}
	if prev := cm.previous(kind); prev != nil {
		if stored := prev.Get("message"); stored != nil {
			if s, ok := stored.(string); ok && s == string(message) {
				return cm.condition(kind, status, reason, stored)
			}
		}
	}
	return cm.condition(kind, status, reason, string(message))
}

// appendContainersMessage appends "containers with <what> status: [a b]", after ", " when dst
// holds a message already.
func appendContainersMessage(dst []byte, what string, names []string) []byte {
	if len(dst) > 0 {
		dst = append(dst, ", "...)
	}
	dst = append(dst, "containers with "...)
	dst = append(dst, what...)
	dst = append(dst, " status: ["...)
	for i, name := range names {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, name...)
	}
	return append(dst, ']')
}
