package foldcore

import (
	"bytes"
	"testing"
)

func TestAppendVersion(t *testing.T) {
	v := &Version{
		UID: "u-1", Namespace: "default", Name: "web\u00e9", Node: "n\"1", Version: 3,
		Status:                     ObjOf(parseForTest(t, `{"phase":"Running","conditions":[]}`)),
		CouldHaveRunningContainers: true, Static: true, MirrorUID: "m-1", Deleting: true,
		Cause: Cause{Kind: "pleg:ContainerDied", Topic: "pleg", Partition: 1, Offset: 42, TsMs: 1700000000000},
		TsMs:  1700000000000, Rules: 1,
	}
	want := `{"uid":"u-1","namespace":"default","name":"web` + "\u00e9" + `","node":"n\"1","version":3,` +
		`"status":{"phase":"Running","conditions":[]},"could_have_running_containers":true,"finished":false,` +
		`"static":true,"mirror_uid":"m-1","deleting":true,"cause":{"type":"pleg:ContainerDied","topic":"pleg",` +
		`"partition":1,"offset":42,"ts_ms":1700000000000},"ts_ms":1700000000000,"rules":1}`
	if got := string(AppendVersion([]byte("x"), v)); got != "x"+want {
		t.Errorf("AppendVersion\n got %s\nwant x%s", got, want)
	}
	v.MirrorUID = nil
	if got := string(AppendVersion(nil, v)); !bytes.Contains([]byte(got), []byte(`"mirror_uid":null,`)) {
		t.Errorf("a missing mirror UID is not null: %s", got)
	}
}

// versionFromLine reads a pod-status-history line back into a Version.
func versionFromLine(t *testing.T, line []byte) *Version {
	o := ObjOf(parseForTest(t, string(line)))
	c := ObjOf(o.Get("cause"))
	return &Version{
		UID: o.Get("uid").(string), Namespace: o.Get("namespace").(string), Name: o.Get("name").(string),
		Node: o.Get("node").(string), Version: o.Get("version").(int64), Status: ObjOf(o.Get("status")),
		CouldHaveRunningContainers: o.Get("could_have_running_containers").(bool),
		Finished:                   o.Get("finished").(bool), Static: o.Get("static").(bool),
		MirrorUID: o.Get("mirror_uid"), Deleting: o.Get("deleting").(bool),
		Cause: Cause{Kind: c.Get("type").(string), Topic: c.Get("topic").(string),
			Partition: c.Get("partition").(int64), Offset: c.Get("offset").(int64), TsMs: c.Get("ts_ms").(int64)},
		TsMs: o.Get("ts_ms").(int64), Rules: o.Get("rules").(int64),
	}
}

// TestVersionVectors rebuilds each line of the file FOLDCORE_VECTORS_VERSION
// names (pod-status-history values as the Python fold encodes them, one a
// line) with AppendVersion and compares the bytes.
func TestVersionVectors(t *testing.T) {
	sc := vectorLines(t, "FOLDCORE_VECTORS_VERSION")
	n := 0
	var buf []byte
	for sc.Scan() {
		line := sc.Bytes()
		n++
		buf = AppendVersion(buf[:0], versionFromLine(t, line))
		if !bytes.Equal(buf, line) {
			t.Fatalf("line %d\n got %s\nwant %s", n, buf, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d history lines rebuilt", n)
}
