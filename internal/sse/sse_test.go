package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ev is an Event as strings, for comparing.
type ev struct{ Type, ID, Retry, Data string }

func (e Event) strings() ev {
	return ev{string(e.Type), string(e.ID), string(e.Retry), string(e.Data)}
}

// readAll reads every event of r until an error, which it returns (nil
// for io.EOF).
func readAll(r *Reader) ([]ev, error) {
	var got []ev
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, e.strings())
	}
}

func TestReader(t *testing.T) {
	long := strings.Repeat("y", 5000) // longer than the reader's buffer
	for _, tc := range []struct {
		name, stream string
		o            Options
		want         []ev
		err          error // nil, or the error's type (errors.As)
	}{
		// The standard's reading.
		{name: "Data", stream: "data: a\n\n", want: []ev{{Data: "a"}}},
		{name: "DataJoined", stream: "data: a\ndata:b\ndata\ndata:  c \n\n", want: []ev{{Data: "a\nb\n\n c "}}},
		{name: "Fields", stream: "event: add\nid: 7\nretry: 10\ndata: x\n\n", want: []ev{{"add", "7", "10", "x"}}},
		{name: "FieldsAfterData", stream: "data: x\nevent: add\nid: 7\ndata: y\n\n", want: []ev{{Type: "add", ID: "7", Data: "x\ny"}}},
		{name: "LastFieldWins", stream: "event: a\nevent: b\nid: 1\nid: 2\ndata: x\nid: 3\nevent: c\n\n", want: []ev{{Type: "c", ID: "3", Data: "x"}}},
		{name: "OneSpaceTrimmed", stream: "event:  add \ndata:\tx\n\n", want: []ev{{Type: " add ", Data: "\tx"}}},
		{name: "Comments", stream: ": hello\n:\ndata: x\n: bye\n\n", want: []ev{{Data: "x"}}},
		{name: "UnknownFields", stream: "foo: bar\nDATA: no\ndata : no\ndata: x\n\n", want: []ev{{Data: "x"}}},
		{name: "NoDataNotDispatched", stream: "event: a\nid: 1\nretry: 5\n\ndata: x\n\n", want: []ev{{Data: "x"}}},
		{name: "EmptyDataDispatched", stream: "data\n\ndata:\n\n", want: []ev{{}, {}}},
		{name: "EventReset", stream: "event: a\ndata: 1\n\ndata: 2\n\n", want: []ev{{Type: "a", Data: "1"}, {Data: "2"}}},
		{name: "CRLF", stream: "data: a\r\nid: 1\r\n\r\ndata: b\r\n\r\n", want: []ev{{ID: "1", Data: "a"}, {Data: "b"}}},
		{name: "CR", stream: "data: a\rdata: b\r\rdata: c\r\r", want: []ev{{Data: "a\nb"}, {Data: "c"}}},
		{name: "MixedEnds", stream: "data: a\r\ndata: b\rdata: c\n\r\n", want: []ev{{Data: "a\nb\nc"}}},
		{name: "BOM", stream: "\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n", want: []ev{{Data: "a"}}},
		{name: "IDWithNUL", stream: "id: 1\nid: a\x00b\ndata: x\n\n", want: []ev{{ID: "1", Data: "x"}}},
		{name: "RetryDigitsOnly", stream: "retry: 10\nretry: -5\nretry: 1e3\nretry:\ndata: x\n\n", want: []ev{{Retry: "10", Data: "x"}}},
		{name: "UnterminatedDropped", stream: "data: a\n\ndata: b\n", want: []ev{{Data: "a"}}},
		{name: "UnterminatedLineDropped", stream: "data: a\n\ndata: b", want: []ev{{Data: "a"}}},
		{name: "LongLines", stream: "data: " + long + "\ndata: " + long + "\n\ndata: 2\n\n", want: []ev{{Data: long + "\n" + long}, {Data: "2"}}},
		{name: "Empty", stream: ""},
		// The bound.
		{name: "AtTheBound", stream: "data: abc\n\n", o: Options{MaxEvent: 11}, want: []ev{{Data: "abc"}}},
		{name: "PastTheBound", stream: "data: abcd\n\n", o: Options{MaxEvent: 11}, err: &TooLargeError{}},
		{name: "BoundPerEvent", stream: strings.Repeat("data: abc\n\n", 4), o: Options{MaxEvent: 11}, want: []ev{{Data: "abc"}, {Data: "abc"}, {Data: "abc"}, {Data: "abc"}}},
		{name: "LinesPastTheBound", stream: "data: a\ndata: b\n\n", o: Options{MaxEvent: 12}, err: &TooLargeError{}},
		{name: "CommentsCount", stream: ": xxxxxxxxxx\ndata: a\n\n", o: Options{MaxEvent: 12}, err: &TooLargeError{}},
		{name: "LongLinePastTheBound", stream: "data: " + long + long, o: Options{MaxEvent: 6000}, err: &TooLargeError{}},
		{name: "EventsBeforeTheLargeOne", stream: "data: a\n\ndata: " + long + "\n\n", o: Options{MaxEvent: 100}, want: []ev{{Data: "a"}}, err: &TooLargeError{}},
		// The MCP Go SDK's reading.
		{name: "SDKTrimmed", stream: "event: add \nid:\t7 \nretry: 5 \ndata:  a \ndata:b\n\n", o: Options{GoSDK: true}, want: []ev{{"add", "7", "5", "a\nb"}}},
		{name: "SDKNoColon", stream: "data: a\ndata\n\n", o: Options{GoSDK: true}, err: &MalformedError{}},
		{name: "SDKFieldsOnly", stream: "id: p\nretry: 5\n\n\n\nevent: x\n\nid:\n\ndata: y\n\n", o: Options{GoSDK: true}, want: []ev{{ID: "p", Retry: "5"}, {Type: "x"}, {Data: "y"}}},
		{name: "SDKUnterminated", stream: "data: a\n\ndata: b\n", o: Options{GoSDK: true}, want: []ev{{Data: "a"}, {Data: "b"}}},
		{name: "SDKUnterminatedLine", stream: "data: a\n\nid: 9", o: Options{GoSDK: true}, want: []ev{{Data: "a"}, {ID: "9"}}},
		{name: "SDKLFOnly", stream: "data: a\rdata: b\r\r\n\n", o: Options{GoSDK: true}, want: []ev{{Data: "a\rdata: b"}}},
		{name: "SDKCRsDropped", stream: "data: a\r\r\n\r\n", o: Options{GoSDK: true}, want: []ev{{Data: "a"}}},
		{name: "SDKBOMKept", stream: "\xEF\xBB\xBFdata: a\ndata: b\n\n", o: Options{GoSDK: true}, want: []ev{{Data: "b"}}},
		{name: "SDKIDWithNULKept", stream: "id: a\x00b\n\n", o: Options{GoSDK: true}, want: []ev{{ID: "a\x00b"}}},
		{name: "SDKRetryAsWritten", stream: "retry: -5\n\n", o: Options{GoSDK: true}, want: []ev{{Retry: "-5"}}},
		{name: "SDKPastTheBound", stream: "data: abcd\n", o: Options{GoSDK: true, MaxEvent: 9}, err: &TooLargeError{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, rd := range []struct {
				name string
				r    func() *Reader
			}{
				{"Whole", func() *Reader { return NewReader(strings.NewReader(tc.stream), tc.o) }},
				{"ByteByByte", func() *Reader { return newReaderSize(iotest.OneByteReader(strings.NewReader(tc.stream)), 16, tc.o) }},
			} {
				got, err := readAll(rd.r())
				if tc.err == nil && err != nil || tc.err != nil && (err == nil || !sameType(err, tc.err)) {
					t.Errorf("%s: error %v, want a %T", rd.name, err, tc.err)
				}
				if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s: events (-want +got):\n%s", rd.name, diff)
				}
			}
		})
	}
}

