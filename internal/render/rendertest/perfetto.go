// SPDX-License-Identifier: Apache-2.0

package rendertest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/trawl-dev/trawl/internal/render/perfettopb"
)

// PerfettoTrace is what DecodePerfetto reads from a Perfetto protobuf
// trace.
type PerfettoTrace struct {
	// WallOffset is CLOCK_REALTIME minus CLOCK_MONOTONIC, the trace's
	// clock, from the clock snapshot; 0 when the snapshot has no
	// CLOCK_REALTIME.
	WallOffset int64
	// Events are the slices and instant events in the order their first
	// packet was written.
	Events []PerfettoEvent
}

// PerfettoEvent is a slice or an instant event, with its track's names.
type PerfettoEvent struct {
	Name, Category string
	Instant        bool
	TS, Dur        uint64 // ns of the trace's clock; Dur is 0 for instants
	PID, TID       int64
	Process        string // process_name of the process track of PID
	Thread         string
	// Args are the debug annotations as encoding/json with UseNumber
	// decodes the JSON the annotations stand for: a dictionary is a
	// map[string]any, an array a []any, a number a json.Number, a pointer
	// a "0x..." string or nil for 0; an annotation without a value and a
	// double that is not finite are nil.
	Args map[string]any
}

// DecodePerfetto decodes a Perfetto protobuf trace as trawl writes it, and
// checks what trace_processor needs to import every event: a clock
// snapshot first that makes CLOCK_MONOTONIC the trace's clock, every
// packet on one sequence whose first packet clears the incremental state
// and sets CLOCK_MONOTONIC as the default clock of timestamps, interned
// strings defined before their use, each event on a thread track described
// before it, every field known to perfettopb, no dictionary with a key
// twice, and slice ends that close the slices they were written for once
// the events are sorted by time, as trace_processor sorts them. An empty
// input is an empty trace.
func DecodePerfetto(b []byte) (*PerfettoTrace, error) {
	var trace pb.Trace
	if err := proto.Unmarshal(b, &trace); err != nil {
		return nil, fmt.Errorf("not a Perfetto trace: %w", err)
	}
	if err := checkKnown(trace.ProtoReflect(), "Trace"); err != nil {
		return nil, err
	}
	d := perfettoDecoder{
		out:    &PerfettoTrace{},
		tracks: map[uint64]perfettoTrack{},
		procs:  map[int64]string{},
	}
	for i, p := range trace.GetPacket() {
		if err := d.packet(i, p); err != nil {
			return nil, fmt.Errorf("packet %d: %w", i+1, err)
		}
	}
	if err := d.pair(); err != nil {
		return nil, err
	}
	for i := range d.out.Events {
		e := &d.out.Events[i]
		e.Process = d.procs[e.PID]
	}
	return d.out, nil
}

type perfettoDecoder struct {
	out      *PerfettoTrace
	seq      uint32
	cleared  bool                        // the sequence's incremental state was cleared
	interned map[int32]map[uint64]string // InternedData field -> iid -> string
	tracks   map[uint64]perfettoTrack
	procs    map[int64]string
	marks    []perfettoMark
}

type perfettoTrack struct {
	pid, tid int64
	name     string
}

// perfettoMark is a slice begin or end, or an instant.
type perfettoMark struct {
	ts    uint64
	typ   pb.TrackEvent_Type
	track uint64
	event int // index in out.Events of a begin or instant
}

func (d *perfettoDecoder) packet(i int, p *pb.TracePacket) error {
	if i == 0 {
		return d.clockSnapshot(p.GetClockSnapshot())
	}
	if p.GetClockSnapshot() != nil {
		return errors.New("a clock snapshot after the first packet")
	}
	seq := p.GetTrustedPacketSequenceId()
	if seq == 0 || d.seq != 0 && seq != d.seq {
		return fmt.Errorf("sequence %d, want one sequence, not 0", seq)
	}
	d.seq = seq
	flags := p.GetSequenceFlags()
	if flags&uint32(pb.TracePacket_SEQ_INCREMENTAL_STATE_CLEARED) != 0 {
		d.cleared = true
		d.interned = map[int32]map[uint64]string{}
		if clock := p.GetTracePacketDefaults().GetTimestampClockId(); clock != uint32(pb.BuiltinClock_BUILTIN_CLOCK_MONOTONIC) {
			return fmt.Errorf("default timestamp clock %d, want CLOCK_MONOTONIC", clock)
		}
	} else if !d.cleared || flags&uint32(pb.TracePacket_SEQ_NEEDS_INCREMENTAL_STATE) == 0 {
		// trace_processor skips such a packet, or reads it without the
		// default clock.
		return fmt.Errorf("sequence flags %d: the sequence's incremental state is not valid or not needed", flags)
	}
	if p.Timestamp == nil || p.TimestampClockId != nil {
		return errors.New("no timestamp, or one not of the default clock")
	}
	if err := d.intern(p.GetInternedData()); err != nil {
		return err
	}
	switch {
	case p.GetTrackDescriptor() != nil:
		return d.track(p.GetTrackDescriptor())
	case p.GetTrackEvent() != nil:
		return d.event(p.GetTimestamp(), p.GetTrackEvent())
	}
	return errors.New("no track descriptor or event")
}

