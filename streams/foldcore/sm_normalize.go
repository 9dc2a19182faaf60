package foldcore

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// The status manager's normalizeStatus (streams/canonical.py): termination messages cut to a byte
// budget, times in whole seconds, container statuses sorted.

// maxTerminationMessageBytes is the kubelet's MaxPodTerminationMessageLogLength.
const maxTerminationMessageBytes = 12288

// containerLists are the status fields that hold container statuses.
var containerLists = [...]string{"containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"}

// conditionTimes are the condition fields normalization truncates to seconds.
var conditionTimes = [...]string{"lastProbeTime", "lastTransitionTime"}

// truncateTime is truncate_time: an RFC 3339 string in whole seconds; any other value as it is.
func truncateTime(v any) any {
	s, ok := v.(string)
	if !ok || strings.IndexByte(s, '.') < 0 {
		return v
	}
	return truncateTimeString(s)
}

// truncateTimeString drops every match of `\.\d+(?=Z|[+-]\d\d:\d\d$)` from s. Python's \d takes any
// Unicode decimal digit, so a non-ASCII string is not covered.
func truncateTimeString(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			unsupported("non-ASCII time %q", s)
		}
	}
	var out []byte
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '.' {
			continue
		}
		end := i + 1
		for end < len(s) && isASCIIDigit(s[end]) {
			end++
		}
		// Backtracking \d+ cannot help: the lookahead never matches at a digit.
		if end > i+1 && zoneFollows(s, end) {
			out = append(out, s[last:i]...)
			last = end
			i = end - 1
		}
	}
	if out == nil {
		return s
	}
	return string(append(out, s[last:]...))
}

// zoneFollows is the lookahead `Z|[+-]\d\d:\d\d$` at position p, with Python's `$` (the end, or
// just before a final newline).
func zoneFollows(s string, p int) bool {
	if p < len(s) && s[p] == 'Z' {
		return true
	}
	if p+6 > len(s) || (s[p] != '+' && s[p] != '-') {
		return false
	}
	if !isASCIIDigit(s[p+1]) || !isASCIIDigit(s[p+2]) || s[p+3] != ':' || !isASCIIDigit(s[p+4]) || !isASCIIDigit(s[p+5]) {
		return false
	}
	return p+6 == len(s) || (p+7 == len(s) && s[p+6] == '\n')
}

func isASCIIDigit(c byte) bool { return '0' <= c && c <= '9' }

// truncateBytes cuts text to at most limit bytes of UTF-8, dropping a character the cut splits
// (Python's decode(errors="ignore") of the cut bytes).
func truncateBytes(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	k := limit
	for k > 0 && text[k]&0xC0 == 0x80 { // back to the start of the split character
		k--
	}
	return text[:k]
}

// messageBudget is message_budget: the termination message bytes each container may keep.
func messageBudget(pod *Obj) int {
	spec := asObj(pod.Get("spec"), "spec")
	count := 0
	for _, key := range [...]string{"containers", "initContainers", "ephemeralContainers"} {
		count += pyLen(spec.Get(key), key)
	}
	if count > 0 {
		return maxTerminationMessageBytes / count
	}
	return maxTerminationMessageBytes
}

// pyLen is Python's len(v or []): a list's items, an object's keys, a string's characters.
func pyLen(v any, what string) int {
	switch x := v.(type) {
	case []any:
		return len(x)
	case *Obj:
		return x.Len()
	case string:
		return utf8.RuneCountInString(x)
	}
	if Truthy(v) {
		unsupported("len() of %s, a %T", what, v)
	}
	return 0
}

// normalizeInPlace is normalize_in_place (normalizeStatus): status, its lists, container statuses
// and conditions are changed in place; a container state that needs a change is replaced by a
// changed copy, since states may be shared with the cached status.
func normalizeInPlace(pf *podFacts, status *Obj) *Obj {
	budget := pf.messageBudget()
	for _, key := range containerLists {
		for _, cs := range asList(status.Get(key), key) {
			normalizeContainerStatus(objItem(cs, key), budget)
		}
	}
	if start, ok := status.Lookup("startTime"); ok {
		status.Set("startTime", truncateTime(start))
	}
	for _, cond := range asList(status.Get("conditions"), "conditions") {
		c := objItem(cond, "conditions")
		for _, t := range conditionTimes {
			if v, ok := c.Lookup(t); ok {
				c.Set(t, truncateTime(v))
			}
		}
	}
	for _, key := range [...]string{"containerStatuses", "ephemeralContainerStatuses"} {
		if list := status.Get(key); Truthy(list) {
			status.Set(key, sortedByName(asList(list, key)))
		}
	}
	if list := status.Get("initContainerStatuses"); Truthy(list) {
		status.Set("initContainerStatuses", sortedInSpecOrder(pf.pod, asList(list, "initContainerStatuses")))
	}
	return status
}

