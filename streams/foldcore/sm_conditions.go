package foldcore

// The status manager's rules for pod conditions (streams/status_manager.py): their transition
// times, their canonical form, and whether two statuses' kubelet conditions match.

// timedConditionTypes are the condition types whose lastTransitionTime the status manager keeps
// (updateLastTransitionTime): the kubelet-owned and shared ones, and PodHasNetwork.
var timedConditionTypes = [...]string{
	"PodScheduled", "Ready", "Initialized", "ContainersReady", "PodReadyToStartContainers",
	"DisruptionTarget", "PodHasNetwork",
}

// timedIndex is kind's place in timedConditionTypes, or -1.
func timedIndex(kind string) int {
	for i, t := range timedConditionTypes {
		if t == kind {
			return i
		}
	}
	return -1
}

// isTimed is `kind in` the timed types for a condition type of any JSON type (a list or object
// cannot be hashed: Python raises).
func isTimed(kind any) bool {
	switch k := kind.(type) {
	case string:
		return timedIndex(k) >= 0
	case nil, bool, int64:
		return false
	}
	unsupported("condition type of type %T is unhashable", kind)
	return false
}

// conditionIndex is a status's conditions as the status manager reads them, {c.get("type"): c
// for c in conditions}, for the timed types: the last condition of each.
type conditionIndex struct {
	last [len(timedConditionTypes)]*Obj
}

// indexConditions indexes status's conditions, each checked to be an object with a hashable type.
func indexConditions(status *Obj) conditionIndex {
	var index conditionIndex
	for _, item := range asList(status.Get("conditions"), "conditions") {
		kind := objItem(item, "conditions").Get("type")
		checkHashable(kind, "a condition type")
		if k, ok := kind.(string); ok {
			if i := timedIndex(k); i >= 0 {
				index.last[i] = item.(*Obj)
			}
		}
	}
	return index
}

// lastOfType is the last condition of the timed type kind, or nil.
func (index *conditionIndex) lastOfType(kind string) *Obj {
	if i := timedIndex(kind); i >= 0 {
		return index.last[i]
	}
	return nil
}

// ownedConditionsMatch is _owned_conditions_match: every kubelet-owned or shared condition of new
// is in old with the same status, reason and message (times are ignored).
func ownedConditionsMatch(old, new *Obj) bool {
	oldConditions := indexConditions(old)
	for _, item := range asList(new.Get("conditions"), "conditions") {
		cond := objItem(item, "conditions")
		kind := cond.Get("type")
		if !InConditionSet(KubeletOwnedConditions, kind) && !InConditionSet(SharedConditions, kind) {
			continue
		}
		before := oldConditions.lastOfType(kind.(string))
		if before != nil && (before == cond || Equal(before, cond)) {
			continue
		}
		if before == nil {
			return false
		}
		for _, field := range [...]string{"status", "reason", "message"} {
			if !Equal(smGetOr(before, field, ""), smGetOr(cond, field, "")) {
				return false
			}
		}
	}
	return true
}

// smGetOr is Python's o.get(key, fallback).
func smGetOr(o *Obj, key string, fallback any) any {
	if v, ok := o.Lookup(key); ok {
		return v
	}
	return fallback
}

// updateLastTransitionTimes is update_last_transition_times, in place on new's conditions: a
// condition keeps its old time while its status stays; otherwise it gets now.
func updateLastTransitionTimes(old, new *Obj, now any) {
	oldConditions := indexConditions(old)
	for _, item := range asList(new.Get("conditions"), "conditions") {
		cond := objItem(item, "conditions")
		if !isTimed(cond.Get("type")) {
			continue
		}
		cond.SetDefault("lastProbeTime", nil)
		cond.Set("lastTransitionTime", transitionTime(&oldConditions, cond, now))
	}
}

// transitionTime is _transition_time for a condition of a timed (string) type.
func transitionTime(oldConditions *conditionIndex, cond *Obj, now any) any {
	previous := oldConditions.lastOfType(cond.Get("type").(string))
	if previous != nil && Equal(previous.Get("status"), cond.Get("status")) {
		if kept := previous.Get("lastTransitionTime"); Truthy(kept) {
			return kept
		}
	}
	return now
}

// canonicalConditions is _canonical_conditions, in place: updateLastTransitionTimes, normalized
// and in canonical form, condition by condition. A timed condition old holds in exactly the
// canonical form it would get is that stored object itself, shared (stored statuses are never
// changed); so is a condition of conditions that is old's own (generateForFold took it from old
// only where this rule keeps it).
func canonicalConditions(old *Obj, conditions []any, now any) {
	oldConditions := indexConditions(old)
	for i, item := range conditions {
		cond := objItem(item, "conditions")
		kind := cond.Get("type")
		if !isTimed(kind) {
			conditions[i] = canonicalCondition(cond, nil)
			continue
		}
		previous := oldConditions.lastOfType(kind.(string))
		switch {
		case previous == nil:
			conditions[i] = canonicalCondition(cond, now)
		case previous == cond: // generation took it from old as it is (conditionMaker)
		case isCanonicalCondition(previous, cond): // the same status: it keeps its time
			conditions[i] = previous
		default:
			conditions[i] = canonicalCondition(cond, transitionTime(&oldConditions, cond, now))
		}
	}
}
