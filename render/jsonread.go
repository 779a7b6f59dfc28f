// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/trawl-dev/trawl/call"
)

// JSONReader reads back the JSON lines the JSON renderer writes: each line
// becomes the call.Call that renders to the same line again, with the
// same Options.WallOffset, but for bytes that were not UTF-8, which JSON
// wrote \ufffd and which come back as U+FFFD itself. What JSON
// does not keep of a value, its C type, is guessed from its form: a
// negative number is an int, another number a uint (a float if it has a
// fraction or an exponent), a "0x" hex string a pointer, any other string
// a string, null a value not captured, an object a struct, an array an
// array. A ret with an "errno" is an error number.
type JSONReader struct {
	r    *bufio.Reader
	line int
	wall int64
}

// NewJSONReader returns a reader of the JSON lines in r.
func NewJSONReader(r io.Reader) *JSONReader {
	return &JSONReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Line returns the number of the line Read read last, from 1.
func (j *JSONReader) Line() int { return j.line }

// WallOffset returns the offset from the calls' TS to Unix time that the
// first call with a "time" gave, as Options.WallOffset; 0 until then.
func (j *JSONReader) WallOffset() int64 { return j.wall }

// Read reads the next call into c, skipping empty lines. It returns
// io.EOF after the last call, and an error naming the line for one that
// does not hold a call.
func (j *JSONReader) Read(c *call.Call) error {
	for {
		line, err := j.r.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			return err
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		j.line++
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := j.parse(line, c); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = errors.New("the line ends inside its JSON object (a truncated line?)")
			}
			return fmt.Errorf("line %d: %w", j.line, err)
		}
		return nil
	}
}

// parse parses one line into c.
func (j *JSONReader) parse(line []byte, c *call.Call) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	if err := expect(d, '{'); err != nil {
		return err
	}
	*c = call.Call{}
	var wall, errno string
	var haveFunc bool
	for d.More() {
		key, err := readString(d)
		if err != nil {
			return err
		}
		switch key {
		case "ts":
			c.TS, err = readUint(d, 64)
		case "time":
			wall, err = readString(d)
		case "cpu":
			c.CPU, err = readUint32(d)
		case "pid":
			c.PID, err = readUint32(d)
		case "tid":
			c.TID, err = readUint32(d)
		case "comm":
			c.Comm, err = readString(d)
		case "func":
			c.Func, err = readString(d)
			haveFunc = true
		case "module":
			c.Module, err = readString(d)
		case "kind":
			var kind string
			if kind, err = readString(d); err == nil && kind == "tracepoint" {
				c.Flags |= call.Event
			}
		case "args":
			c.Args, err = readObject(d)
		case "show":
			c.Show, err = readObject(d)
		case "ret":
			c.Ret, err = readValue(d, "")
		case "errno":
			errno, err = readString(d)
		case "duration_ns":
			c.Duration, err = readUint(d, 64)
		case "depth":
			var n uint64
			n, err = readUint(d, 31)
			c.Depth = int(n)
		case "chain":
			c.Chain, err = readUint32(d)
		case "origin":
			var tok json.Token
			if tok, err = d.Token(); err == nil && tok == true {
				c.Flags |= call.Origin
			}
		case "track":
			var s string
			if s, err = readString(d); err == nil {
				c.Track, err = strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
			}
		case "stack":
			c.Stack, err = readStrings(d)
		case "ustack":
			c.UStack, err = readStrings(d)
		case "flags":
			var flags []string
			if flags, err = readStrings(d); err == nil {
				err = setFlags(c, flags)
			}
		default:
			var skip json.RawMessage
			err = d.Decode(&skip) // a key of a later trawl
		}
		if err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
	}
	if err := expect(d, '}'); err != nil {
		return err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one JSON value on the line")
	}
	if !haveFunc {
		return errors.New(`not a call of trawl's JSON output: no "func"`)
	}
	if errno != "" && c.Ret.Kind == call.KindInt {
		c.Ret.Kind, c.Ret.Str = call.KindErrno, errno
	}
	if wall != "" && j.wall == 0 {
		t, err := time.Parse(time.RFC3339Nano, wall)
		if err != nil {
			return fmt.Errorf(`"time": %w`, err)
		}
		j.wall = t.UnixNano() - int64(c.TS)
	}
	return nil
}

func setFlags(c *call.Call, names []string) error {
	for _, name := range names {
		switch name {
		case "entry_only":
			c.Flags |= call.EntryOnly
		case "exit_only":
			c.Flags |= call.ExitOnly
		case "missed":
			c.Flags |= call.Missed
		case "origin":
			c.Flags |= call.Origin
		case "track_end":
			c.Flags |= call.TrackEnd
		default:
			return fmt.Errorf("unknown flag %q", name)
		}
	}
	return nil
}