func (d *perfettoDecoder) clockSnapshot(s *pb.ClockSnapshot) error {
	if s.GetPrimaryTraceClock() != pb.BuiltinClock_BUILTIN_CLOCK_MONOTONIC {
		return fmt.Errorf("first packet: not a clock snapshot making CLOCK_MONOTONIC the trace's clock: %v", s)
	}
	clocks := map[uint32]uint64{}
	for _, c := range s.GetClocks() {
		clocks[c.GetClockId()] = c.GetTimestamp()
	}
	mono, ok := clocks[uint32(pb.BuiltinClock_BUILTIN_CLOCK_MONOTONIC)]
	if !ok {
		return fmt.Errorf("first packet: clock snapshot without CLOCK_MONOTONIC: %v", s)
	}
	if real, ok := clocks[uint32(pb.BuiltinClock_BUILTIN_CLOCK_REALTIME)]; ok {
		d.out.WallOffset = int64(real - mono)
	}
	return nil
}

// intern adds the strings of data to the tables.
func (d *perfettoDecoder) intern(data *pb.InternedData) error {
	add := func(field int32, iid uint64, s string) error {
		t := d.interned[field]
		if t == nil {
			t = map[uint64]string{}
			d.interned[field] = t
		}
		if _, ok := t[iid]; ok || iid == 0 {
			return fmt.Errorf("interned data field %d: iid %d defined twice or 0", field, iid)
		}
		t[iid] = s
		return nil
	}
	var errs []error
	for _, e := range data.GetEventCategories() {
		errs = append(errs, add(1, e.GetIid(), e.GetName()))
	}
	for _, e := range data.GetEventNames() {
		errs = append(errs, add(2, e.GetIid(), e.GetName()))
	}
	for _, e := range data.GetDebugAnnotationNames() {
		errs = append(errs, add(3, e.GetIid(), e.GetName()))
	}
	for _, e := range data.GetDebugAnnotationStringValues() {
		errs = append(errs, add(29, e.GetIid(), string(e.GetStr())))
	}
	return errors.Join(errs...)
}

// lookup returns the string interned as iid in InternedData's field.
func (d *perfettoDecoder) lookup(field int32, iid uint64) (string, error) {
	s, ok := d.interned[field][iid]
	if !ok {
		return "", fmt.Errorf("iid %d of interned data field %d is not defined", iid, field)
	}
	return s, nil
}

func (d *perfettoDecoder) track(t *pb.TrackDescriptor) error {
	if t.GetUuid() == 0 {
		return errors.New("track descriptor without uuid")
	}
	if _, ok := d.tracks[t.GetUuid()]; ok {
		return fmt.Errorf("track %d described twice", t.GetUuid())
	}
	switch {
	case t.GetThread() != nil:
		th := t.GetThread()
		d.tracks[t.GetUuid()] = perfettoTrack{int64(th.GetPid()), th.GetTid(), th.GetThreadName()}
	case t.GetProcess() != nil:
		pid := int64(t.GetProcess().GetPid())
		if _, ok := d.procs[pid]; ok {
			return fmt.Errorf("process %d described twice", pid)
		}
		d.procs[pid] = t.GetProcess().GetProcessName()
		d.tracks[t.GetUuid()] = perfettoTrack{pid: pid, tid: -1}
	default:
		return errors.New("track descriptor of neither a process nor a thread")
	}
	return nil
}

func (d *perfettoDecoder) event(ts uint64, e *pb.TrackEvent) error {
	track, ok := d.tracks[e.GetTrackUuid()]
	if !ok || track.tid < 0 {
		return fmt.Errorf("event on track %d, not a thread track described before", e.GetTrackUuid())
	}
	m := perfettoMark{ts: ts, typ: e.GetType(), track: e.GetTrackUuid(), event: -1}
	switch e.GetType() {
	case pb.TrackEvent_TYPE_SLICE_END:
		d.marks = append(d.marks, m)
		return nil
	case pb.TrackEvent_TYPE_SLICE_BEGIN, pb.TrackEvent_TYPE_INSTANT:
	default:
		return fmt.Errorf("event of type %v", e.GetType())
	}
	name, err := d.lookup(2, e.GetNameIid())
	if err != nil {
		return err
	}
	if len(e.GetCategoryIids()) != 1 {
		return fmt.Errorf("%s: %d categories, want 1", name, len(e.GetCategoryIids()))
	}
	cat, err := d.lookup(1, e.GetCategoryIids()[0])
	if err != nil {
		return err
	}
	args, err := d.dict(e.GetDebugAnnotations())
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	m.event = len(d.out.Events)
	d.marks = append(d.marks, m)
	d.out.Events = append(d.out.Events, PerfettoEvent{
		Name: name, Category: cat, Instant: m.typ == pb.TrackEvent_TYPE_INSTANT, TS: ts,
		PID: track.pid, TID: track.tid, Thread: track.name, Args: args,
	})
	return nil
}

