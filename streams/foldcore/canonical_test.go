package foldcore

import "testing"

// Expected values in these tables come from the Python functions of streams/canonical.py.

func TestTruncateTime(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2026-01-01T10:00:00.123Z", "2026-01-01T10:00:00Z"},
		{"2026-01-01T10:00:00Z", "2026-01-01T10:00:00Z"},
		{"2026-01-01T10:00:00.5+01:00", "2026-01-01T10:00:00+01:00"},
		{"2026-01-01T10:00:00.5+01:00\n", "2026-01-01T10:00:00+01:00\n"},
		{"2026-01-01T10:00:00.5+01:00\n\n", "2026-01-01T10:00:00.5+01:00\n\n"},
		{"2026-01-01T10:00:00.5+0100", "2026-01-01T10:00:00.5+0100"},
		{"a.1Z.22Z", "aZZ"},
		{".Z", ".Z"},
		{"x.1-00:00", "x-00:00"},
		{"x.1-00:00y", "x.1-00:00y"},
		{"1.2.3Z", "1.2Z"},
		{"x.12", "x.12"},
	} {
		if got := truncateTime(tc.in); got != tc.want {
			t.Errorf("truncateTime(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := truncateTime(int64(5)); got != int64(5) {
		t.Errorf("truncateTime(5) = %v", got)
	}
}

func TestTruncateBytes(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"abc", 2, "ab"},
		{"abc", 3, "abc"},
		{"ééé", 5, "éé"},
		{"€x", 2, ""},
		{"€x", 3, "€"},
		{"😀", 3, ""},
		{"", 0, ""},
		{"ab", 0, ""},
	} {
		if got := truncateBytes(tc.in, tc.limit); got != tc.want {
			t.Errorf("truncateBytes(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

// smTriple parses a JSON list of three values.
func smTriple(t *testing.T, line string) []any {
	t.Helper()
	v, err := Parse([]byte(line))
	if err != nil || len(ListOf(v)) != 3 {
		t.Fatalf("bad case %s: %v", line, err)
	}
	return ListOf(v)
}

// TestSemantic: [value, semantic(value), is_canonical(value)].
func TestSemantic(t *testing.T) {
	for _, line := range []string{
		`[{"a":null,"b":"","c":[],"d":{},"e":0,"f":false,"g":[null,"",[],{"x":""}],"h":{"i":[],"j":"k"}},{"d":{},"e":0,"f":false,"g":[null,"",[],{}],"h":{"j":"k"}},false]`,
		`[{"a":1},{"a":1},true]`,
		`[{"a":[{}]},{"a":[{}]},true]`,
		`[[{"a":null},null],[{},null],false]`,
		`[{"waiting":{}},{"waiting":{}},true]`,
	} {
		c := smTriple(t, line)
		var got any
		switch v := c[0].(type) {
		case *Obj:
			got = semanticObj(v)
		case []any:
			got = semanticList(v)
		}
		if string(Encode(nil, got)) != string(Encode(nil, c[1])) {
			t.Errorf("semantic(%s) = %s", Encode(nil, c[0]), Encode(nil, got))
		}
		if isCanonical(c[0]) != c[2].(bool) {
			t.Errorf("isCanonical(%s) != %v", Encode(nil, c[0]), c[2])
		}
	}
}

// TestCanonicalCondition: [condition, transition, canonical_condition(condition, transition)].
func TestCanonicalCondition(t *testing.T) {
	for _, line := range []string{
		`[{"type":"Ready","status":"True"},null,{"type":"Ready","status":"True","lastProbeTime":null}]`,
		`[{"type":"Ready","status":"True"},"2026-01-01T10:00:00.5Z",{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T10:00:00Z","lastProbeTime":null}]`,
		`[{"type":"Ready","status":"True","reason":""},"2026-01-01T10:00:00Z",{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T10:00:00Z","lastProbeTime":null}]`,
		`[{"type":"Ready","status":"True","lastProbeTime":"2026-01-01T10:00:00.5Z","message":null},null,{"type":"Ready","status":"True","lastProbeTime":"2026-01-01T10:00:00Z"}]`,
		`[{"type":"Ready","lastTransitionTime":"x.5Z","status":"True"},"2026-01-01T11:00:00Z",{"type":"Ready","lastTransitionTime":"2026-01-01T11:00:00Z","status":"True","lastProbeTime":null}]`,
	} {
		c := smTriple(t, line)
		if got := Encode(nil, canonicalCondition(ObjOf(c[0]), c[1])); string(got) != string(Encode(nil, c[2])) {
			t.Errorf("canonicalCondition(%s) = %s, want %s", line, got, Encode(nil, c[2]))
		}
	}
}

// TestIsCanonicalCondition: [stored, condition, is_canonical_condition(stored, condition)].
func TestIsCanonicalCondition(t *testing.T) {
	for _, line := range []string{
		`[{"type":"Ready","status":"True","lastTransitionTime":"T","lastProbeTime":null},{"type":"Ready","status":"True"},true]`,
		`[{"status":"True","type":"Ready","lastTransitionTime":"T","lastProbeTime":null},{"type":"Ready","status":"True"},false]`,
		`[{"type":"Ready","status":"True","lastTransitionTime":"T.5Z","lastProbeTime":null},{"type":"Ready","status":"True"},false]`,
		`[{"type":"Ready","status":"True","lastTransitionTime":"","lastProbeTime":null},{"type":"Ready","status":"True"},false]`,
		`[{"type":"Ready","status":"True","lastTransitionTime":"T","lastProbeTime":"P"},{"type":"Ready","status":"True"},false]`,
		`[{"type":"Ready","status":"","lastTransitionTime":"T","lastProbeTime":null},{"type":"Ready","status":""},false]`,
		`[{"type":"Ready","status":"False","lastTransitionTime":"T","lastProbeTime":null},{"type":"Ready","status":"True"},false]`,
	} {
		c := smTriple(t, line)
		if got := isCanonicalCondition(ObjOf(c[0]), ObjOf(c[1])); got != c[2].(bool) {
			t.Errorf("isCanonicalCondition(%s) = %v", line, got)
		}
	}
}
