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
	applied                            appliedOffsets // {topic: highest offset applied}
	seqs                               appliedOffsets // {topic: highest proven sequence number applied}

	gen *genPod // what generation read of Pod; nil until it is read
	// raw is the JSON of some values as the live mode last wrote or read them, by rawSlot (nil:
	// unknown): whatever changes one of those values drops its JSON (serve_record.go).
	raw [rawSlots][]byte
}

// genPod is what status generation reads of the record's pod, read once per pod object.
func (r *Record) genPod() *genPod {
	if r.gen == nil || r.gen.pod != r.Pod {
		r.gen = newGenPod(r.Pod)
	}
	return r.gen
}

// appliedOffsets is a record's {topic: highest offset applied}, for the four ingress topics; a
// record's {topic: highest proven sequence number applied} has the same form.
type appliedOffsets struct {
	offsets [4]int64
	seen    [4]bool
}

// topicIndex is a topic's place in appliedOffsets.
func topicIndex(topic string) int {
	switch topic {
	case TopicPodUpdates:
		return 0
	case TopicPleg:
		return 1
	case TopicProbeResults:
		return 2
	case TopicPodLifecycle:
		return 3
	}
	unsupported("events of topic %q are not ported", topic)
	return 0
}

func (a *appliedOffsets) get(topic string) (int64, bool) {
	i := topicIndex(topic)
	return a.offsets[i], a.seen[i]
}

