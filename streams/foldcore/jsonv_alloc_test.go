package foldcore

import "testing"

// Tests of the object allocation (jsonv_alloc.go) and the lookups and comparisons that rely on
// objects built alike.

func TestNewObjHasTheRoomAskedFor(t *testing.T) {
	for capacity := 0; capacity <= 20; capacity++ {
		o := NewObj(capacity)
		if cap(o.keys) < capacity || cap(o.vals) < capacity || o.Len() != 0 {
			t.Errorf("NewObj(%d): room %d/%d", capacity, cap(o.keys), cap(o.vals))
		}
		for i := 0; i < capacity+3; i++ { // and grows past it
			o.Set(string(rune('a'+i)), int64(i))
		}
		if o.Len() != capacity+3 || o.Get("a") != int64(0) {
			t.Errorf("NewObj(%d) grown: %s", capacity, Encode(nil, o))
		}
	}
	src := parseForTest(t, `{"a":1,"b":{"c":[2]}}`).(*Obj)
	c := src.Copy()
	c.Set("z", true)
	if string(Encode(nil, src)) != `{"a":1,"b":{"c":[2]}}` || string(Encode(nil, c)) != `{"a":1,"b":{"c":[2]},"z":true}` {
		t.Errorf("Copy: %s %s", Encode(nil, src), Encode(nil, c))
	}
	deep := DeepCopy(src).(*Obj)
	ObjOf(deep.Get("b")).Set("d", nil)
	if string(Encode(nil, src)) != `{"a":1,"b":{"c":[2]}}` {
		t.Errorf("DeepCopy shares: %s", Encode(nil, src))
	}
}

func TestLookupsAndComparisons(t *testing.T) {
	o := parseForTest(t, `{"":0,"state":1,"stare":2,"lastState":3}`).(*Obj)
	for key, want := range map[string]any{"": int64(0), "state": int64(1), "stare": int64(2), "lastState": int64(3), "stat": nil} {
		if got := o.Get(key); got != want {
			t.Errorf("Get(%q) = %v", key, got)
		}
		if got, _ := o.lookupAt(key, 1); got != want {
			t.Errorf("lookupAt(%q, 1) = %v", key, got)
		}
	}
	a := parseForTest(t, `{"x":[1,{"y":true}],"z":"s"}`)
	b := parseForTest(t, `{"z":"s","x":[1,{"y":1}]}`) // another order; True == 1
	if !Equal(a, b) || !Equal(a, a) || Equal(a, parseForTest(t, `{"x":[1,{"y":2}],"z":"s"}`)) {
		t.Error("Equal")
	}
	list := ListOf(ObjOf(a).Get("x"))
	if !Equal(list, list) || Equal(list, list[:1]) || !Equal([]any{}, []any{}) {
		t.Error("Equal on lists")
	}
	state := func(s string) string { return StateOf(parseForTest(t, s).(*Obj)) }
	if state(`{"state":{"waiting":{},"running":{}}}`) != "running" || state(`{"state":{"running":null,"terminated":{}}}`) != "terminated" ||
		state(`{"state":{"waiting":{}}}`) != "waiting" || state(`{"state":{}}`) != "" || state(`{}`) != "" {
		t.Error("StateOf")
	}
}

func TestParseIntoReusesTheTopObject(t *testing.T) {
	var top Obj
	first, err := parseInto([]byte(`{"a":1,"b":{"c":2}}`), &top)
	if err != nil || first != any(&top) {
		t.Fatalf("parseInto: %v %v", first, err)
	}
	inner := ObjOf(top.Get("b"))
	second, err := parseInto([]byte(`{"x":"y"}`), &top)
	if err != nil || second != any(&top) || string(Encode(nil, second)) != `{"x":"y"}` {
		t.Fatalf("parseInto again: %s %v", Encode(nil, second), err)
	}
	if string(Encode(nil, inner)) != `{"c":2}` { // objects below the top are the caller's to keep
		t.Errorf("inner object changed: %s", Encode(nil, inner))
	}
	if list, err := parseInto([]byte(`[{"a":1}]`), &top); err != nil || ListOf(list)[0] == any(&top) {
		t.Errorf("a top-level list: %v %v", list, err)
	}
}
