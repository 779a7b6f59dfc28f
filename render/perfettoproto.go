// SPDX-License-Identifier: Apache-2.0

package render

import (
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/trawl-dev/trawl/call"
)

// PerfettoProto writes Perfetto's native trace format, a Trace protobuf
// message (internal/render/perfettopb holds its definition), which the
// Perfetto UI and trace_processor open as a timeline. It is about half the
// size of ChromeJSON and stays valid however it ends: the file is a series
// of TracePackets, each a length-delimited field of the Trace, and each
// Call writes whole packets with one Write, so a trace cut after any
// Write, as when trawl is killed, holds every call rendered until then.
// Nothing is buffered: a writer that buffers must keep each Write whole.
//
// Each process and thread gets a track, described (pid, tid, name) before
// its first event; a call is a slice on its thread's track, a
// TYPE_SLICE_BEGIN and a TYPE_SLICE_END event, or a TYPE_INSTANT event
// when its entry or exit was not seen; a tracepoint's event is a
// TYPE_INSTANT event, inside the slice of the call it happened in. Event names (the function),
// categories (the module, "vmlinux" for the kernel), annotation names and
// the strings of enumerators, error names, flags and pointers into
// symbols are interned: written once, in the packet that first uses them,
// and referred to by number after that. All packets are on one sequence,
// whose first packet clears the incremental state. Times are ns of the
// kernel clock: the first packet is a ClockSnapshot that makes
// CLOCK_MONOTONIC the trace's clock, with CLOCK_REALTIME beside it when
// Options.WallOffset is known, so that the UI can show wall-clock times.
//
// A slice's debug annotations are the args of ChromeJSON, with the same
// names, nesting and values (also in docs/json-schema.md): args (the
// function's arguments), ret, errno, cpu, kind and flags. Values map to
// annotation values as they map to JSON values, with these differences: a
// pointer that is NULL or not into a symbol is a pointer_value (the UI
// shows it in hex); a float that is not finite keeps its value; null (a
// value not captured) is an annotation without a value, which
// trace_processor skips as it skips JSON's null; an empty object or array
// is a legacy_json_value of {} or []. Invalid UTF-8 in strings becomes
// U+FFFD, byte by byte, as in JSON. Trace processor files the annotations
// under debug.: an argument is debug.args.NAME.
//
// The wire format is appended by hand with protowire rather than
// marshalled from the generated perfettopb messages: those take an
// allocation per message, oneof value and optional field, and marshalling
// them cost 56 allocations and about 10 µs more per call of
// BenchmarkPerfettoProto, where a call's whole budget is about 1 µs. The
// tests decode the output with the generated types.
type PerfettoProto struct {
	w          io.Writer
	wallOffset int64
	b          []byte
	started    bool
	// tracks maps pid<<32|tid of a thread and pid<<32|processTrack of a
	// process to the uuid of its track, once described: uuids count from
	// 1, so that most take a byte.
	tracks map[uint64]uint64
	// The interning tables of InternedData's fields, string -> iid.
	categories, eventNames, annotationNames, strs interner
	// interned lists the strings interned in the packet being built, to
	// be written in its InternedData.
	interned []internedString
	sym      []byte // appendSymbol's buffer
}

// interner is one interning table of InternedData.
type interner struct {
	field protowire.Number // of InternedData
	iids  map[string]uint64
}

type internedString struct {
	field protowire.Number
	iid   uint64
	s     string
}

// NewPerfettoProto returns a PerfettoProto renderer writing to w. Only
// opts.WallOffset is used.
func NewPerfettoProto(w io.Writer, opts Options) *PerfettoProto {
	in := func(field protowire.Number) interner {
		return interner{field: field, iids: map[string]uint64{}}
	}
	return &PerfettoProto{
		w:               w,
		wallOffset:      opts.WallOffset,
		tracks:          map[uint64]uint64{},
		categories:      in(internedEventCategories),
		eventNames:      in(internedEventNames),
		annotationNames: in(internedDebugAnnotationNames),
		strs:            in(internedDebugAnnotationStringValues),
	}
}