func (a *appliedOffsets) set(topic string, offset int64) {
	i := topicIndex(topic)
	a.offsets[i], a.seen[i] = offset, true
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
		Pod: ev.Pod, Probes: NewObj(0), Reasons: NewObj(0),
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

// causeKey is what eventType reads of an event.
type causeKey struct{ topic, what, result string }

// eventType is eventType(topic, ev), remembered: events name a few causes again and again.
func (f *Fold) eventType(topic string, ev *Event) string {
	key := causeKey{topic, ev.Kind, ""}
	switch topic {
	case TopicPodUpdates:
		key.what = ev.Op
	case TopicPleg:
		key.what = ev.Type
	case TopicProbeResults:
		key.what, key.result = ev.Probe, ev.Result
	}
	kind, ok := f.causes[key]
	if !ok {
		kind = eventType(topic, ev)
		if f.causes == nil {
			f.causes = map[causeKey]string{}
		}
		f.causes[key] = kind
	}
	return kind
}

// Fold folds input events into pod records and hands each status version to Emit, in the order
// the Python fold publishes them. It is fold_event and BatchFold.add_event for inputs that need no
// dead letter and hold no event; it gives up (unsupported) on anything else.
type Fold struct {
	Records map[string]*Record
	Pods    map[string]struct{} // every pod that has had a record
	Emit    func(v *Version)    // v and its status are only valid during the call: both are reused
	Events  int64

	version Version             // the one Emit is handed
	causes  map[causeKey]string // eventType's answers
	pool    *statusPool         // objects of dropped statuses (fold_recycle.go); nil: none kept

	// Times of recent event seconds, as RFC3339FromMs gives them, by second: events come in time
	// order, many within a second, and a pod's events (which Replay folds one after another)
	// within a few seconds.
	nows [nowSlots]struct {
		second int64
		now    any // a string; nil: none yet
	}
}

// nowSlots is how many seconds' times a fold remembers (a power of two).
const nowSlots = 256

// nowOf is RFC3339FromMs(tsMs) as a JSON value, remembered for recent seconds.
func (f *Fold) nowOf(tsMs int64) any {
	if tsMs < 0 {
		return RFC3339FromMs(tsMs) // gives up
	}
	second := tsMs / 1000
	slot := &f.nows[second&(nowSlots-1)]
	if slot.now == nil || slot.second != second {
		slot.now, slot.second = RFC3339FromMs(tsMs), second
	}
	return slot.now
}

// NewFold is a fold with no records that hands versions to emit.
func NewFold(emit func(v *Version)) *Fold {
	return &Fold{Records: map[string]*Record{}, Pods: map[string]struct{}{}, Emit: emit, pool: &statusPool{}}
}

// Apply folds one decoded event at its coordinates.
func (f *Fold) Apply(at Coordinates, ev *Event) {
	f.Events++
	record := f.Records[ev.UID]
	if record != nil && ev.Node != record.Node {
		unsupported("event from node %q for pod %s bound to %q (a forged dead letter)", ev.Node, record.UID, record.Node)
	}
	if record != nil {
		if last, ok := record.applied.get(at.Topic); ok && last >= at.Offset {
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
	if last, ok := record.applied.get(at.Topic); !ok || at.Offset > last {
		record.applied.set(at.Topic, at.Offset)
	}
	terminate := false
	switch at.Topic {
	case TopicPodUpdates:
		record.Pod, record.raw[rawPod] = ev.Pod, nil
	case TopicPleg:
		// Snapshots only move forward (see streams/fold.py).
		if ev.TsMs >= record.RuntimeTs {
			record.Runtime, record.RuntimeTs, record.raw[rawRuntime] = ev.Runtime, ev.TsMs, nil
		}
	case TopicProbeResults:
		applyProbeResult(record, ev)
		record.raw[rawProbes] = nil
	default:
		switch ev.Kind {
		case "sync_result":
			record.Reasons, record.raw[rawReasons] = reasonCache(ev.SyncResults), nil
		case "terminating":
			record.Terminating = true
		default: // terminated
			record.Terminating, record.Terminated = true, true
			if ev.Runtime != nil && ev.TsMs >= record.RuntimeTs {
				record.Runtime, record.RuntimeTs, record.raw[rawRuntime] = ev.Runtime, ev.TsMs, nil
			}
			terminate = true
		}
	}
	kind := f.eventType(at.Topic, ev)
	now := f.nowOf(at.TsMs)
	gp := record.genPod()
	generated := generateForFold(f.pool, gp, record.Status, record.Runtime, record.Probes, record.Reasons, record.Terminated)
	f.store(record, generated, kind, at, now, gp.isDeleting(), true)
	if terminate {
		terminated := TerminatePodStatus(record.Pod, record.Status)
		if !gp.isStatic() {
			record.Finished = true // sticky; static pods are never finished this way
		}
		f.store(record, terminated, kind, at, now, true, false)
	}
}

// applyProbeResult keeps a probe result under its container instance; only the two newest
// instances of a container are kept, as streams/fold.py does. Python copies the maps it changes;
// here they change in place, as nothing but the record holds them (status generation keeps none
// of their objects, only the result strings).
func applyProbeResult(record *Record, ev *Event) {
	cid, ok := ev.ContainerID.(string)
	if !ok {
		unsupported("probe result with a container id that is not a string")
	}
	byID := ObjOf(record.Probes.Get(ev.ContainerName))
	if byID == nil {
		byID = NewObj(3)
	}
	results := ObjOf(byID.Get(cid))
	if results == nil {
		results = NewObj(3)
	}
	byID.Delete(cid) // the instance goes last: the newest
	results.Set(ev.Probe, ev.result)
	byID.Set(cid, results)
	for byID.Len() > 2 {
		byID.Delete(byID.Keys()[0])
	}
	record.Probes.Set(ev.ContainerName, byID)
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

// store is _store: the status manager decides whether `generated` is a new version.
func (f *Fold) store(record *Record, generated *Obj, kind string, at Coordinates, now any, force, built bool) {
	facts := &record.genPod().podFacts
	status, version := setPodStatus(facts, record.Status, record.Version, generated, now, force, built)
	if status == nil {
		if built {
			f.pool.drop(generated) // nothing changed: the generated status goes
		}
		return
	}
	dropped := record.Status
	record.Status, record.Version, record.raw[rawStatus] = status, version, nil
	f.version = Version{
		UID: record.UID, Namespace: record.Namespace, Name: record.Name, Node: record.Node,
		Version: record.Version, Status: record.Status,
		CouldHaveRunningContainers: !record.Terminated, Finished: record.Finished,
		Static:    facts.isStatic() || record.Source != "api",
		MirrorUID: nil, Deleting: facts.isDeleting(),
		Cause: Cause{Kind: kind, Topic: at.Topic, Partition: at.Partition, Offset: at.Offset, TsMs: at.TsMs},
		TsMs:  at.TsMs, Rules: RulesVersion,
		record: record,
	}
	f.Emit(&f.version)
	f.pool.drop(dropped)
}