// expect reads the delimiter want.
func expect(d *json.Decoder, want json.Delim) error {
	tok, err := d.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("want '%v', found %v", want, tok)
	}
	return nil
}

func readString(d *json.Decoder) (string, error) {
	tok, err := d.Token()
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("want a string, found %v", tok)
	}
	return s, nil
}

func readUint(d *json.Decoder, bits int) (uint64, error) {
	tok, err := d.Token()
	if err != nil {
		return 0, err
	}
	n, ok := tok.(json.Number)
	if !ok {
		return 0, fmt.Errorf("want a number, found %v", tok)
	}
	return strconv.ParseUint(string(n), 10, bits)
}

func readUint32(d *json.Decoder) (uint32, error) {
	n, err := readUint(d, 32)
	return uint32(n), err
}

func readStrings(d *json.Decoder) ([]string, error) {
	if err := expect(d, '['); err != nil {
		return nil, err
	}
	out := []string{}
	for d.More() {
		s, err := readString(d)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, expect(d, ']')
}

// readObject reads an object of values, in order, named by their keys.
func readObject(d *json.Decoder) ([]call.Value, error) {
	if err := expect(d, '{'); err != nil {
		return nil, err
	}
	var out []call.Value
	for d.More() {
		name, err := readString(d)
		if err != nil {
			return nil, err
		}
		v, err := readValue(d, name)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, expect(d, '}')
}

// readValue reads a value as the JSON renderer writes it.
func readValue(d *json.Decoder, name string) (call.Value, error) {
	tok, err := d.Token()
	if err != nil {
		return call.Value{}, err
	}
	v := call.Value{Name: name}
	switch t := tok.(type) {
	case nil:
		v.Kind = call.KindUnknown
	case bool:
		v.Kind = call.KindBool
		if t {
			v.Bits = 1
		}
	case json.Number:
		return v, setNumber(&v, string(t))
	case string:
		v.Kind, v.Str = call.KindString, t
		if hex, ok := strings.CutPrefix(t, "0x"); ok && hex != "" && hex[0] != '0' {
			if x, err := strconv.ParseUint(hex, 16, 64); err == nil && strconv.FormatUint(x, 16) == hex {
				v.Kind, v.Str, v.Bits = call.KindPointer, "", x
			}
		}
	case json.Delim:
		if t == '[' {
			return v, readArray(d, &v)
		}
		return v, readStruct(d, &v)
	}
	return v, nil
}

// setNumber sets v to the number s.
func setNumber(v *call.Value, s string) error {
	var err error
	switch {
	case strings.ContainsAny(s, ".eE"):
		var x float64
		x, err = strconv.ParseFloat(s, 64)
		v.Kind, v.Bits = call.KindFloat, math.Float64bits(x)
	case strings.HasPrefix(s, "-"):
		var x int64
		x, err = strconv.ParseInt(s, 10, 64)
		v.Kind, v.Bits = call.KindInt, uint64(x)
	default:
		v.Kind = call.KindUint
		v.Bits, err = strconv.ParseUint(s, 10, 64)
	}
	return err
}

// readStruct reads the members of a struct after its '{', and its marks.
func readStruct(d *json.Decoder, v *call.Value) error {
	v.Kind = call.KindStruct
	for d.More() {
		name, err := readString(d)
		if err != nil {
			return err
		}
		switch name {
		case "$more":
			var n uint64
			n, err = readUint(d, 31)
			v.More = int32(n)
		case "$short":
			v.Str, err = readString(d)
		case "$truncated", "$elided", "$cut":
			var tok json.Token
			if tok, err = d.Token(); err == nil && tok == true {
				v.Flags |= structMarks[name]
			}
		default:
			var f call.Value
			f, err = readValue(d, name)
			v.Fields = append(v.Fields, f)
		}
		if err != nil {
			return err
		}
	}
	return expect(d, '}')
}

// structMarks are the flags of the "$" keys of an object.
var structMarks = map[string]call.ValueFlags{"$truncated": call.Truncated, "$elided": call.Elided, "$cut": call.Cut}

// readArray reads the elements of an array after its '['; a last
// {"$more": N} counts the elements not shown.
func readArray(d *json.Decoder, v *call.Value) error {
	v.Kind = call.KindArray
	for d.More() {
		e, err := readValue(d, "")
		if err != nil {
			return err
		}
		if !d.More() && e.Kind == call.KindStruct && len(e.Fields) == 0 && e.Flags == 0 && e.More > 0 {
			v.More = e.More
			break
		}
		v.Fields = append(v.Fields, e)
	}
	return expect(d, ']')
}