// Field numbers and enum values of Perfetto's trace format, named
// Message_field as in internal/render/perfettopb.
const (
	tracePacket = 1 // Trace.packet

	packetTimestamp               = 8
	packetClockSnapshot           = 6
	packetTrackEvent              = 11
	packetTrackDescriptor         = 60
	packetTrustedPacketSequenceID = 10
	packetInternedData            = 12
	packetSequenceFlags           = 13
	packetTracePacketDefaults     = 59

	seqIncrementalStateCleared = 1 // TracePacket.SequenceFlags
	seqNeedsIncrementalState   = 2

	defaultsTimestampClockID = 58 // TracePacketDefaults

	clockSnapshotClocks            = 1
	clockSnapshotPrimaryTraceClock = 2
	clockClockID                   = 1 // ClockSnapshot.Clock
	clockTimestamp                 = 2
	builtinClockRealtime           = 1 // BuiltinClock
	builtinClockMonotonic          = 3

	trackUUID     = 1 // TrackDescriptor
	trackProcess  = 3
	trackThread   = 4
	processPID    = 1 // ProcessDescriptor
	processName   = 6
	threadPID     = 1 // ThreadDescriptor
	threadTID     = 2
	threadName    = 5
	eventCategory = 3 // TrackEvent.category_iids
	eventNameIID  = 10
	eventType     = 9
	eventTrack    = 11
	eventDebug    = 4 // TrackEvent.debug_annotations

	typeSliceBegin = 1 // TrackEvent.Type
	typeSliceEnd   = 2
	typeInstant    = 3

	debugNameIID        = 1 // DebugAnnotation
	debugBoolValue      = 2
	debugUintValue      = 3
	debugIntValue       = 4
	debugDoubleValue    = 5
	debugStringValue    = 6
	debugPointerValue   = 7
	debugLegacyJSON     = 9
	debugStringValueIID = 17
	debugDictEntries    = 11
	debugArrayValues    = 12

	internedEventCategories             = 1 // InternedData
	internedEventNames                  = 2
	internedDebugAnnotationNames        = 3
	internedDebugAnnotationStringValues = 29
	// EventCategory, EventName, DebugAnnotationName and InternedString
	// all hold an iid and a string.
	internedIID  = 1
	internedName = 2
)

// sequenceID is the trusted_packet_sequence_id of every packet: the file
// is one sequence, as one writer makes it.
const sequenceID = 1

// processTrack stands for the tid in the key of a process track in
// PerfettoProto.tracks.
const processTrack = math.MaxUint32

// Call writes the packets of c: the clock snapshot before the first call,
// descriptors of a new process or thread track, and the call's events.
func (p *PerfettoProto) Call(c *call.Call) error {
	pid, tid := timelineTask(c)
	b := p.b
	if !p.started {
		b = p.appendClockSnapshot(b, c.TS)
	}
	if _, ok := p.tracks[pid<<32|processTrack]; !ok {
		b, _ = p.appendTrack(b, c.TS, pid<<32|processTrack, trackProcess, pid, 0, c.Comm)
	}
	thread, ok := p.tracks[pid<<32|tid]
	if !ok {
		b, thread = p.appendTrack(b, c.TS, pid<<32|tid, trackThread, pid, tid, c.Comm)
	}

	b, packet := p.openPacket(b, c.TS)
	b, event := appendOpen(b, packetTrackEvent)
	category := "vmlinux"
	if c.Module != "" {
		category = c.Module
	}
	b = appendVarintField(b, eventCategory, p.intern(&p.categories, category))
	b = appendVarintField(b, eventNameIID, p.intern(&p.eventNames, c.Func))
	typ := uint64(typeSliceBegin)
	if c.Flags&(call.EntryOnly|call.ExitOnly|call.Event) != 0 {
		typ = typeInstant
	}
	b = appendVarintField(b, eventType, typ)
	b = appendVarintField(b, eventTrack, thread)
	b = p.appendAnnotations(b, c)
	b = appendClose(b, event)
	b = p.closePacket(b, packet)

	if typ == typeSliceBegin {
		b, packet = p.openPacket(b, c.TS+c.Duration)
		b, event = appendOpen(b, packetTrackEvent)
		b = appendVarintField(b, eventType, typeSliceEnd)
		b = appendVarintField(b, eventTrack, thread)
		b = appendClose(b, event)
		b = p.closePacket(b, packet)
	}
	p.b = b
	if len(b) < perfettoBuffer {
		return nil
	}
	return p.Flush()
}

// perfettoBuffer is how many bytes of whole calls PerfettoProto keeps
// before writing them: one write(2) per call cost 4-6 µs in the test bed.
const perfettoBuffer = 64 << 10

// Flush writes the calls rendered so far in one Write, which ends at a
// packet boundary: a file cut after any Write is a valid trace.
func (p *PerfettoProto) Flush() error {
	if len(p.b) == 0 {
		return nil
	}
	_, err := p.w.Write(p.b)
	p.b = p.b[:0]
	return err
}

// Close writes what is left.
func (p *PerfettoProto) Close() error { return p.Flush() }

