package foldcore

// The prober manager's UpdatePodStatus (streams/container_status.py apply_probe_results): started
// and ready of each container status from the probe results of its container instance.

// probeResultsOf is the probe results of a container status's instance (its container ID): an
// object, nil when there are none.
func probeResultsOf(probes *Obj, status *Obj) *Obj {
	if probes.Len() == 0 {
		return nil
	}
	name, ok := status.Lookup("name")
	if !ok {
		unsupported("a container status has no name")
	}
	checkHashable(name, "a container status's name")
	n, isString := name.(string)
	if !isString {
		return nil // probe results are keyed by strings only
	}
	byID := asObj(probes.Get(n), "probe results of a container")
	if byID.Len() == 0 {
		return nil
	}
	id := status.Get("containerID")
	if !Truthy(id) {
		id = ""
	}
	checkHashable(id, "a container ID")
	idString, isString := id.(string)
	if !isString {
		return nil
	}
	return asObj(byID.Get(idString), "probe results of a container instance")
}

// startedBy is `started` for a running container with these probe results.
func startedBy(results *Obj, container containerProbes) bool {
	if result := results.Get("startup"); result != nil {
		s, ok := result.(string)
		return ok && s == "Success"
	}
	return !container.startupProbe
}

// readyBy is `ready` for a running and started container with these probe results.
func readyBy(results *Obj, container containerProbes) bool {
	if s, ok := results.Get("readiness").(string); ok && s == "Success" {
		return true
	}
	return !container.readinessProbe
}

// applyProbeResults sets started and ready on every container status of status from probe
// results, in place (on the container statuses just built).
func applyProbeResults(gp *genPod, statuses, initStatuses []*Obj, probes *Obj) {
	if len(statuses) > 0 {
		for _, cs := range statuses {
			if StateOf(cs) != "running" {
				cs.Set("started", false)
				continue
			}
			container := gp.lastProbes(false, nameOf(cs))
			results := probeResultsOf(probes, cs) // looked up once for both
			started := startedBy(results, container)
			cs.Set("started", started)
			if started {
				cs.Set("ready", readyBy(results, container))
			}
		}
	}
	if len(initStatuses) > 0 {
		for _, cs := range initStatuses {
			container := gp.lastProbes(true, nameOf(cs))
			state := StateOf(cs)
			started := false
			var results *Obj
			if state == "running" {
				results = probeResultsOf(probes, cs)
				started = startedBy(results, container)
			}
			cs.Set("started", started)
			if !container.sidecar {
				if state == "terminated" && ExitCode(cs) == 0 {
					cs.Set("ready", true)
				}
				continue
			}
			if started {
				cs.Set("ready", readyBy(results, container))
			}
		}
	}
}
