// Package wire holds what the HTTP model providers share: a server-sent
// events decoder with bounds for hostile input, and the POST that turns
// HTTP failures into *engine.UpstreamError.
package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes bounds one SSE line. Real chunks are a few hundred bytes; a
// tool call's arguments rarely exceed a few KiB per fragment. A longer line
// is a broken or hostile server, not a model.
const MaxLineBytes = 1 << 20

// MaxEventBytes bounds the data of one event (several data lines joined).
const MaxEventBytes = 4 << 20

// Event is one dispatched server-sent event.
type Event struct {
	// Type is the event: field, empty when the server sent none.
	Type string
	// Data is the data: lines joined with "\n".
	Data []byte
}

// Decoder reads server-sent events following the WHATWG rules: CR, LF and
// CRLF line ends, ":" comments ignored, several data: lines joined with
// "\n", an event dispatched at a blank line, and a trailing event without
// its blank line discarded. It is an iterator: Next, Event, Err.
type Decoder struct {
	scn *bufio.Scanner
	evt Event
	err error
}

// NewDecoder returns a Decoder reading r.
func NewDecoder(r io.Reader) *Decoder {
	scn := bufio.NewScanner(r)
	scn.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	scn.Split(scanLines)
	return &Decoder{scn: scn}
}

// ErrLineTooLong reports an SSE line longer than MaxLineBytes.
var ErrLineTooLong = fmt.Errorf("event stream line longer than %d bytes", MaxLineBytes)

// ErrEventTooLarge reports event data larger than MaxEventBytes.
var ErrEventTooLarge = fmt.Errorf("event stream event larger than %d bytes", MaxEventBytes)

// Next reads the next event; it returns false at the end of the stream or
// on a read error (see Err).
func (d *Decoder) Next() bool {
	if d.err != nil {
		return false
	}
	var typ string
	var data []byte
	hasData := false
	for d.scn.Scan() {
		line := d.scn.Bytes()
		if len(line) == 0 {
			if !hasData {
				typ = ""
				continue
			}
			d.evt = Event{Type: typ, Data: data}
			return true
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			typ = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			if len(data)+len(value) > MaxEventBytes {
				d.err = ErrEventTooLarge
				return false
			}
			data = append(data, value...)
			hasData = true
		}
		// Comments (empty name), id:, retry: and unknown fields are ignored.
	}
	if err := d.scn.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = ErrLineTooLong
		}
		d.err = err
	}
	return false
}

// Event returns the event Next read.
func (d *Decoder) Event() Event { return d.evt }

// Err returns the read error that stopped Next, nil at a clean end.
func (d *Decoder) Err() error { return d.err }

// scanLines splits at CR, LF or CRLF.
func scanLines(data []byte, atEOF bool) (int, []byte, error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil // need one more byte to tell CR from CRLF
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