// appendClockSnapshot appends the packet that makes CLOCK_MONOTONIC, the
// clock of Call.TS, the trace's clock, and relates CLOCK_REALTIME to it
// when the offset is known.
func (p *PerfettoProto) appendClockSnapshot(b []byte, ts uint64) []byte {
	b, packet := appendOpen(b, tracePacket)
	b, snapshot := appendOpen(b, packetClockSnapshot)
	b = appendClock(b, builtinClockMonotonic, ts)
	if p.wallOffset != 0 {
		b = appendClock(b, builtinClockRealtime, uint64(int64(ts)+p.wallOffset))
	}
	b = appendVarintField(b, clockSnapshotPrimaryTraceClock, builtinClockMonotonic)
	b = appendClose(b, snapshot)
	return appendClose(b, packet)
}

func appendClock(b []byte, id, ts uint64) []byte {
	b, clock := appendOpen(b, clockSnapshotClocks)
	b = appendVarintField(b, clockClockID, id)
	b = appendVarintField(b, clockTimestamp, ts)
	return appendClose(b, clock)
}

// appendTrack gives the process (kind trackProcess) or thread
// (trackThread) with the key key in tracks a track, and appends its
// descriptor. It returns the track's uuid.
func (p *PerfettoProto) appendTrack(b []byte, ts, key uint64, kind protowire.Number, pid, tid uint64, name string) ([]byte, uint64) {
	uuid := uint64(len(p.tracks) + 1)
	p.tracks[key] = uuid
	b, packet := p.openPacket(b, ts)
	b, track := appendOpen(b, packetTrackDescriptor)
	b = appendVarintField(b, trackUUID, uuid)
	b, desc := appendOpen(b, kind)
	if kind == trackProcess {
		b = appendVarintField(b, processPID, pid)
		b = appendStringField(b, processName, name)
	} else {
		b = appendVarintField(b, threadPID, pid)
		b = appendVarintField(b, threadTID, tid)
		b = appendStringField(b, threadName, name)
	}
	b = appendClose(b, desc)
	b = appendClose(b, track)
	return p.closePacket(b, packet), uuid
}

// openPacket opens a packet of the sequence at time ts. The first one
// clears the incremental state and sets the clock of the timestamps; the
// others need that state.
func (p *PerfettoProto) openPacket(b []byte, ts uint64) ([]byte, int) {
	b, packet := appendOpen(b, tracePacket)
	b = appendVarintField(b, packetTimestamp, ts)
	b = appendVarintField(b, packetTrustedPacketSequenceID, sequenceID)
	if p.started {
		return appendVarintField(b, packetSequenceFlags, seqNeedsIncrementalState), packet
	}
	p.started = true
	b = appendVarintField(b, packetSequenceFlags, seqIncrementalStateCleared)
	b, defaults := appendOpen(b, packetTracePacketDefaults)
	b = appendVarintField(b, defaultsTimestampClockID, builtinClockMonotonic)
	return appendClose(b, defaults), packet
}

// closePacket appends the strings interned since openPacket and closes the
// packet.
func (p *PerfettoProto) closePacket(b []byte, packet int) []byte {
	if len(p.interned) > 0 {
		var data, entry int
		b, data = appendOpen(b, packetInternedData)
		for _, in := range p.interned {
			b, entry = appendOpen(b, in.field)
			b = appendVarintField(b, internedIID, in.iid)
			b = appendStringField(b, internedName, in.s)
			b = appendClose(b, entry)
		}
		b = appendClose(b, data)
		p.interned = p.interned[:0]
	}
	return appendClose(b, packet)
}

// intern returns the iid of s in table t, interning it in the packet
// being built if it is new.
func (p *PerfettoProto) intern(t *interner, s string) uint64 {
	if iid, ok := t.iids[s]; ok {
		return iid
	}
	iid := uint64(len(t.iids) + 1)
	t.iids[s] = iid
	p.interned = append(p.interned, internedString{t.field, iid, s})
	return iid
}