// normalizeContainerStatus normalizes the states of one container status (never the states
// themselves: a changed state is a copy).
func normalizeContainerStatus(cs *Obj, budget int) {
	for _, which := range [...]string{"state", "lastState"} {
		state := asObj(cs.Get(which), which)
		if state.Len() == 0 {
			continue // `cs.get(which) or {}`: an empty state has nothing to change
		}
		if normalized := normalizedState(state, budget, false); normalized != state {
			cs.Set(which, normalized)
		}
	}
}

// normalizedState is _normalized_state: state itself when nothing changes, else a changed copy
// with its terminated message cut and its times in seconds. dropEmpty drops a message the cut
// left empty.
func normalizedState(state *Obj, budget int, dropEmpty bool) *Obj {
	original := state
	if terminated := state.Get("terminated"); Truthy(terminated) {
		t := asObj(terminated, "terminated state")
		changed := t
		if message, ok := t.Get("message").(string); ok {
			if cut := truncateBytes(message, budget); cut != message {
				changed = changed.Copy()
				changed.Set("message", cut)
				if dropEmpty && cut == "" {
					changed.Delete("message")
				}
			}
		}
		for _, key := range [...]string{"startedAt", "finishedAt"} {
			if v, ok := t.Lookup(key); ok {
				if s, isStr := v.(string); isStr {
					if value := truncateTime(s).(string); value != s {
						if changed == t {
							changed = t.Copy()
						}
						changed.Set(key, value)
					}
				}
			}
		}
		if changed != t {
			state = state.Copy()
			state.Set("terminated", changed)
		}
	}
	if running := state.Get("running"); Truthy(running) {
		r, ok := running.(*Obj)
		if !ok {
			if pyContains(running, "startedAt") {
				unsupported("running state is a %T", running) // Python indexes it with a string
			}
			return state
		}
		if v, found := r.Lookup("startedAt"); found {
			if s, isStr := v.(string); isStr {
				if value := truncateTime(s).(string); value != s {
					nr := r.Copy()
					nr.Set("startedAt", value)
					if state == original {
						state = state.Copy()
					}
					state.Set("running", nr)
				}
			}
		}
	}
	return state
}

// pyContains is Python's `key in v` for a value that is not an object: a substring of a string,
// an item of a list; anything else cannot be searched.
func pyContains(v any, key string) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, key)
	case []any:
		for _, item := range x {
			if Equal(item, key) {
				return true
			}
		}
		return false
	}
	unsupported("`in` on a %T", v)
	return false
}

// objItem is a list item Python reads with .get or [...]: it must be an object.
func objItem(v any, what string) *Obj {
	if o, ok := v.(*Obj); ok && o != nil {
		return o
	}
	notAnItem(v, what) // apart, so that objItem is inlined
	return nil
}

func notAnItem(v any, what string) {
	unsupported("an item of %s is a %T, not an object", what, v)
}

// stringName is item["name"] where Python uses it as a sort key or a dict key; names of other
// types are not covered.
func stringName(v any, what string) string {
	name, ok := objItem(v, what).Lookup("name")
	if !ok {
		unsupported("an item of %s has no name", what)
	}
	s, isStr := name.(string)
	if !isStr {
		unsupported("an item of %s has a %T name", what, name)
	}
	return s
}

// sortedByName is sorted(list, key=name): a new list, stable.
func sortedByName(list []any) []any {
	names := make([]string, len(list))
	for i, s := range list {
		names[i] = stringName(s, "container statuses")
	}
	idx := make([]int, len(list))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return names[idx[a]] < names[idx[b]] })
	out := make([]any, len(list))
	for i, j := range idx {
		out[i] = list[j]
	}
	return out
}

// sortedInSpecOrder is init container statuses sorted (stably, in a new list) by their container's
// position in the spec; names the spec lacks go last. A repeated spec name takes its last position.
func sortedInSpecOrder(pod *Obj, list []any) []any {
	order := map[string]int{}
	spec := asObj(pod.Get("spec"), "spec")
	for i, c := range asList(spec.Get("initContainers"), "initContainers") {
		order[stringName(c, "initContainers")] = i
	}
	keys := make([]int, len(list))
	for i, s := range list {
		pos, ok := order[stringName(s, "initContainerStatuses")]
		if !ok {
			pos = len(order)
		}
		keys[i] = pos
	}
	idx := make([]int, len(list))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
	out := make([]any, len(list))
	for i, j := range idx {
		out[i] = list[j]
	}
	return out
}
