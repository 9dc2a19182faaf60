package foldcore

import "testing"

// Table tests of the reuse of stored objects (gen_reuse.go, gen_condition_maker.go): a stored
// object comes back only when it is, key for key and in order, what would be built.

func TestFieldsReuseOnlyIdenticalObjects(t *testing.T) {
	var f fields
	f.add("exitCode", int64(1))
	f.put("reason", "")     // dropped
	f.put("message", "x")   // kept
	f.put("startedAt", nil) // dropped
	cases := []struct {
		stored string
		reused bool
	}{
		{`{"exitCode":1,"message":"x"}`, true},
		{`{"message":"x","exitCode":1}`, false},    // the order differs
		{`{"exitCode":true,"message":"x"}`, false}, // True == 1, but encodes otherwise
		{`{"exitCode":1,"message":"x","reason":"r"}`, false},
		{`{"exitCode":1}`, false},
		{`[1]`, false},
	}
	for _, c := range cases {
		stored := parseForTest(t, c.stored)
		got := f.objOr(stored)
		if reused := any(got) == stored; reused != c.reused {
			t.Errorf("objOr(%s): reused %v, want %v", c.stored, reused, c.reused)
		}
		if string(Encode(nil, got)) != `{"exitCode":1,"message":"x"}` {
			t.Errorf("objOr(%s) = %s", c.stored, Encode(nil, got))
		}
	}
	list := parseForTest(t, `[]`)
	if identical(list, list) || identical(nil, "") || !identical("a", "a") || identical(int64(0), false) {
		t.Error("identical")
	}
	empty := NewObj(0)
	if emptyObjOr(empty) != empty || emptyObjOr(parseForTest(t, `{"a":1}`)) == nil || emptyObjOr(nil).Len() != 0 {
		t.Error("emptyObjOr")
	}
}

func TestConditionMakerReusesWhatTheStatusManagerKeeps(t *testing.T) {
	stored := ListOf(parseForTest(t, `[`+
		`{"type":"Ready","status":"False","reason":"ContainersNotReady","message":"containers with unready status: [a]","lastTransitionTime":"2026-01-01T10:00:00Z","lastProbeTime":null},`+
		`{"type":"PodScheduled","status":"True","lastTransitionTime":"2026-01-01T10:00:00.5Z","lastProbeTime":null},`+
		`{"type":"Initialized","status":"True","lastTransitionTime":"2026-01-01T10:00:00Z"},`+
		`{"type":"ContainersReady","status":"True","lastTransitionTime":"2026-01-01T10:00:00Z","lastProbeTime":null},`+
		`{"type":"ContainersReady","status":"False","lastTransitionTime":"2026-01-01T10:00:00Z","lastProbeTime":null}]`))
	var cm conditionMaker
	cm.remember(stored)
	message := appendContainersMessage(nil, "unready", []string{"a"})
	if got := cm.conditionWith("Ready", "False", ContainersNotReady, message); got != stored[0] {
		t.Errorf("Ready: a new %s", Encode(nil, got))
	}
	other := appendContainersMessage(nil, "unready", []string{"b"})
	if got := cm.conditionWith("Ready", "False", ContainersNotReady, other); got == stored[0] ||
		string(Encode(nil, got)) != `{"type":"Ready","status":"False","reason":"ContainersNotReady","message":"containers with unready status: [b]"}` {
		t.Errorf("Ready, another message: %s", Encode(nil, got))
	}
	for _, kind := range []string{"PodScheduled", "Initialized"} { // a fractional time; no probe time
		if got := cm.condition(kind, "True", "", ""); got == stored[1] || got == stored[2] || cap(got.keys) < 4 {
			t.Errorf("%s: reused a condition the status manager rebuilds", kind)
		}
	}
	if got := cm.condition("ContainersReady", "False", "", ""); got != stored[4] { // the last of its type
		t.Errorf("ContainersReady: %s", Encode(nil, got))
	}
	var none *conditionMaker
	if got := none.condition("Ready", "True", "", ""); string(Encode(nil, got)) != `{"type":"Ready","status":"True"}` {
		t.Errorf("no maker: %s", Encode(nil, got))
	}
}

func TestIPEntriesReuseTheSameList(t *testing.T) {
	stored := parseForTest(t, `[{"ip":"10.0.0.1"},{"ip":"fd::1"}]`)
	if got := ipEntries([]any{"10.0.0.1", "fd::1", "x"}, stored); !sameList(got, stored) {
		t.Errorf("not reused: %s", Encode(nil, got))
	}
	for _, ips := range [][]any{{"10.0.0.1"}, {"10.0.0.1", "fd::2"}, {"fd::1", "10.0.0.1"}} {
		if got := ipEntries(ips, stored); sameList(got, stored) {
			t.Errorf("%v: reused %s", ips, Encode(nil, stored))
		}
	}
	if got := Encode(nil, ipEntries([]any{"", nil}, nil)); string(got) != `[{},{}]` {
		t.Errorf("empty addresses: %s", got)
	}
}

func sameList(a, b any) bool {
	x, y := ListOf(a), ListOf(b)
	return len(x) > 0 && len(x) == len(y) && &x[0] == &y[0]
}
