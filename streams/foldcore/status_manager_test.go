package foldcore

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// smCall runs one recorded status-manager call ("set" or "terminate") on parsed arguments and
// returns the encoded result (nil for a nil status), the version, and why it gave up ("" if it
// did not).
func smCall(fn string, args *Obj) (encoded []byte, version int64, gaveUp string) {
	defer func() {
		if r := recover(); r != nil {
			if u, ok := r.(Unsupported); ok {
				gaveUp = u.Reason
			} else {
				gaveUp = fmt.Sprint("panic: ", r)
			}
		}
	}()
	pod := ObjOf(args.Get("pod"))
	cached := ObjOf(args.Get("cached"))
	if fn == "terminate" {
		return Encode(nil, TerminatePodStatus(pod, cached)), 0, ""
	}
	ver, _ := args.Get("version").(int64)
	now, _ := args.Get("now").(string)
	force, _ := args.Get("force").(bool)
	built, _ := args.Get("built").(bool)
	status, v := SetPodStatus(pod, cached, ver, ObjOf(args.Get("new")), now, force, built)
	if status == nil {
		return nil, v, ""
	}
	return Encode(nil, status), v, ""
}

// TestStatusManagerVectors replays calls recorded from the Python status manager: the files
// FOLDCORE_VECTORS_STATUS_MANAGER names (separated by commas) hold one JSON object a line with
// fn, args, want (the orjson bytes of the result, or null), version and error.
func TestStatusManagerVectors(t *testing.T) {
	paths := os.Getenv("FOLDCORE_VECTORS_STATUS_MANAGER")
	if paths == "" {
		t.Skip("FOLDCORE_VECTORS_STATUS_MANAGER is not set")
	}
	var checked, unparsed, gaveUp, mismatched int
	reasons := map[string]int{}
	for _, path := range strings.Split(paths, ",") {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReaderSize(f, 1<<20)
		for line := 1; ; line++ {
			raw, err := r.ReadBytes('\n')
			if len(raw) == 0 && err == io.EOF {
				break
			}
			if err != nil && err != io.EOF {
				t.Fatal(err)
			}
			parsed, perr := Parse(raw)
			if perr == ErrUnsupported {
				unparsed++ // floats and the like: the port gives up on such input before the fold
				continue
			}
			if perr != nil {
				t.Fatalf("%s:%d: %v", path, line, perr)
			}
			rec := ObjOf(parsed)
			fn, _ := rec.Get("fn").(string)
			args := ObjOf(rec.Get("args"))
			podBefore, cachedBefore := Encode(nil, args.Get("pod")), Encode(nil, args.Get("cached"))
			got, version, reason := smCall(fn, args)
			checked++
			if rec.Get("error") != nil {
				if reason == "" {
					mismatched++
					t.Errorf("%s:%d: Python raised %v, Go did not give up", path, line, rec.Get("error"))
				}
				continue
			}
			if reason != "" {
				gaveUp++
				reasons[reason]++
				continue
			}
			want, _ := rec.Get("want").(string)
			wantVersion, _ := rec.Get("version").(int64)
			switch {
			case (got == nil) != (rec.Get("want") == nil) || string(got) != want:
				mismatched++
				if mismatched <= 5 {
					t.Errorf("%s:%d %s: status\n got %s\nwant %s", path, line, fn, got, want)
				}
			case fn == "set" && version != wantVersion:
				mismatched++
				t.Errorf("%s:%d: version %d, want %d", path, line, version, wantVersion)
			}
			// The call may change new in place, never pod or cached.
			if string(Encode(nil, args.Get("pod"))) != string(podBefore) ||
				string(Encode(nil, args.Get("cached"))) != string(cachedBefore) {
				t.Errorf("%s:%d: pod or cached was changed", path, line)
			}
		}
		f.Close()
	}
	t.Logf("%d vectors checked (%d more not parsed), %d gave up, %d mismatched; give-up reasons: %v",
		checked, unparsed, gaveUp, mismatched, reasons)
}

