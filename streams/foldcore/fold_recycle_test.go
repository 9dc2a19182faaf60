package foldcore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The fold recycles the objects of the statuses it drops (fold_recycle.go) and hands out stored
// objects where generation would build equal ones (gen_reuse.go, gen_condition_maker.go): either
// shortcut, if it ever let a dropped or shared object be changed, would change later versions.
// These tests fold varied synthetic events with and without recycling and compare every byte.

func TestRecyclingKeepsEveryVersion(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		lines := syntheticEvents(rand.New(rand.NewPCG(seed, 7)), 12, 1500)
		recycled, stats := foldForTest(t, lines, true)
		versions := stats.Versions
		fresh, _ := foldForTest(t, lines, false)
		if !bytes.Equal(recycled, fresh) {
			t.Fatalf("seed %d: recycling changed the history (%d versions)", seed, versions)
		}
		if versions < 500 {
			t.Fatalf("seed %d: only %d versions: the events exercise too little", seed, versions)
		}
	}
}

func TestStatusPoolTakesEachObjectOnce(t *testing.T) {
	pool := &statusPool{}
	cs := pool.obj()
	cs.appendNew("name", "a")
	status := pool.obj()
	status.appendNew("containerStatuses", []any{cs, cs}) // a repeated container name
	status.appendNew("initContainerStatuses", []any{NewObj(1), 7})
	pool.drop(status)
	if len(pool.free) != 2 { // cs once, and status; the small init status is not the pool's size
		t.Fatalf("pool holds %d objects, want 2", len(pool.free))
	}
	a, b := pool.obj(), pool.obj()
	if a == b || a.Len() != 0 || b.Len() != 0 || cap(a.keys) != recycledCapacity {
		t.Fatalf("recycled objects: %p %p, lengths %d %d", a, b, a.Len(), b.Len())
	}
	var nilPool *statusPool
	nilPool.drop(status) // recycles nothing
	if o := nilPool.obj(); o == nil || cap(o.vals) != recycledCapacity {
		t.Fatal("a nil pool makes a new object")
	}
}

// foldForTest folds lines one after another in input order (blank ones count and fold to
// nothing) and returns the history and what Replay would count: the reference Replay must equal.
func foldForTest(t *testing.T, lines [][]byte, recycle bool) ([]byte, Stats) {
	t.Helper()
	var out []byte
	var stats Stats
	fold := NewFold(func(v *Version) {
		out = append(AppendVersion(out, v), '\n')
		stats.Versions++
	})
	if !recycle {
		fold.pool = nil
	}
	for i, line := range lines {
		if isBlank(line) { // counts as a line, folds to nothing
			continue
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("line %d gave up: %v\n%s", i+1, r, line)
				}
			}()
			at, ev := ParseLine(int64(i+1), line)
			fold.Apply(at, ev)
		}()
	}
	stats.Lines, stats.Events, stats.Pods = int64(len(lines)), fold.Events, int64(len(fold.Pods))
	return out, stats
}