func sameType(err, want error) bool {
	switch want.(type) {
	case *TooLargeError:
		var e *TooLargeError
		return errors.As(err, &e)
	case *MalformedError:
		var e *MalformedError
		return errors.As(err, &e)
	}
	return errors.Is(err, want)
}

// TestReaderStopsAtEvent: Next returns an event at its blank line without
// reading further (a live stream's next event may be long in coming), a
// CR-ended one too.
func TestReaderStopsAtEvent(t *testing.T) {
	boom := errors.New("no more")
	for _, stream := range []string{"data: a\n\n", "data: a\r\r", "data: a\r\n\r\n"} {
		r := NewReader(io.MultiReader(strings.NewReader(stream), iotest.ErrReader(boom)), Options{})
		e, err := r.Next()
		if err != nil || string(e.Data) != "a" {
			t.Errorf("%q: event %q, error %v; want %q", stream, e.Data, err, "a")
		}
		if _, err := r.Next(); !errors.Is(err, boom) {
			t.Errorf("%q: then error %v, want %v", stream, err, boom)
		}
	}
}

// TestReaderErrorSticks: after an event beyond the bound, the rest of the
// stream is not read as events (it starts mid-event).
func TestReaderErrorSticks(t *testing.T) {
	r := NewReader(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\ndata: a\n\n"), Options{MaxEvent: 50})
	for i := range 2 {
		var large *TooLargeError
		if _, err := r.Next(); !errors.As(err, &large) || large.Max != 50 {
			t.Errorf("call %d: error %v, want the bound of 50 bytes", i, err)
		}
	}
}

// TestReaderAllocs: a stream of small events costs its buffers once, not
// an allocation per event.
func TestReaderAllocs(t *testing.T) {
	stream := strings.Repeat("event: message\nid: 0_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n", 50)
	allocs := testing.AllocsPerRun(20, func() {
		r := NewReader(strings.NewReader(stream), Options{MaxEvent: 1 << 20})
		for {
			if _, err := r.Next(); err != nil {
				return
			}
		}
	})
	if allocs > 3 { // bufio's buffer, the values' buffer, the strings.Reader; the Reader itself on the stack
		t.Errorf("%v allocations to read 50 events", allocs)
	}
}

// FuzzReader: the reader reads any stream as reference, a plain reading
// of the standard (or of the MCP Go SDK's scanner) over the whole stream
// at once, does: the same events, whatever the buffer size and however
// the stream is cut into reads; with a bound, a prefix of them, and all of
// them when the stream is within it.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: a\n\n", "event: x\r\ndata: a\r\ndata: b\r\n\r\n", "data: a\rid: 1\r\r", ":c\nretry: 12\ndata\n\n",
		"\xEF\xBB\xBFdata: a\n\n", "id: \x00\ndata: x\n\n", "data: a\n\ndata: b", "id: 1\n\nfoo\n", "data:  x \r\r\n\n",
	} {
		f.Add([]byte(s), false, 0)
		f.Add([]byte(s), true, 8)
	}
	f.Fuzz(func(t *testing.T, stream []byte, sdk bool, max int) {
		o := Options{GoSDK: sdk}
		want, wantErr := reference(stream, sdk)
		for _, size := range []int{16, 4096} {
			got, err := readAll(newReaderSize(iotest.HalfReader(bytes.NewReader(stream)), size, o))
			if !sameType(err, wantErr) && !(err == nil && wantErr == nil) {
				t.Fatalf("buffer %d: error %v, want %v", size, err, wantErr)
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("buffer %d: events (-reference +reader):\n%s", size, diff)
			}
		}
		o.MaxEvent = max%64 + 1
		got, err := readAll(newReaderSize(bytes.NewReader(stream), 16, o))
		var tooLarge *TooLargeError
		switch {
		case errors.As(err, &tooLarge):
			if len(stream) <= o.MaxEvent {
				t.Fatalf("a %d-byte stream beyond a %d-byte bound", len(stream), o.MaxEvent)
			}
			if len(got) > len(want) || cmp.Diff(want[:len(got)], got, cmpopts.EquateEmpty()) != "" {
				t.Fatalf("bounded: events %q, not a prefix of %q", got, want)
			}
		case !sameType(err, wantErr) && !(err == nil && wantErr == nil):
			t.Fatalf("bounded: error %v, want %v", err, wantErr)
		case cmp.Diff(want, got, cmpopts.EquateEmpty()) != "":
			t.Fatalf("bounded: events %q, want %q", got, want)
		}
	})
}

