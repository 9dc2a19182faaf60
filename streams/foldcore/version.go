package foldcore

import "strconv"

// Cause is the event that produced a pod-status version.
type Cause struct {
	Kind      string
	Topic     string
	Partition int64
	Offset    int64
	TsMs      int64
}

// Version is one pod-status-history record (models.VersionedPodStatus).
type Version struct {
	UID, Namespace, Name, Node string
	Version                    int64
	Status                     *Obj
	CouldHaveRunningContainers bool
	Finished                   bool
	Static                     bool
	MirrorUID                  any
	Deleting                   bool
	Cause                      Cause
	TsMs                       int64
	Rules                      int64

	record *Record // the record whose status this is (the live mode keeps its JSON there)
}

// AppendVersion appends the pod-status-history line for v, exactly as
// podledger.schemas.encode(models.VersionedPodStatus(...)) gives it: the
// model's fields in declaration order, the cause nested as models.Cause.
func AppendVersion(dst []byte, v *Version) []byte {
	dst, _, _ = appendVersion(dst, v)
	return dst
}

// appendVersion is AppendVersion, also saying where the status's JSON lies in the result.
func appendVersion(dst []byte, v *Version) (out []byte, statusStart, statusEnd int) {
	return appendVersionWith(dst, v, nil)
}

// appendVersionWith is appendVersion with the status encoded by encoder (nil: Encode).
func appendVersionWith(dst []byte, v *Version, encoder *versionEncoder) (out []byte, statusStart, statusEnd int) {
	lineStart := len(dst)
	dst = append(dst, `{"uid":`...)
	dst = appendString(dst, v.UID)
	dst = append(dst, `,"namespace":`...)
	dst = appendString(dst, v.Namespace)
	dst = append(dst, `,"name":`...)
	dst = appendString(dst, v.Name)
	dst = append(dst, `,"node":`...)
	dst = appendString(dst, v.Node)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, v.Version, 10)
	dst = append(dst, `,"status":`...)
	statusStart = len(dst)
	if encoder != nil && v.Status != nil {
		dst = encoder.status(dst, v.Status, lineStart)
	} else {
		dst = Encode(dst, v.Status)
	}
	statusEnd = len(dst)
	dst = append(dst, `,"could_have_running_containers":`...)
	dst = strconv.AppendBool(dst, v.CouldHaveRunningContainers)
	dst = append(dst, `,"finished":`...)
	dst = strconv.AppendBool(dst, v.Finished)
	dst = append(dst, `,"static":`...)
	dst = strconv.AppendBool(dst, v.Static)
	dst = append(dst, `,"mirror_uid":`...)
	dst = Encode(dst, v.MirrorUID)
	dst = append(dst, `,"deleting":`...)
	dst = strconv.AppendBool(dst, v.Deleting)
	dst = append(dst, `,"cause":{"type":`...)
	dst = appendString(dst, v.Cause.Kind)
	dst = append(dst, `,"topic":`...)
	dst = appendString(dst, v.Cause.Topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, v.Cause.Partition, 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, v.Cause.Offset, 10)
	dst = append(dst, `,"ts_ms":`...)
	dst = strconv.AppendInt(dst, v.Cause.TsMs, 10)
	dst = append(dst, `},"ts_ms":`...)
	dst = strconv.AppendInt(dst, v.TsMs, 10)
	dst = append(dst, `,"rules":`...)
	dst = strconv.AppendInt(dst, v.Rules, 10)
	return append(dst, '}'), statusStart, statusEnd
}