// smCases are status-manager calls with the results the Python status manager gives (recorded
// like the vectors; {{éN}} stands for N times é).
var smCases = []string{
	`{"name":"new status","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"c"}]}},"cached":null,"version":0,"new":{"phase":"Running","conditions":[{"type":"Ready","status":"True"},{"type":"Custom","status":"True"}]},"now":"2026-01-01T10:00:00Z","force":false,"built":true},"want":"{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"2026-01-01T10:00:00Z\",\"lastProbeTime\":null},{\"type\":\"Custom\",\"status\":\"True\",\"lastProbeTime\":null}],\"startTime\":\"2026-01-01T10:00:00Z\"}","version":1}`,
	`{"name":"unchanged","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"c"}]}},"cached":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T10:00:00Z","lastProbeTime":null},{"type":"Custom","status":"True","lastProbeTime":null}],"startTime":"2026-01-01T10:00:00Z"},"version":1,"new":{"phase":"Running","conditions":[{"type":"Ready","status":"True"},{"type":"Custom","status":"False"}]},"now":"2026-01-01T10:05:00.5Z","force":false,"built":true},"want":null,"version":1}`,
	`{"name":"forced keeps the transition time","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"c"}]}},"cached":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T10:00:00Z","lastProbeTime":null},{"type":"Custom","status":"True","lastProbeTime":null}],"startTime":"2026-01-01T10:00:00Z"},"version":1,"new":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]},"now":"2026-01-01T10:05:00.5Z","force":true,"built":true},"want":"{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"2026-01-01T10:00:00Z\",\"lastProbeTime\":null}],\"startTime\":\"2026-01-01T10:00:00Z\"}","version":2}`,
	`{"name":"status change takes now","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"c"}]}},"cached":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T10:00:00Z","lastProbeTime":null},{"type":"Custom","status":"True","lastProbeTime":null}],"startTime":"2026-01-01T10:00:00Z"},"version":1,"new":{"phase":"Running","conditions":[{"type":"Ready","status":"False"}]},"now":"2026-01-01T10:05:00.5Z","force":false,"built":true},"want":"{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"lastTransitionTime\":\"2026-01-01T10:05:00Z\",\"lastProbeTime\":null}],\"startTime\":\"2026-01-01T10:00:00Z\"}","version":2}`,
	`{"name":"reason change is a change","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"c"}]}},"cached":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T10:00:00Z","lastProbeTime":null},{"type":"Custom","status":"True","lastProbeTime":null}],"startTime":"2026-01-01T10:00:00Z"},"version":1,"new":{"phase":"Running","conditions":[{"type":"Ready","status":"True","reason":"R"}]},"now":"2026-01-01T10:05:00.5Z","force":false,"built":true},"want":"{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"R\",\"lastTransitionTime\":\"2026-01-01T10:00:00Z\",\"lastProbeTime\":null}],\"startTime\":\"2026-01-01T10:00:00Z\"}","version":2}`,
	`{"name":"condition with odd fields takes the slow path","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"c"}]}},"cached":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T10:00:00Z","lastProbeTime":null},{"type":"Custom","status":"True","lastProbeTime":null}],"startTime":"2026-01-01T10:00:00Z"},"version":1,"new":{"conditions":[{"type":"Ready","status":"True","lastProbeTime":"2026-01-01T09:00:00.7Z","reason":""}]},"now":"2026-01-01T10:05:00.5Z","force":false,"built":true},"want":"{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"lastProbeTime\":\"2026-01-01T09:00:00Z\",\"lastTransitionTime\":\"2026-01-01T10:00:00Z\"}],\"startTime\":\"2026-01-01T10:00:00Z\"}","version":2}`,
	`{"name":"Never: a terminated container may not run again","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Never","containers":[{"name":"c"}]}},"cached":{"containerStatuses":[{"name":"c","state":{"terminated":{"exitCode":1}}}]},"version":3,"new":{"containerStatuses":[{"name":"c","state":{"running":{"startedAt":"2026-01-01T10:00:00.25Z"}}}]},"now":"2026-01-01T10:00:00Z","force":false,"built":true},"want":null,"version":3}`,
	`{"name":"OnFailure: a failed container may restart","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"OnFailure","containers":[{"name":"c"}]}},"cached":{"containerStatuses":[{"name":"c","state":{"terminated":{"exitCode":1}}}]},"version":3,"new":{"containerStatuses":[{"name":"c","state":{"running":{"startedAt":"2026-01-01T10:00:00.25Z"}}}]},"now":"2026-01-01T10:00:00Z","force":false,"built":true},"want":"{\"containerStatuses\":[{\"name\":\"c\",\"state\":{\"running\":{\"startedAt\":\"2026-01-01T10:00:00Z\"}}}],\"startTime\":\"2026-01-01T10:00:00Z\"}","version":4}`,
	`{"name":"init statuses must match the spec","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Never","containers":[{"name":"c"}],"initContainers":[{"name":"i1"}]}},"cached":{"initContainerStatuses":[{"name":"i2"}]},"version":3,"new":{},"now":"2026-01-01T10:00:00Z","force":false,"built":true},"want":null,"version":3}`,
	`{"name":"a sidecar may leave terminated","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Never","containers":[{"name":"c"}],"initContainers":[{"name":"i1","restartPolicy":"Always"}]}},"cached":{"initContainerStatuses":[{"name":"i1","state":{"terminated":{"exitCode":0}}}]},"version":3,"new":{"initContainerStatuses":[{"name":"i1","state":{"running":{}}}]},"now":"2026-01-01T10:00:00Z","force":false,"built":true},"want":"{\"initContainerStatuses\":[{\"name\":\"i1\",\"state\":{\"running\":{}}}],\"startTime\":\"2026-01-01T10:00:00Z\"}","version":4}`,
	`{"name":"generic path: normalized, sorted, empty fields dropped","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"b"},{"name":"a"},{"name":"x"},{"name":"e0"},{"name":"e1"},{"name":"e2"},{"name":"e3"},{"name":"e4"},{"name":"e5"},{"name":"e6"},{"name":"e7"},{"name":"e8"}],"initContainers":[{"name":"i2"},{"name":"i1"}]}},"cached":null,"version":0,"new":{"phase":"Running","startTime":"2026-01-01T09:00:00.5Z","podIPs":[],"message":"","containerStatuses":[{"name":"b","state":{"terminated":{"exitCode":1,"message":"{{é520}}","finishedAt":"2026-01-01T10:00:00.9Z"}},"lastState":{"terminated":{"exitCode":2,"message":"{{€350}}"}}},{"name":"a","state":{"waiting":{}},"lastState":{}}],"initContainerStatuses":[{"name":"i1"},{"name":"zz"},{"name":"i2"}],"conditions":[{"type":"Initialized","status":"True","lastTransitionTime":"2026-01-01T08:00:00.5Z"}]},"now":"2026-01-01T10:05:00.5Z","force":false,"built":false},"want":"{\"phase\":\"Running\",\"startTime\":\"2026-01-01T09:00:00Z\",\"containerStatuses\":[{\"name\":\"a\",\"state\":{\"waiting\":{}},\"lastState\":{}},{\"name\":\"b\",\"state\":{\"terminated\":{\"exitCode\":1,\"message\":\"{{é438}}\",\"finishedAt\":\"2026-01-01T10:00:00Z\"}},\"lastState\":{\"terminated\":{\"exitCode\":2,\"message\":\"{{€292}}\"}}}],\"initContainerStatuses\":[{\"name\":\"i2\"},{\"name\":\"i1\"},{\"name\":\"zz\"}],\"conditions\":[{\"type\":\"Initialized\",\"status\":\"True\",\"lastTransitionTime\":\"2026-01-01T10:05:00Z\",\"lastProbeTime\":null}]}","version":1}`,
	`{"name":"built path over a non-canonical API status takes the generic path","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"c"}]},"status":{"phase":"Pending","podIPs":[]}},"cached":null,"version":0,"new":{"phase":"Pending","conditions":[{"type":"Ready","status":"False"}]},"now":"2026-01-01T10:00:00Z","force":false,"built":true},"want":"{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"lastTransitionTime\":\"2026-01-01T10:00:00Z\",\"lastProbeTime\":null}],\"startTime\":\"2026-01-01T10:00:00Z\"}","version":1}`,
	`{"name":"built path cuts a generated message","fn":"set","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"b"},{"name":"a"},{"name":"x"},{"name":"e0"},{"name":"e1"},{"name":"e2"},{"name":"e3"},{"name":"e4"},{"name":"e5"},{"name":"e6"},{"name":"e7"},{"name":"e8"}]}},"cached":{"startTime":"2026-01-01T10:00:00Z"},"version":1,"new":{"containerStatuses":[{"name":"b","state":{"terminated":{"exitCode":1,"message":"{{é520}}","finishedAt":"2026-01-01T10:00:00.9Z"}},"lastState":{"terminated":{"exitCode":2,"message":"{{€350}}"}}}]},"now":"2026-01-01T10:00:00Z","force":false,"built":true},"want":"{\"containerStatuses\":[{\"name\":\"b\",\"state\":{\"terminated\":{\"exitCode\":1,\"message\":\"{{é512}}\",\"finishedAt\":\"2026-01-01T10:00:00Z\"}},\"lastState\":{\"terminated\":{\"exitCode\":2,\"message\":\"{{€341}}\"}}}],\"startTime\":\"2026-01-01T10:00:00Z\"}","version":2}`,
	`{"name":"terminate: initialized pod","fn":"terminate","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"c1"},{"name":"c2"}],"initContainers":[{"name":"i1"},{"name":"i2"}]},"status":{"initContainerStatuses":[{"name":"i1","state":{"terminated":{"exitCode":0}}},{"name":"i2","state":{"waiting":{}}}]}},"cached":{"phase":"Running","containerStatuses":[{"name":"c1","state":{"running":{}}},{"name":"c2","state":{"terminated":{"exitCode":0}}}],"initContainerStatuses":[{"name":"i1","state":{"terminated":{"exitCode":0}}},{"name":"i2","state":{"waiting":{}}},{"name":"i3","state":{"waiting":{}}}]}},"want":"{\"phase\":\"Failed\",\"containerStatuses\":[{\"name\":\"c1\",\"state\":{\"running\":{}}},{\"name\":\"c2\",\"state\":{\"terminated\":{\"exitCode\":0}}}],\"initContainerStatuses\":[{\"name\":\"i1\",\"state\":{\"terminated\":{\"exitCode\":0}}},{\"name\":\"i2\",\"state\":{\"waiting\":{}}},{\"name\":\"i3\",\"state\":{\"waiting\":{}}}]}","version":0}`,
	`{"name":"terminate: initialized pod's containers","fn":"terminate","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"c1"},{"name":"c2"}],"initContainers":[{"name":"i1"}]},"status":{"containerStatuses":[{"name":"c1","state":{"waiting":{}},"lastState":{"terminated":{"exitCode":1}}}]}},"cached":{"phase":"Running","containerStatuses":[{"name":"c1","state":{"running":{}}},{"name":"c2","state":{"terminated":{"exitCode":0}}}],"initContainerStatuses":[{"name":"i1","state":{"waiting":{}}}]}},"want":"{\"phase\":\"Failed\",\"containerStatuses\":[{\"name\":\"c1\",\"state\":{\"terminated\":{\"exitCode\":137,\"reason\":\"ContainerStatusUnknown\",\"message\":\"The container could not be located when the pod was terminated\"}}},{\"name\":\"c2\",\"state\":{\"terminated\":{\"exitCode\":0}}}],\"initContainerStatuses\":[{\"name\":\"i1\",\"state\":{\"terminated\":{\"exitCode\":137,\"reason\":\"ContainerStatusUnknown\",\"message\":\"The container could not be located when the pod was terminated\"}}}]}","version":0}`,
	`{"name":"terminate: pod still initializing","fn":"terminate","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"c1"},{"name":"c2"}],"initContainers":[{"name":"i1"}]},"status":{"containerStatuses":[{"name":"c1","state":{"waiting":{}},"lastState":{"terminated":{"exitCode":1}}}]}},"cached":null},"want":"{\"containerStatuses\":[{\"name\":\"c1\",\"state\":{\"terminated\":{\"exitCode\":137,\"reason\":\"ContainerStatusUnknown\",\"message\":\"The container could not be located when the pod was terminated\"}},\"lastState\":{\"terminated\":{\"exitCode\":1}}}],\"phase\":\"Failed\"}","version":0}`,
	`{"name":"terminate: static pod keeps its phase","fn":"terminate","args":{"pod":{"metadata":{"name":"p","uid":"u","annotations":{"kubernetes.io/config.source":"file"}},"spec":{"restartPolicy":"Always","containers":[{"name":"c"}]},"status":{"phase":"Running"}},"cached":null},"want":"{\"phase\":\"Running\"}","version":0}`,
	`{"name":"terminate: succeeded stays","fn":"terminate","args":{"pod":{"metadata":{"name":"p","uid":"u"},"spec":{"restartPolicy":"Always","containers":[{"name":"c"}]}},"cached":{"phase":"Succeeded"}},"want":"{\"phase\":\"Succeeded\"}","version":0}`,
}

var smRepeat = regexp.MustCompile(`\{\{(\D+)(\d+)\}\}`)

func TestStatusManagerCases(t *testing.T) {
	for _, line := range smCases {
		line = smRepeat.ReplaceAllStringFunc(line, func(m string) string {
			parts := smRepeat.FindStringSubmatch(m)
			n, _ := strconv.Atoi(parts[2])
			return strings.Repeat(parts[1], n)
		})
		v, err := Parse([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		rec := ObjOf(v)
		name, _ := rec.Get("name").(string)
		fn, _ := rec.Get("fn").(string)
		got, version, gaveUp := smCall(fn, ObjOf(rec.Get("args")))
		want, _ := rec.Get("want").(string)
		switch {
		case gaveUp != "":
			t.Errorf("%s: gave up: %s", name, gaveUp)
		case (got == nil) != (rec.Get("want") == nil) || string(got) != want:
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		case version != rec.Get("version").(int64):
			t.Errorf("%s: version %d, want %v", name, version, rec.Get("version"))
		}
	}
}