// appendAnnotations appends the debug annotations of c's event.
func (p *PerfettoProto) appendAnnotations(b []byte, c *call.Call) []byte {
	var ann int
	if c.Flags&call.ExitOnly == 0 {
		b, ann = p.openAnnotation(b, eventDebug, "args")
		if len(c.Args) == 0 {
			b = appendStringField(b, debugLegacyJSON, "{}")
		}
		for i := range c.Args {
			name := c.Args[i].Name
			if name == "" {
				name = "arg" + strconv.Itoa(i)
			}
			b = p.appendValue(b, debugDictEntries, name, &c.Args[i])
		}
		b = appendClose(b, ann)
	}
	if len(c.Show) > 0 {
		b, ann = p.openAnnotation(b, eventDebug, "show")
		for i := range c.Show {
			b = p.appendValue(b, debugDictEntries, c.Show[i].Name, &c.Show[i])
		}
		b = appendClose(b, ann)
	}
	if c.Ret.Kind != call.KindNone {
		b = p.appendValue(b, eventDebug, "ret", &c.Ret)
		if c.Ret.Kind == call.KindErrno && c.Ret.Str != "" {
			b, ann = p.openAnnotation(b, eventDebug, "errno")
			b = appendVarintField(b, debugStringValueIID, p.intern(&p.strs, c.Ret.Str))
			b = appendClose(b, ann)
		}
	}
	b, ann = p.openAnnotation(b, eventDebug, "cpu")
	b = appendVarintField(b, debugUintValue, uint64(c.CPU))
	b = appendClose(b, ann)
	if c.Chain != 0 {
		b, ann = p.openAnnotation(b, eventDebug, "chain")
		b = appendVarintField(b, debugUintValue, uint64(c.Chain))
		b = appendClose(b, ann)
	}
	for _, st := range []struct {
		name   string
		frames []string
	}{{"stack", c.Stack}, {"ustack", c.UStack}} {
		if st.frames == nil {
			continue
		}
		b, ann = p.openAnnotation(b, eventDebug, st.name)
		for _, frame := range st.frames {
			var elem int
			b, elem = appendOpen(b, debugArrayValues)
			b = appendVarintField(b, debugStringValueIID, p.intern(&p.strs, frame))
			b = appendClose(b, elem)
		}
		b = appendClose(b, ann)
	}
	if c.Flags&call.Event != 0 {
		b, ann = p.openAnnotation(b, eventDebug, "kind")
		b = appendVarintField(b, debugStringValueIID, p.intern(&p.strs, "tracepoint"))
		b = appendClose(b, ann)
	}
	if c.Flags&^call.Event != 0 {
		b, ann = p.openAnnotation(b, eventDebug, "flags")
		for _, fl := range []struct {
			flag call.CallFlags
			name string
		}{{call.EntryOnly, "entry_only"}, {call.ExitOnly, "exit_only"}, {call.Missed, "missed"}, {call.Origin, "origin"}} {
			if c.Flags&fl.flag != 0 {
				var elem int
				b, elem = appendOpen(b, debugArrayValues)
				b = appendVarintField(b, debugStringValueIID, p.intern(&p.strs, fl.name))
				b = appendClose(b, elem)
			}
		}
		b = appendClose(b, ann)
	}
	return b
}

// openAnnotation opens a DebugAnnotation in field and names it.
func (p *PerfettoProto) openAnnotation(b []byte, field protowire.Number, name string) ([]byte, int) {
	b, ann := appendOpen(b, field)
	return appendVarintField(b, debugNameIID, p.intern(&p.annotationNames, name)), ann
}

// appendValue appends v as a DebugAnnotation in field: named name in an
// event or a dictionary, unnamed in an array (debugArrayValues).
func (p *PerfettoProto) appendValue(b []byte, field protowire.Number, name string, v *call.Value) []byte {
	var ann int
	if field == debugArrayValues {
		b, ann = appendOpen(b, field)
	} else {
		b, ann = p.openAnnotation(b, field, name)
	}
	switch v.Kind {
	case call.KindInt, call.KindErrno:
		b = appendVarintField(b, debugIntValue, uint64(v.Int()))
	case call.KindUint:
		b = appendVarintField(b, debugUintValue, v.Uint())
	case call.KindBool:
		b = appendVarintField(b, debugBoolValue, protowire.EncodeBool(v.Bool()))
	case call.KindFloat:
		b = protowire.AppendTag(b, debugDoubleValue, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v.Float()))
	case call.KindEnum:
		if v.Str == "" {
			b = appendVarintField(b, debugUintValue, v.Uint())
		} else {
			b = appendVarintField(b, debugStringValueIID, p.intern(&p.strs, v.Str))
		}
	case call.KindString:
		b = appendStringField(b, debugStringValue, v.Str)
	case call.KindBytes:
		b = protowire.AppendTag(b, debugStringValue, protowire.BytesType)
		b = protowire.AppendVarint(b, 2*uint64(len(v.Str)))
		b = appendHexBytes(b, v.Str)
	case call.KindPointer:
		if v.Uint() == 0 || v.Str == "" {
			b = appendVarintField(b, debugPointerValue, v.Uint())
			break
		}
		b = p.appendSymbol(b, v)
	case call.KindStruct:
		b = p.appendObject(b, v)
	case call.KindArray:
		b = p.appendArray(b, v)
	}
	return appendClose(b, ann)
}

