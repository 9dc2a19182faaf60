package foldcore

// RulesVersion is streams/fold.py RULES_VERSION: the version of the rules this port reproduces.
// A history line names it; the port refuses to run for a Python fold with other rules.
const RulesVersion = 1

// Logical topic names (podledger/types.py Topic).
const (
	TopicPodUpdates   = "pod-updates"
	TopicPleg         = "pleg"
	TopicProbeResults = "probe-results"
	TopicPodLifecycle = "pod-lifecycle"
	TopicJournal      = "journal"
)

// Record is the fold's state of one announced pod (streams/record.py PodRecord). Records of pods
// whose events are held waiting for their announcement are not covered: the port gives up there.
type Record struct {
	UID, Namespace, Name, Node, Source string
	Pod                                *Obj
	Runtime                            *Obj // nil: no snapshot yet
	RuntimeTs                          int64
	Probes                             *Obj // {container: {container id: {probe: result}}}
	Reasons                            *Obj // {container: {reason, message}}
	Terminating, Terminated, Finished  bool
	Status                             *Obj // nil before the first version
	Version                            int64
	Applied                            map[string]int64 // {topic: highest offset applied}
}

// newRecord is new_record: the record a pod's first pod-update starts.
func newRecord(ev *Event) *Record {
	meta := ObjOf(ev.Pod.Get("metadata"))
	if meta == nil {
		unsupported("pod %s has no metadata object", ev.UID)
	}
	name, ok := meta.Lookup("name")
	if !ok {
		unsupported("pod %s has no name", ev.UID)
	}
	nameStr, ok := name.(string)
	if !ok {
		unsupported("pod %s has a name that is not a string", ev.UID)
	}
	namespace := "default"
	if ns := meta.Get("namespace"); Truthy(ns) {
		s, ok := ns.(string)
		if !ok {
			unsupported("pod %s has a namespace that is not a string", ev.UID)
		}
		namespace = s
	}
	return &Record{
		UID: ev.UID, Namespace: namespace, Name: nameStr, Node: ev.Node, Source: ev.Source,
		Pod: ev.Pod, Probes: NewObj(0), Reasons: NewObj(0), Applied: map[string]int64{},
	}
}

// eventType is event_type: `<topic>:<what happened>`, the cause named on each version.
func eventType(topic string, ev *Event) string {
	switch topic {
	case TopicPodUpdates:
		return topic + ":" + ev.Op
	case TopicPleg:
		return topic + ":" + ev.Type
	case TopicProbeResults:
		return topic + ":" + ev.Probe + "=" + ev.Result
	}
	return topic + ":" + ev.Kind
}

// Fold folds input events into pod records and hands each status version to Emit, in the order
// the Python fold publishes them. It is fold_event and BatchFold.add_event for inputs that need no
// dead letter and hold no event; it gives up (unsupported) on anything else.
type Fold struct {
	Records map[string]*Record
	Pods    map[string]struct{} // every pod that has had a record
	Emit    func(v *Version)
	Events  int64
}

// NewFold is a fold with no records that hands versions to emit.
func NewFold(emit func(v *Version)) *Fold {
	return &Fold{Records: map[string]*Record{}, Pods: map[string]struct{}{}, Emit: emit}
}

