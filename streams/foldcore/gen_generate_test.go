package foldcore

import (
	"bytes"
	"testing"
)

// Table tests of status generation; the expected statuses are what streams/status.py gives for
// the same arguments.

func TestGenerateAPIStatusTable(t *testing.T) {
	cases := []struct {
		name                               string
		pod, old, runtime, probes, reasons string
		terminal                           bool
		want                               string
	}{
		{"running with readiness probe success", `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","readinessProbe":{"exec":{}}}]}}`, `null`, `{"containers":[{"id":"x","name":"c","state":"running","created_at":"2026-01-01T10:00:00Z","started_at":"2026-01-01T10:00:00Z"}],"sandbox":{"id":"s","ready":true},"ips":["10.0.0.1","fd::1","x"],"host_ips":["1.2.3.4"]}`, `{"c":{"process://x":{"readiness":"Success"}}}`, `{}`, false,
			`{"hostIP":"1.2.3.4","hostIPs":[{"ip":"1.2.3.4"}],"podIP":"10.0.0.1","podIPs":[{"ip":"10.0.0.1"},{"ip":"fd::1"}],"qosClass":"BestEffort","containerStatuses":[{"name":"c","restartCount":0,"containerID":"process://x","state":{"running":{"startedAt":"2026-01-01T10:00:00Z"}},"lastState":{},"ready":true,"started":true}],"phase":"Running","conditions":[{"type":"PodReadyToStartContainers","status":"True"},{"type":"Initialized","status":"True"},{"type":"Ready","status":"True"},{"type":"ContainersReady","status":"True"},{"type":"PodScheduled","status":"True"}]}`},
		{"init done, regular crash looping, cached terminal phase kept", `{"metadata":{"name":"p"},"spec":{"restartPolicy":"OnFailure","initContainers":[{"name":"i"}],"containers":[{"name":"b","resources":{"limits":{"cpu":"1","memory":"1Gi"}}},{"name":"a"}]},"status":{"qosClass":"","conditions":[{"type":"Custom","status":"True"},{"type":"Ready","status":"True"}]}}`, `{"phase":"Failed","reason":"Evicted","containerStatuses":[{"name":"a","state":{"running":{}},"restartCount":2}],"conditions":[{"type":"DisruptionTarget","status":"True"}]}`, `{"containers":[{"id":"1","name":"i","state":"exited","exit_code":0,"created_at":"2026-01-01T09:00:00Z"},{"id":"2","name":"b","state":"exited","exit_code":1,"reason":"Error","created_at":"2026-01-01T10:00:00Z"},{"id":"3","name":"b","state":"exited","exit_code":2,"created_at":"2026-01-01T09:30:00Z"}],"runtime_type":"containerd"}`, `{}`, `{"b":{"reason":"CrashLoopBackOff","message":"back-off"},"i":{"reason":"X"}}`, false,
			`{"qosClass":"Burstable","initContainerStatuses":[{"name":"i","restartCount":0,"containerID":"containerd://1","state":{"terminated":{"exitCode":0,"containerID":"containerd://1"}},"lastState":{},"ready":true,"started":false}],"containerStatuses":[{"name":"a","state":{"waiting":{"reason":"PodInitializing"}},"lastState":{"terminated":{"exitCode":137,"reason":"ContainerStatusUnknown","message":"The container could not be located when the pod was deleted.  The container used to be Running"}},"ready":false,"restartCount":3,"started":false},{"name":"b","restartCount":0,"containerID":"containerd://2","state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off"}},"lastState":{"terminated":{"exitCode":1,"reason":"Error","containerID":"containerd://2"}},"ready":false,"started":false}],"reason":"Evicted","phase":"Failed","conditions":[{"type":"Custom","status":"True"},{"type":"DisruptionTarget","status":"True"},{"type":"PodReadyToStartContainers","status":"False"},{"type":"Initialized","status":"True"},{"type":"Ready","status":"False","reason":"PodFailed"},{"type":"ContainersReady","status":"False","reason":"PodFailed"},{"type":"PodScheduled","status":"True"}]}`},
		{"repeated container name, readiness gates, deleted", `{"metadata":{"name":"p","deletionTimestamp":"2026-01-01T10:00:00Z"},"spec":{"containers":[{"name":"a"},{"name":"a"}],"readinessGates":[{"conditionType":"g"},{"conditionType":1},{}]},"status":{"conditions":[{"type":true,"status":"False"},{"type":"g","status":"True"}]}}`, `{"containerStatuses":[{"name":"a","state":{"running":{}},"restartCount":"4"}]}`, `{"containers":[{"id":"x","name":"a","state":"running"}]}`, `{}`, `{}`, false,
			`{"qosClass":"BestEffort","containerStatuses":[{"name":"a","restartCount":0,"containerID":"process://x","state":{"running":{}},"lastState":{},"ready":true,"started":true},{"name":"a","restartCount":0,"containerID":"process://x","state":{"running":{}},"lastState":{},"ready":true,"started":true}],"phase":"Running","conditions":[{"type":true,"status":"False"},{"type":"g","status":"True"},{"type":"PodReadyToStartContainers","status":"False"},{"type":"Initialized","status":"True"},{"type":"Ready","status":"False","reason":"ReadinessGatesNotReady","message":"the status of pod readiness gate \"1\" is not \"True\", but False, corresponding condition of pod readiness gate \"\" does not exist."},{"type":"ContainersReady","status":"True"},{"type":"PodScheduled","status":"True"}]}`},
		{"vanished while running", `{"metadata":{"name":"p"},"spec":{"restartPolicy":"Never","containers":[{"name":"a"},{"name":"b","image":"img"}]}}`, `{"phase":"Running","containerStatuses":[{"name":"a","state":{"running":{}},"restartCount":"4"},{"name":"b","state":{"running":{}},"restartCount":1}]}`, `{"containers":[{"id":"x","name":"a","state":"unknown"}]}`, `{}`, `{}`, true,
			`{"qosClass":"BestEffort","containerStatuses":[{"name":"a","restartCount":5,"containerID":"process://x","state":{"terminated":{"exitCode":137,"reason":"ContainerStatusUnknown","message":"The container could not be located when the pod was terminated"}},"lastState":{},"ready":false,"started":false},{"name":"b","state":{"waiting":{"reason":"ContainerCreating"}},"lastState":{"terminated":{"exitCode":137,"reason":"ContainerStatusUnknown","message":"The container could not be located when the pod was deleted.  The container used to be Running"}},"ready":false,"restartCount":2,"image":"img","started":false}],"phase":"Failed","conditions":[{"type":"PodReadyToStartContainers","status":"False"},{"type":"Initialized","status":"True"},{"type":"Ready","status":"False","reason":"PodFailed"},{"type":"ContainersReady","status":"False","reason":"PodFailed"},{"type":"PodScheduled","status":"True"}]}`},
		{"sidecar running, static pod terminal", `{"metadata":{"name":"p","annotations":{"kubernetes.io/config.source":"file"}},"spec":{"restartPolicy":"Never","initContainers":[{"name":"s","restartPolicy":"Always","startupProbe":{}}],"containers":[{"name":"c"}]}}`, `null`, `{"containers":[{"id":"s1","name":"s","state":"running"},{"id":"c1","name":"c","state":"exited","exit_code":0}]}`, `{"s":{"process://s1":{"startup":"Success","readiness":"Failure"}}}`, `{}`, true,
			`{"qosClass":"BestEffort","initContainerStatuses":[{"name":"s","restartCount":0,"containerID":"process://s1","state":{"running":{}},"lastState":{},"ready":true,"started":true}],"containerStatuses":[{"name":"c","restartCount":0,"containerID":"process://c1","state":{"terminated":{"exitCode":0,"containerID":"process://c1"}},"lastState":{},"ready":false,"started":false}],"phase":"Running","conditions":[{"type":"PodReadyToStartContainers","status":"False"},{"type":"Initialized","status":"True"},{"type":"Ready","status":"False","reason":"ContainersNotReady","message":"containers with unready status: [c]"},{"type":"ContainersReady","status":"False","reason":"ContainersNotReady","message":"containers with unready status: [c]"},{"type":"PodScheduled","status":"True"}]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []*Obj{mustObj(t, c.pod), mustObj(t, c.old), mustObj(t, c.runtime), mustObj(t, c.probes), mustObj(t, c.reasons)}
			before := Encode(nil, anyObjs(args))
			got := Encode(nil, GenerateAPIStatus(args[0], args[1], args[2], args[3], args[4], c.terminal))
			if string(got) != c.want {
				t.Errorf("\n got %s\nwant %s", got, c.want)
			}
			if after := Encode(nil, anyObjs(args)); !bytes.Equal(before, after) {
				t.Errorf("the arguments changed:\n%s\n%s", before, after)
			}
		})
	}
}

func TestGenerateGivesUp(t *testing.T) {
	cases := map[string]string{
		"container name not a string": `{"spec":{"containers":[{"name":1}]}}`,
		"ips a string":                `{"spec":{}}|{"containers":[],"ips":"10.0.0.1"}`,
		"int() of a padded string":    `{"spec":{"containers":[{"name":"a"}]}}|{"containers":[{"id":"x","name":"a","state":"running","restart_count":" 1"}]}`,
		"unhashable phase":            `{"spec":{},"status":{"phase":["Failed"]}}`,
		"requests a list":             `{"spec":{"containers":[{"name":"a","resources":{"requests":["cpu"]}}]}}`,
		"spec a string":               `{"spec":"x"}`,
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			parts := bytes.SplitN([]byte(args), []byte("|"), 2)
			pod := mustObj(t, string(parts[0]))
			var runtime *Obj
			if len(parts) > 1 {
				runtime = mustObj(t, string(parts[1]))
			}
			defer func() {
				if _, ok := recover().(Unsupported); !ok {
					t.Errorf("did not give up")
				}
			}()
			GenerateAPIStatus(pod, nil, runtime, nil, nil, false)
		})
	}
}

func TestRFC3339FromMs(t *testing.T) {
	for ms, want := range map[int64]string{
		0:                 "1970-01-01T00:00:00Z",
		1_700_000_000_999: "2023-11-14T22:13:20Z",
		253402300799999:   "9999-12-31T23:59:59Z",
	} {
		if got := RFC3339FromMs(ms); got != want {
			t.Errorf("RFC3339FromMs(%d) = %s, want %s", ms, got, want)
		}
	}
	for _, ms := range []int64{-1, 253402300800000} {
		func() {
			defer func() {
				if _, ok := recover().(Unsupported); !ok {
					t.Errorf("RFC3339FromMs(%d) did not give up", ms)
				}
			}()
			RFC3339FromMs(ms)
		}()
	}
}

func TestPythonBuiltins(t *testing.T) {
	for in, want := range map[any]int64{int64(-3): -3, true: 1, false: 0, "007": 7, "-12": -12, "+5": 5} {
		if got := PyInt(in); got != want {
			t.Errorf("PyInt(%#v) = %d, want %d", in, got, want)
		}
	}
	v := mustObj(t, `{"a":"","b":null,"c":[],"d":{},"e":[null,"",{"x":null,"y":0}],"f":false}`)
	out := NewObj(1)
	put(out, "v", v)
	put(out, "empty", "")
	put(out, "none", nil)
	if got, want := string(Encode(nil, out)), `{"v":{"d":{},"e":[null,"",{"y":0}],"f":false}}`; got != want {
		t.Errorf("put: got %s, want %s", got, want)
	}
}

func mustObj(t *testing.T, text string) *Obj {
	t.Helper()
	v, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return ObjOf(v)
}

func anyObjs(objs []*Obj) []any {
	out := make([]any, len(objs))
	for i, o := range objs {
		if o != nil {
			out[i] = o
		}
	}
	return out
}
