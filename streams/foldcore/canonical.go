package foldcore

import "strings"

// The canonical form of a pod status (streams/canonical.py): normalized, and without a null, empty
// string or empty list anywhere, so two statuses are semantically equal (as Go's apimachinery
// sees them) exactly when they are Equal. The fold stores and publishes statuses in this form.

// semanticList and semanticObj are canonical.semantic: a new copy with every null, empty-string
// and empty-list field dropped from its objects. Empty objects stay (Go tells a set pointer to an
// empty struct from a nil one), and so do list items of any kind. Status generation and the
// status manager both use them, through put.
func semanticList(list []any) []any {
	out := make([]any, len(list))
	for i, item := range list {
		switch x := item.(type) {
		case []any:
			out[i] = semanticList(x)
		case *Obj:
			out[i] = semanticObj(x)
		default:
			out[i] = item
		}
	}
	return out
}

func semanticObj(o *Obj) *Obj {
	out := NewObj(o.Len())
	for i, key := range o.Keys() {
		if v, keep := semanticField(o.vals[i]); keep {
			out.appendNew(key, v) // o's keys are distinct
		}
	}
	return out
}

// semanticField is what canonical.put stores for value (a copy in canonical form of an object or
// a list), or keep false where the field is dropped (null, empty string, empty list). Scalars are
// returned as they are: boxed already.
func semanticField(value any) (v any, keep bool) {
	switch x := value.(type) {
	case nil:
		return nil, false
	case string:
		return value, x != ""
	case bool, int64:
		return value, true
	case *Obj:
		if x == nil { // None
			return nil, false
		}
		return semanticObj(x), true
	case []any:
		if len(x) == 0 {
			return nil, false
		}
		return semanticList(x), true
	}
	unsupported("value of type %T", value)
	return nil, false
}

// put is canonical.put: target[key] = semantic(value), or no key where semantic drops the field.
func put(target *Obj, key string, value any) {
	if v, keep := semanticField(value); keep {
		target.Set(key, v)
	}
}

// putNew is put for a key target does not hold.
func putNew(target *Obj, key string, value any) {
	if v, keep := semanticField(value); keep {
		target.appendNew(key, v)
	}
}

// isCanonical is is_canonical: whether semantic(value) would equal value (no null, empty string
// or empty list field anywhere), without building anything.
func isCanonical(value any) bool {
	switch v := value.(type) {
	case []any:
		for _, item := range v {
			switch item.(type) {
			case []any, *Obj:
				if !isCanonical(item) {
					return false
				}
			}
		}
	case *Obj:
		for _, item := range v.Values() {
			switch x := item.(type) {
			case nil:
				return false
			case string:
				if x == "" {
					return false
				}
			case []any:
				if len(x) == 0 || !isCanonical(x) {
					return false
				}
			case *Obj:
				if !isCanonical(x) {
					return false
				}
			}
		}
	}
	return true
}

// canonicalCondition is canonical_condition: cond in canonical form with lastTransitionTime
// transition (nil: a condition whose times the status manager does not keep): times in whole
// seconds, no empty field, and lastProbeTime, null unless set, last. cond may be changed, and may
// be what is returned.
func canonicalCondition(cond *Obj, transition any) *Obj {
	if !cond.Has("lastTransitionTime") && !cond.Has("lastProbeTime") && allNonEmptyStrings(cond) {
		// A generated condition (non-empty strings and no times yet) is canonical once its
		// times are added: in place, as nothing else holds it.
		if transition != nil {
			cond.appendNew("lastTransitionTime", truncateTime(transition))
		}
		cond.appendNew("lastProbeTime", nil)
		return cond
	}
	if transition != nil { // anything else takes the status manager's own steps
		cond.SetDefault("lastProbeTime", nil)
		cond.Set("lastTransitionTime", transition)
	}
	for _, t := range conditionTimes {
		if v, ok := cond.Lookup(t); ok {
			cond.Set(t, truncateTime(v))
		}
	}
	out := semanticObj(cond)
	out.SetDefault("lastProbeTime", nil)
	return out
}

func allNonEmptyStrings(o *Obj) bool {
	for _, v := range o.Values() {
		if s, ok := v.(string); !ok || s == "" {
			return false
		}
	}
	return true
}

// isCanonicalCondition is is_canonical_condition: whether stored is, field for field and in order,
// canonicalCondition(cond, its own lastTransitionTime): cond's fields (non-empty strings), then a
// set time in whole seconds and a null lastProbeTime. Such a stored condition has cond's status
// and keeps its time, so it is reused as it is.
func isCanonicalCondition(stored, cond *Obj) bool {
	return isCanonicalFields(stored, cond.Keys(), cond.Values())
}

// isCanonicalFields is isCanonicalCondition for a condition's keys and values.
func isCanonicalFields(stored *Obj, condKeys []string, condValues []any) bool {
	n := len(condKeys)
	if stored.Len() != n+2 {
		return false
	}
	keys, values := stored.Keys(), stored.Values()
	for i, key := range condKeys {
		want, ok := condValues[i].(string)
		if !ok || want == "" || keys[i] != key {
			return false
		}
		if have, isStr := values[i].(string); !isStr || have != want {
			return false
		}
	}
	transition, ok := values[n].(string)
	return keys[n] == "lastTransitionTime" && ok && transition != "" &&
		strings.IndexByte(transition, '.') < 0 && keys[n+1] == "lastProbeTime" && values[n+1] == nil
}

// normalizeGenerated is normalize_generated: normalizeInPlace for a status that status generation
// built. Its regular container statuses are in name order already and its conditions are made
// canonical apart, so only container states (most need nothing) and the init order are left.
func normalizeGenerated(pf *podFacts, status *Obj) {
	budget := 0 // worked out for the first state that needs it
	for _, key := range [...]string{"containerStatuses", "initContainerStatuses"} {
		for _, item := range asList(status.Get(key), key) {
			cs := objItem(item, key)
			for i, which := range cs.keys { // state and lastState, read in one pass
				if which != "state" && which != "lastState" {
					continue
				}
				value := cs.vals[i]
				if !Truthy(value) {
					continue
				}
				state := asObj(value, which)
				if !mayNeedNormalizing(state) {
					continue
				}
				if budget == 0 {
					budget = pf.messageBudget()
				}
				if normalized := normalizedState(state, budget, true); normalized != state {
					cs.vals[i] = normalized // cs.Set(which, normalized)
				}
			}
		}
	}
	if list := status.Get("initContainerStatuses"); Truthy(list) {
		status.Set("initContainerStatuses", sortedInSpecOrder(pf.pod, asList(list, "initContainerStatuses")))
	}
}

// mayNeedNormalizing is false for a state normalizedState surely leaves as it is: no terminated
// key, and no running state with a fractional startedAt.
func mayNeedNormalizing(state *Obj) bool {
	var running any
	for i, key := range state.keys {
		switch key {
		case "terminated":
			return true
		case "running":
			running = state.vals[i]
		}
	}
	if !Truthy(running) {
		return false
	}
	started, ok := asObj(running, "running state").Get("startedAt").(string)
	return ok && strings.IndexByte(started, '.') >= 0
}