// Apply folds one decoded event at its coordinates.
func (f *Fold) Apply(at Coordinates, ev *Event) {
	f.Events++
	record := f.Records[ev.UID]
	if record != nil && ev.Node != record.Node {
		unsupported("event from node %q for pod %s bound to %q (a forged dead letter)", ev.Node, record.UID, record.Node)
	}
	if record != nil {
		if last, ok := record.Applied[at.Topic]; ok && last >= at.Offset {
			return // already applied: a redelivery or a replay
		}
	}
	if at.Topic != TopicPodUpdates && record == nil {
		unsupported("%s event for pod %s before its announcement (held events)", at.Topic, ev.UID)
	}
	if at.Topic == TopicPodUpdates && ev.Op == "REMOVE" {
		delete(f.Records, ev.UID) // the journal entry and the tombstone carry no version
		return
	}
	if record == nil {
		record = newRecord(ev)
		f.Records[ev.UID] = record
		f.Pods[ev.UID] = struct{}{}
	}
	if last, ok := record.Applied[at.Topic]; !ok || at.Offset > last {
		record.Applied[at.Topic] = at.Offset
	}
	terminate := false
	switch at.Topic {
	case TopicPodUpdates:
		record.Pod = ev.Pod
	case TopicPleg:
		// Snapshots only move forward (see streams/fold.py).
		if ev.TsMs >= record.RuntimeTs {
			record.Runtime, record.RuntimeTs = ev.Runtime, ev.TsMs
		}
	case TopicProbeResults:
		applyProbeResult(record, ev)
	default:
		switch ev.Kind {
		case "sync_result":
			record.Reasons = reasonCache(ev.SyncResults)
		case "terminating":
			record.Terminating = true
		default: // terminated
			record.Terminating, record.Terminated = true, true
			if ev.Runtime != nil && ev.TsMs >= record.RuntimeTs {
				record.Runtime, record.RuntimeTs = ev.Runtime, ev.TsMs
			}
			terminate = true
		}
	}
	kind := eventType(at.Topic, ev)
	now := RFC3339FromMs(at.TsMs)
	generated := GenerateAPIStatus(record.Pod, record.Status, record.Runtime, record.Probes, record.Reasons, record.Terminated)
	f.store(record, generated, kind, at, now, isDeleting(record.Pod), true)
	if terminate {
		terminated := TerminatePodStatus(record.Pod, record.Status)
		if !IsStatic(record.Pod) {
			record.Finished = true // sticky; static pods are never finished this way
		}
		f.store(record, terminated, kind, at, now, true, false)
	}
}

// applyProbeResult keeps a probe result under its container instance; only the two newest
// instances of a container are kept, as streams/fold.py does.
func applyProbeResult(record *Record, ev *Event) {
	cid, ok := ev.ContainerID.(string)
	if !ok {
		unsupported("probe result with a container id that is not a string")
	}
	byID := NewObj(2)
	if old := ObjOf(record.Probes.Get(ev.ContainerName)); old != nil {
		byID = old.Copy()
	}
	results := NewObj(2)
	if old := ObjOf(byID.Get(cid)); old != nil {
		results = old.Copy()
	}
	byID.Delete(cid)
	results.Set(ev.Probe, ev.Result)
	byID.Set(cid, results)
	if byID.Len() > 2 {
		kept := NewObj(2)
		keys, values := byID.Keys(), byID.Values()
		for i := len(keys) - 2; i < len(keys); i++ {
			kept.Set(keys[i], values[i])
		}
		byID = kept
	}
	probes := record.Probes.Copy()
	probes.Set(ev.ContainerName, byID)
	record.Probes = probes
}

// reasonCache is the pod worker's reason cache from a sync result.
func reasonCache(results []any) *Obj {
	reasons := NewObj(len(results))
	for _, item := range results {
		r := ObjOf(item)
		if r == nil {
			unsupported("a sync result that is not an object")
		}
		container, ok1 := r.Get("container").(string)
		reason, ok2 := r.Lookup("reason")
		if !ok1 || !ok2 {
			unsupported("a sync result without container or reason")
		}
		message := any("")
		if m, ok := r.Lookup("message"); ok {
			message = m
		}
		entry := NewObj(2)
		entry.Set("reason", reason)
		entry.Set("message", message)
		reasons.Set(container, entry)
	}
	return reasons
}

func isDeleting(pod *Obj) bool {
	meta := ObjOf(pod.Get("metadata"))
	return meta != nil && Truthy(meta.Get("deletionTimestamp"))
}

// store is _store: the status manager decides whether `generated` is a new version.
func (f *Fold) store(record *Record, generated *Obj, kind string, at Coordinates, now string, force, built bool) {
	status, version := SetPodStatus(record.Pod, record.Status, record.Version, generated, now, force, built)
	if status == nil {
		return
	}
	record.Status, record.Version = status, version
	f.Emit(&Version{
		UID: record.UID, Namespace: record.Namespace, Name: record.Name, Node: record.Node,
		Version: record.Version, Status: record.Status,
		CouldHaveRunningContainers: !record.Terminated, Finished: record.Finished,
		Static:    IsStatic(record.Pod) || record.Source != "api",
		MirrorUID: nil, Deleting: isDeleting(record.Pod),
		Cause: Cause{Kind: kind, Topic: at.Topic, Partition: at.Partition, Offset: at.Offset, TsMs: at.TsMs},
		TsMs:  at.TsMs, Rules: RulesVersion,
	})
}