// maxInternedStrings bounds the table of interned string values: past it,
// pointers into symbols are written as strings.
const maxInternedStrings = 1 << 16

// appendSymbol appends the value of a pointer into a symbol, "sym+0xoff",
// as appendPointer shows it. The symbols a trace meets are few and
// repeated, so their strings are interned.
func (p *PerfettoProto) appendSymbol(b []byte, v *call.Value) []byte {
	p.sym = appendPointer(p.sym[:0], v)
	iid, ok := p.strs.iids[string(p.sym)]
	if !ok && len(p.strs.iids) < maxInternedStrings {
		iid, ok = p.intern(&p.strs, string(p.sym)), true
	}
	if ok {
		return appendVarintField(b, debugStringValueIID, iid)
	}
	b = protowire.AppendTag(b, debugStringValue, protowire.BytesType)
	return protowire.AppendBytes(b, p.sym)
}

// appendObject appends the members of a struct and the marks of the JSON
// schema ($more, $truncated, $elided, $cut, $short) as dictionary entries.
func (p *PerfettoProto) appendObject(b []byte, v *call.Value) []byte {
	if len(v.Fields) == 0 && v.More == 0 && !v.IsTruncated() && !v.IsElided() && !v.IsCut() && v.Str == "" {
		return appendStringField(b, debugLegacyJSON, "{}")
	}
	for i := range v.Fields {
		b = p.appendValue(b, debugDictEntries, v.Fields[i].Name, &v.Fields[i])
	}
	if v.More > 0 {
		b = p.appendMore(b, v.More)
	}
	if v.IsTruncated() {
		b = p.appendMark(b, "$truncated")
	}
	if v.IsElided() {
		b = p.appendMark(b, "$elided")
	}
	if v.IsCut() {
		b = p.appendMark(b, "$cut")
	}
	if v.Str != "" {
		short := call.Value{Kind: call.KindString, Str: v.Str}
		b = p.appendValue(b, debugDictEntries, "$short", &short)
	}
	return b
}

// appendArray appends the elements of an array and, when it was cut, a
// last element {"$more": N}; an elided array is {"$elided": true}.
func (p *PerfettoProto) appendArray(b []byte, v *call.Value) []byte {
	switch {
	case v.IsElided():
		return p.appendMark(b, "$elided")
	case len(v.Fields) == 0 && v.More == 0:
		return appendStringField(b, debugLegacyJSON, "[]")
	}
	for i := range v.Fields {
		b = p.appendValue(b, debugArrayValues, "", &v.Fields[i])
	}
	if v.More > 0 {
		var elem int
		b, elem = appendOpen(b, debugArrayValues)
		b = p.appendMore(b, v.More)
		b = appendClose(b, elem)
	}
	return b
}

// appendMore appends the dictionary entry "$more": n.
func (p *PerfettoProto) appendMore(b []byte, n int32) []byte {
	b, ann := p.openAnnotation(b, debugDictEntries, "$more")
	b = appendVarintField(b, debugIntValue, uint64(n))
	return appendClose(b, ann)
}

// appendMark appends the dictionary entry name: true.
func (p *PerfettoProto) appendMark(b []byte, name string) []byte {
	b, ann := p.openAnnotation(b, debugDictEntries, name)
	b = appendVarintField(b, debugBoolValue, 1)
	return appendClose(b, ann)
}

// appendOpen appends the tag of the length-delimited field num and one
// byte for its length, which appendClose sets. It returns where the
// field's content starts.
func appendOpen(b []byte, num protowire.Number) ([]byte, int) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = append(b, 0)
	return b, len(b)
}

// appendClose sets the length of the field whose content starts at start
// and runs to the end of b, moving the content when its length takes more
// than the one byte appendOpen left.
func appendClose(b []byte, start int) []byte {
	n := len(b) - start
	if n < 0x80 {
		b[start-1] = byte(n)
		return b
	}
	size := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, size-1)...)
	copy(b[start-1+size:], b[start:start+n])
	protowire.AppendVarint(b[:start-1], uint64(n))
	return b
}

func appendVarintField(b []byte, num protowire.Number, x uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, x)
}

// appendStringField appends s as a string field, invalid UTF-8 replaced
// byte by byte with U+FFFD as JSON output does.
func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if utf8.ValidString(s) {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendString(b, s)
	}
	b, start := appendOpen(b, num)
	for _, r := range s { // an invalid byte is a RuneError
		b = utf8.AppendRune(b, r)
	}
	return appendClose(b, start)
}
