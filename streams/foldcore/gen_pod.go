package foldcore

// What status generation and the status manager read of a pod, worked out once per pod object.
// Pods are never changed, and the fold asks the same questions of a pod on each of its events:
// a record keeps its pod's answers until a pod update brings another pod object.

// podFacts are answers about one pod, each worked out on first use (and giving up there, as
// Python raises where it first asks; later asks would raise alike).
type podFacts struct {
	pod   *Obj
	known factSet

	static, deleted, deleting bool
	policy                    string
	qos                       any // a string, boxed once
	budget                    int
}

// factSet says which of podFacts' answers are worked out.
type factSet uint8

const (
	knowStatic factSet = 1 << iota
	knowDeleted
	knowDeleting
	knowPolicy
	knowQOS
	knowBudget
)

// isStatic is IsStatic(pod).
func (pf *podFacts) isStatic() bool {
	if pf.known&knowStatic == 0 {
		pf.static = IsStatic(pf.pod)
		pf.known |= knowStatic
	}
	return pf.static
}

// isDeleted reports a deletionTimestamp on the pod (metadata read as `or {}`).
func (pf *podFacts) isDeleted() bool {
	if pf.known&knowDeleted == 0 {
		pf.deleted = Truthy(asObj(pf.pod.Get("metadata"), "metadata").Get("deletionTimestamp"))
		pf.known |= knowDeleted
	}
	return pf.deleted
}

// isDeleting is the fold's is_deleting: a deletionTimestamp on a metadata object.
func (pf *podFacts) isDeleting() bool {
	if pf.known&knowDeleting == 0 {
		meta := ObjOf(pf.pod.Get("metadata"))
		pf.deleting = meta != nil && Truthy(meta.Get("deletionTimestamp"))
		pf.known |= knowDeleting
	}
	return pf.deleting
}

// restartPolicy is RestartPolicy(pod).
func (pf *podFacts) restartPolicy() string {
	if pf.known&knowPolicy == 0 {
		pf.policy = RestartPolicy(pf.pod)
		pf.known |= knowPolicy
	}
	return pf.policy
}

// messageBudget is messageBudget(pod).
func (pf *podFacts) messageBudget() int {
	if pf.known&knowBudget == 0 {
		pf.budget = messageBudget(pf.pod)
		pf.known |= knowBudget
	}
	return pf.budget
}

// genPod is what status generation reads of the pod: its API status and the fields of it that
// generation reads, its container lists (every container an object with a string name, or the
// generation gives up, as Python raises on a missing or unhashable name), their names and what
// probes read of them, and the pod's facts.
type genPod struct {
	podFacts
	spec, apiStatus            *Obj
	api                        apiFields
	containers, initContainers []*Obj
	names, initNames           []string
	probed, initProbed         []containerProbes
}

// apiFields are the fields of the pod's API status that generation reads (each as .get gives it).
type apiFields struct {
	qosClass, phase, reason, message, conditions any
}

// containerProbes is what setting started and ready reads of a container (gen_probes.go).
type containerProbes struct {
	sidecar                      bool // IsSidecar
	startupProbe, readinessProbe bool // the probe is set (not null)
}

// probesOf is each container's containerProbes.
func probesOf(containers []*Obj) []containerProbes {
	if len(containers) == 0 {
		return nil
	}
	out := make([]containerProbes, len(containers))
	for i, c := range containers {
		out[i] = containerProbes{
			sidecar:        IsSidecar(c),
			startupProbe:   c.Get("startupProbe") != nil,
			readinessProbe: c.Get("readinessProbe") != nil,
		}
	}
	return out
}

// newGenPod reads pod as status generation first does.
func newGenPod(pod *Obj) *genPod {
	gp := &genPod{podFacts: podFacts{pod: pod}}
	gp.apiStatus = asObj(pod.Get("status"), "status")
	gp.api = apiFields{
		qosClass: gp.apiStatus.Get("qosClass"), phase: gp.apiStatus.Get("phase"),
		reason: gp.apiStatus.Get("reason"), message: gp.apiStatus.Get("message"),
		conditions: gp.apiStatus.Get("conditions"),
	}
	gp.spec = asObj(pod.Get("spec"), "spec")
	gp.initContainers = containersOf(gp.spec.Get("initContainers"), "initContainers")
	gp.containers = containersOf(gp.spec.Get("containers"), "containers")
	gp.initNames = namesOf(gp.initContainers)
	gp.names = namesOf(gp.containers)
	gp.initProbed = probesOf(gp.initContainers)
	gp.probed = probesOf(gp.containers)
	return gp
}

// qosClass is GetPodQOS of the pod (qosClass), as a JSON value.
func (gp *genPod) qosClass() any {
	if gp.known&knowQOS == 0 {
		gp.qos = qosClass(gp)
		gp.known |= knowQOS
	}
	return gp.qos
}

// containerAt is the i-th of the init containers followed by the regular ones.
func (gp *genPod) containerAt(i int) *Obj {
	if i < len(gp.initContainers) {
		return gp.initContainers[i]
	}
	return gp.containers[i-len(gp.initContainers)]
}

// lastProbes is the containerProbes of the last (init or regular) container named name; a
// container that is not there has no probes and is no sidecar.
func (gp *genPod) lastProbes(init bool, name string) containerProbes {
	probed, names := gp.probed, gp.names
	if init {
		probed, names = gp.initProbed, gp.initNames
	}
	for i := len(names) - 1; i >= 0; i-- {
		if names[i] == name {
			return probed[i]
		}
	}
	return containerProbes{}
}
