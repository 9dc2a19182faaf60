package foldcore

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestGenerateVectors replays recorded generate_api_status calls: FOLDCORE_VECTORS_GENERATE names
// JSON-lines files (joined by the path-list separator) of {"args": {pod, old, runtime, probes,
// reasons, pod_is_terminal}, "expect": <orjson bytes of the result>} or {"args", "error"} for a
// call where Python raised, which the port must give up on.
func TestGenerateVectors(t *testing.T) {
	paths := os.Getenv("FOLDCORE_VECTORS_GENERATE")
	if paths == "" {
		t.Skip("FOLDCORE_VECTORS_GENERATE not set")
	}
	var same, gaveUp, raised, unparsed int
	for _, path := range filepath.SplitList(paths) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReaderSize(f, 1<<20)
		for n := 1; ; n++ {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				switch checkGenerateVector(t, path, n, line) {
				case vectorSame:
					same++
				case vectorGaveUp:
					gaveUp++
				case vectorRaised:
					raised++
				case vectorUnparsed:
					unparsed++
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	t.Logf("identical: %d, gave up where Python gave a result: %d, gave up where Python raised: %d, not parsed (floats) or not objects where the signature wants one: %d",
		same, gaveUp, raised, unparsed)
}

type vectorOutcome int

const (
	vectorSame vectorOutcome = iota
	vectorGaveUp
	vectorRaised
	vectorUnparsed
	vectorFailed
)

func checkGenerateVector(t *testing.T, path string, n int, line []byte) vectorOutcome {
	t.Helper()
	v, err := Parse(line)
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			return vectorUnparsed
		}
		t.Fatalf("%s:%d: %v", path, n, err)
	}
	rec := v.(*Obj)
	args := rec.Get("args").(*Obj)
	for _, key := range [...]string{"old", "runtime", "probes", "reasons"} {
		if a := args.Get(key); a != nil && ObjOf(a) == nil {
			return vectorUnparsed // not an object: GenerateAPIStatus's signature cannot take it
		}
	}
	before := Encode(nil, args)
	status, reason := generateOrGiveUp(args)
	if after := Encode(nil, args); !bytes.Equal(before, after) {
		t.Errorf("%s:%d: the arguments changed", path, n)
		return vectorFailed
	}
	if _, raisedInPython := rec.Lookup("error"); raisedInPython {
		if status != nil {
			t.Errorf("%s:%d: Python raised %v, the port gave %s", path, n, rec.Get("error"), Encode(nil, status))
			return vectorFailed
		}
		return vectorRaised
	}
	if status == nil {
		t.Logf("%s:%d: gave up: %s", path, n, reason)
		return vectorGaveUp
	}
	if shared := sharedWithInputs(status, args); shared != "" {
		t.Errorf("%s:%d: the status's %s is an input's object", path, n, shared)
		return vectorFailed
	}
	want := rec.Get("expect").(string)
	if got := Encode(nil, status); string(got) != want {
		t.Errorf("%s:%d:\n got %s\nwant %s\nargs %s", path, n, got, want, Encode(nil, args))
		return vectorFailed
	}
	return vectorSame
}

// generateOrGiveUp runs GenerateAPIStatus over recorded arguments: the status, or nil and the
// reason it gave up.
func generateOrGiveUp(args *Obj) (status *Obj, reason string) {
	defer func() {
		if r := recover(); r != nil {
			status = nil
			if u, ok := r.(Unsupported); ok {
				reason = u.Reason
			} else {
				reason = "runtime panic: " + anyString(r)
			}
		}
	}()
	terminal, _ := args.Get("pod_is_terminal").(bool)
	return GenerateAPIStatus(args.Get("pod").(*Obj), ObjOf(args.Get("old")), ObjOf(args.Get("runtime")),
		ObjOf(args.Get("probes")), ObjOf(args.Get("reasons")), terminal), ""
}

func anyString(v any) string {
	if e, ok := v.(error); ok {
		return e.Error()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return "?"
}

// sharedWithInputs names the first of the objects a caller may change (the status, its lists'
// container statuses and its conditions) that is also an object of the inputs, or "".
func sharedWithInputs(status *Obj, args *Obj) string {
	inputs := map[*Obj]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case *Obj:
			inputs[x] = true
			for _, e := range x.Values() {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(args)
	if inputs[status] {
		return "top level"
	}
	for _, key := range [...]string{"containerStatuses", "initContainerStatuses", "conditions"} {
		for _, item := range ListOf(status.Get(key)) {
			if inputs[ObjOf(item)] {
				return key
			}
		}
	}
	return ""
}