// reference reads stream whole: the standard's steps, or the SDK's
// scanner's (mcp/event.go), as plainly as they are written.
func reference(stream []byte, sdk bool) ([]ev, error) {
	var lines []string
	s := string(stream)
	if sdk {
		lines = strings.Split(s, "\n")
		for i := range lines {
			lines[i] = strings.TrimRight(lines[i], "\r")
		}
	} else {
		s = strings.TrimPrefix(s, "\xEF\xBB\xBF")
		for len(s) > 0 {
			i := strings.IndexAny(s, "\r\n")
			if i < 0 {
				break // unterminated: dropped
			}
			lines = append(lines, s[:i])
			if strings.HasPrefix(s[i:], "\r\n") {
				i++
			}
			s = s[i+1:]
		}
	}
	var out []ev
	var cur ev
	var hasData bool
	dispatch := func() {
		if !sdk && hasData || sdk && cur != (ev{}) {
			out = append(out, cur)
		}
		cur, hasData = ev{}, false
	}
	for _, line := range lines {
		if line == "" {
			dispatch()
			continue
		}
		name, value, found := strings.Cut(line, ":")
		switch {
		case !found && sdk:
			return out, &MalformedError{}
		case sdk:
			value = strings.TrimSpace(value)
		default:
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			if hasData {
				cur.Data += "\n"
			}
			cur.Data += value
			hasData = true
		case "event":
			cur.Type = value
		case "id":
			if sdk || !strings.Contains(value, "\x00") {
				cur.ID = value
			}
		case "retry":
			if sdk || value != "" && strings.Trim(value, "0123456789") == "" {
				cur.Retry = value
			}
		}
	}
	if sdk { // at the end, as at a blank line
		dispatch()
	}
	return out, nil
}