// dict returns the annotations as a dictionary.
func (d *perfettoDecoder) dict(anns []*pb.DebugAnnotation) (map[string]any, error) {
	m := map[string]any{}
	for _, a := range anns {
		name, err := d.lookup(3, a.GetNameIid())
		if err != nil {
			return nil, err
		}
		if _, ok := m[name]; ok {
			return nil, fmt.Errorf("key %q twice: one value hides the other", name)
		}
		if m[name], err = d.value(a); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return m, nil
}

// value returns an annotation's value as JSON decodes it.
func (d *perfettoDecoder) value(a *pb.DebugAnnotation) (any, error) {
	switch v := a.GetValue().(type) {
	case nil:
		switch {
		case len(a.GetDictEntries()) > 0:
			return d.dict(a.GetDictEntries())
		case len(a.GetArrayValues()) > 0:
			s := []any{}
			for _, e := range a.GetArrayValues() {
				if e.GetNameField() != nil {
					return nil, errors.New("named array element")
				}
				x, err := d.value(e)
				if err != nil {
					return nil, err
				}
				s = append(s, x)
			}
			return s, nil
		}
		return nil, nil
	case *pb.DebugAnnotation_BoolValue:
		return v.BoolValue, nil
	case *pb.DebugAnnotation_UintValue:
		return json.Number(strconv.FormatUint(v.UintValue, 10)), nil
	case *pb.DebugAnnotation_IntValue:
		return json.Number(strconv.FormatInt(v.IntValue, 10)), nil
	case *pb.DebugAnnotation_DoubleValue:
		if math.IsInf(v.DoubleValue, 0) || math.IsNaN(v.DoubleValue) {
			return nil, nil
		}
		return json.Number(strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)), nil
	case *pb.DebugAnnotation_PointerValue:
		if v.PointerValue == 0 {
			return nil, nil
		}
		return "0x" + strconv.FormatUint(v.PointerValue, 16), nil
	case *pb.DebugAnnotation_StringValue:
		return v.StringValue, nil
	case *pb.DebugAnnotation_StringValueIid:
		return d.lookup(29, v.StringValueIid)
	case *pb.DebugAnnotation_LegacyJsonValue:
		dec := json.NewDecoder(bytes.NewReader([]byte(v.LegacyJsonValue)))
		dec.UseNumber()
		var x any
		err := dec.Decode(&x)
		return x, err
	}
	return nil, fmt.Errorf("unexpected value %T", a.GetValue())
}

// pair sets the duration of each slice from the end that closes it on its
// track once the events are sorted by time, as trace_processor does.
func (d *perfettoDecoder) pair() error {
	marks := slices.Clone(d.marks)
	slices.SortStableFunc(marks, func(a, b perfettoMark) int { return cmp.Compare(a.ts, b.ts) })
	open := map[uint64][]int{} // track -> stack of the open slices' events
	for _, m := range marks {
		stack := open[m.track]
		switch m.typ {
		case pb.TrackEvent_TYPE_SLICE_BEGIN:
			open[m.track] = append(stack, m.event)
		case pb.TrackEvent_TYPE_SLICE_END:
			if len(stack) == 0 {
				return fmt.Errorf("track %d: slice end at %d without a slice", m.track, m.ts)
			}
			e := &d.out.Events[stack[len(stack)-1]]
			e.Dur = m.ts - e.TS
			open[m.track] = stack[:len(stack)-1]
		}
	}
	for track, stack := range open {
		if len(stack) > 0 {
			return fmt.Errorf("track %d: %d slices never end", track, len(stack))
		}
	}
	// A slice's end is written right after its begin: check that sorting
	// paired each begin with its own end.
	for i, m := range d.marks {
		if m.typ == pb.TrackEvent_TYPE_SLICE_BEGIN {
			e := &d.out.Events[m.event]
			if i+1 == len(d.marks) || d.marks[i+1].typ != pb.TrackEvent_TYPE_SLICE_END || d.marks[i+1].ts-e.TS != e.Dur {
				return fmt.Errorf("slice %s at %d: sorted by time, it does not end where its end was written", e.Name, e.TS)
			}
		}
	}
	return nil
}

// checkKnown returns an error if m or a message in it has fields
// perfettopb does not know: trawl would be writing something else than
// what it means to.
func checkKnown(m protoreflect.Message, path string) error {
	if len(m.GetUnknown()) > 0 {
		return fmt.Errorf("%s: unknown fields", path)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind {
			return true
		}
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			for i := 0; i < v.List().Len() && err == nil; i++ {
				err = checkKnown(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))
			}
		default:
			err = checkKnown(v.Message(), p)
		}
		return err == nil
	})
	return err
}