// syntheticEvents is an input of pods announced first, then random events of theirs: runtime
// snapshots with restarts and unknown states, probe results, sync results, pod updates that
// change the spec, terminations and removals. Init containers, sidecars and repeated container
// names appear too.
func syntheticEvents(rng *rand.Rand, pods, events int) [][]byte {
	type pod struct {
		uid, name, node string
		spec            map[string]any
		restarts        map[string]int
		alive           bool
	}
	pick := func(options ...string) string { return options[rng.IntN(len(options))] }
	newSpec := func() map[string]any {
		var containers, inits []any
		for _, name := range []string{"app", "web", "db"}[:1+rng.IntN(3)] {
			c := map[string]any{"name": name, "image": pick("img:1", "img:2", "")}
			if rng.IntN(2) == 0 {
				c["readinessProbe"] = map[string]any{"exec": map[string]any{}}
			}
			if rng.IntN(5) == 0 {
				c["startupProbe"] = map[string]any{"exec": map[string]any{}}
			}
			containers = append(containers, c)
		}
		if rng.IntN(10) == 0 {
			containers = append(containers, containers[0]) // a repeated name
		}
		if rng.IntN(3) == 0 {
			init := map[string]any{"name": "init"}
			if rng.IntN(2) == 0 {
				init["restartPolicy"] = "Always"
			}
			inits = append(inits, init)
		}
		spec := map[string]any{"containers": containers, "restartPolicy": pick("Always", "OnFailure", "Never")}
		if inits != nil {
			spec["initContainers"] = inits
		}
		return spec
	}
	podJSON := func(p *pod, deleting bool) map[string]any {
		meta := map[string]any{"uid": p.uid, "name": p.name, "namespace": "default"}
		if deleting {
			meta["deletionTimestamp"] = "2023-11-14T22:20:00Z"
		}
		return map[string]any{"metadata": meta, "spec": p.spec, "status": map[string]any{"phase": "Pending"}}
	}
	containerNames := func(p *pod) []string {
		var names []string
		for _, key := range []string{"initContainers", "containers"} {
			list, _ := p.spec[key].([]any)
			for _, c := range list {
				names = append(names, c.(map[string]any)["name"].(string))
			}
		}
		return names
	}
	iso := func(ms int64) string {
		return fmt.Sprintf("2023-11-14T22:%02d:%02dZ", ms/60000%60, ms/1000%60)
	}
	runtime := func(p *pod, ts int64) map[string]any {
		var containers []any
		for _, name := range containerNames(p) {
			if rng.IntN(4) == 0 {
				p.restarts[name]++
			}
			n := p.restarts[name]
			for i := max(0, n-1); i <= n; i++ {
				state := "exited"
				if i == n {
					state = pick("running", "running", "exited", "created", "unknown")
				}
				rc := map[string]any{"id": fmt.Sprintf("%s-%s-%d", p.uid, name, i), "name": name,
					"image": "img:1", "state": state, "created_at": iso(ts - int64(1000*(n-i+1))),
					"restart_count": n}
				if state == "running" || state == "exited" {
					rc["started_at"] = iso(ts - int64(1000*(n-i)))
				}
				if state == "exited" {
					rc["exit_code"] = rng.IntN(2)
					rc["finished_at"] = iso(ts)
					if rng.IntN(3) == 0 {
						rc["message"] = pick("boom", "x.y", "")
					}
				}
				containers = append(containers, rc)
			}
		}
		return map[string]any{"containers": containers, "ips": []any{"10.0.0.1"}, "runtime_type": "sim",
			"sandbox": map[string]any{"id": "s", "ready": rng.IntN(5) != 0}}
	}

	var lines [][]byte
	add := func(v map[string]any) {
		line, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		lines = append(lines, line)
	}
	ts := int64(1_700_000_000_000)
	all := make([]*pod, pods)
	for i := range all {
		p := &pod{uid: fmt.Sprintf("u%03d", i), name: fmt.Sprintf("p%03d", i), node: "n",
			spec: newSpec(), restarts: map[string]int{}, alive: true}
		all[i] = p
		ts++
		add(map[string]any{"op": "ADD", "source": "api", "node": p.node, "pod": podJSON(p, false), "ts_ms": ts})
	}
	for e := 0; e < events; e++ {
		p := all[rng.IntN(pods)]
		if !p.alive {
			continue
		}
		ts += 1 + int64(rng.IntN(400))
		names := containerNames(p)
		name := names[rng.IntN(len(names))]
		switch r := rng.IntN(100); {
		case r < 35:
			add(map[string]any{"uid": p.uid, "node": p.node, "type": "PodSync", "container_id": nil,
				"runtime": runtime(p, ts), "ts_ms": ts})
		case r < 65:
			id := fmt.Sprintf("sim://%s-%s-%d", p.uid, name, p.restarts[name])
			add(map[string]any{"uid": p.uid, "node": p.node, "container_name": name, "container_id": id,
				"probe": pick("readiness", "startup"), "result": pick("Success", "Failure"), "ts_ms": ts})
		case r < 80:
			add(map[string]any{"uid": p.uid, "node": p.node, "kind": "sync_result", "ts_ms": ts,
				"sync_results": []any{map[string]any{"container": name, "reason": "CrashLoopBackOff", "message": pick("back-off", "")}}})
		case r < 90:
			if rng.IntN(2) == 0 {
				p.spec = newSpec()
			}
			add(map[string]any{"op": pick("UPDATE", "RECONCILE"), "source": "api", "node": p.node,
				"pod": podJSON(p, rng.IntN(4) == 0), "ts_ms": ts})
		case r < 95:
			add(map[string]any{"uid": p.uid, "node": p.node, "kind": "terminated", "ts_ms": ts,
				"runtime": runtime(p, ts)})
		case r < 97 && e > events*9/10: // removals late, so that pods live long
			p.alive = false
			add(map[string]any{"op": "REMOVE", "source": "api", "node": p.node, "pod": podJSON(p, true), "ts_ms": ts})
		case r < 97:
			add(map[string]any{"uid": p.uid, "node": p.node, "kind": "terminating", "ts_ms": ts})
		default:
			add(map[string]any{"uid": p.uid, "node": p.node, "type": "ContainerStarted", "container_id": nil,
				"runtime": runtime(p, ts), "ts_ms": ts})
		}
	}
	return lines
}
