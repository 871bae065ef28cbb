package ipc_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/plexus-gw/plexus/transports/ipc"
)

// frame returns payload behind a prefix declaring n bytes.
func frame(n uint32, payload string) []byte {
	b := binary.BigEndian.AppendUint32(nil, n)
	return append(b, payload...)
}

// whole returns payload framed with its own length.
func whole(payload string) []byte { return frame(uint32(len(payload)), payload) }

// countingReader counts the bytes handed out by the reader it wraps.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// endless is a reader that never runs out, to show a reader stops on its own.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '{'
	}
	return len(p), nil
}

func TestReadFrame(t *testing.T) {
	tests := []struct {
		name     string
		in       []byte
		limit    int
		want     string // the payload, when no error is expected
		wantKind ipc.FrameErrorKind
		wantEOF  bool
	}{
		{name: "OK", in: whole(`{"v":1}`), want: `{"v":1}`},
		{name: "OKSpaces", in: whole(" \t\r\n{}\n"), want: " \t\r\n{}\n"},
		{name: "OKUnicode", in: whole(`{"é":"日本"}`), want: `{"é":"日本"}`},
		{name: "OKAtLimit", in: whole(`{"a":1}`), limit: 7, want: `{"a":1}`},
		{name: "CleanEOF", in: nil, wantEOF: true},
		{name: "ZeroLength", in: frame(0, ""), wantKind: ipc.KindZeroLength},
		{name: "OversizeDefault", in: frame(ipc.DefaultMaxFrameBytes+1, "{}"), wantKind: ipc.KindOversize},
		{name: "OversizeConfigured", in: whole(`{"a":12}`), limit: 7, wantKind: ipc.KindOversize},
		{name: "OversizeMaxUint32", in: frame(0xFFFFFFFF, ""), wantKind: ipc.KindOversize},
		{name: "TruncatedPrefix1", in: []byte{0}, wantKind: ipc.KindTruncated},
		{name: "TruncatedPrefix3", in: []byte{0, 0, 0}, wantKind: ipc.KindTruncated},
		{name: "TruncatedBodyEmpty", in: frame(10, ""), wantKind: ipc.KindTruncated},
		{name: "TruncatedBody", in: frame(10, `{"a":`), wantKind: ipc.KindTruncated},
		{name: "InvalidUTF8", in: whole("{\"a\":\"\xff\"}"), wantKind: ipc.KindInvalidUTF8},
		{name: "InvalidUTF8Surrogate", in: whole("{\"a\":\"\xed\xa0\x80\"}"), wantKind: ipc.KindInvalidUTF8},
		{name: "Array", in: whole(`[1,2]`), wantKind: ipc.KindNotObject},
		{name: "String", in: whole(`"{}"`), wantKind: ipc.KindNotObject},
		{name: "Number", in: whole(`42`), wantKind: ipc.KindNotObject},
		{name: "Null", in: whole(`null`), wantKind: ipc.KindNotObject},
		{name: "True", in: whole(`true`), wantKind: ipc.KindNotObject},
		{name: "OnlySpaces", in: whole("   "), wantKind: ipc.KindNotObject},
		{name: "UnclosedObject", in: whole(`{"a":1`), wantKind: ipc.KindInvalidJSON},
		{name: "TrailingData", in: whole(`{} {}`), wantKind: ipc.KindInvalidJSON},
		{name: "BadToken", in: whole(`{a:1}`), wantKind: ipc.KindInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ipc.ReadFrame(bytes.NewReader(tt.in), tt.limit)
			switch {
			case tt.wantEOF:
				if err != io.EOF {
					t.Fatalf("err = %v, want io.EOF", err)
				}
			case tt.wantKind != "":
				var fe *ipc.FrameError
				if !errors.As(err, &fe) {
					t.Fatalf("err = %v, want a *FrameError", err)
				}
				if fe.Kind != tt.wantKind {
					t.Fatalf("kind = %q, want %q (%v)", fe.Kind, tt.wantKind, err)
				}
				if got != nil {
					t.Errorf("payload = %q, want nil", got)
				}
			default:
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if string(got) != tt.want {
					t.Errorf("payload = %q, want %q", got, tt.want)
				}
			}
		})
	}
}

// TestReadFrameOversizeReadsOnlyPrefix shows that a hostile prefix costs the
// four bytes it takes: the body is neither read nor allocated.
func TestReadFrameOversizeReadsOnlyPrefix(t *testing.T) {
	r := &countingReader{}
	var err error
	avg := testing.AllocsPerRun(10, func() {
		r.n = 0
		r.r = io.MultiReader(bytes.NewReader(frame(0xFFFFFFF0, "")), endless{})
		_, err = ipc.ReadFrame(r, 0)
	})
	var fe *ipc.FrameError
	if !errors.As(err, &fe) || fe.Kind != ipc.KindOversize {
		t.Fatalf("err = %v, want oversize", err)
	}
	if r.n != 4 {
		t.Errorf("read %d bytes, want 4", r.n)
	}
	if fe.Declared != 0xFFFFFFF0 || fe.Max != ipc.DefaultMaxFrameBytes {
		t.Errorf("declared, max = %d, %d; want %d, %d", fe.Declared, fe.Max, 0xFFFFFFF0, ipc.DefaultMaxFrameBytes)
	}
	if !fe.MustClose() {
		t.Error("MustClose() = false, want true")
	}
	// The error itself and the MultiReader's bookkeeping are all that may
	// be allocated: nowhere near a body.
	if avg > 8 {
		t.Errorf("%.0f allocations per oversize read, want a handful", avg)
	}
}

func TestReadFrameSequence(t *testing.T) {
	var buf bytes.Buffer
	msgs := []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}
	for _, m := range msgs {
		if err := ipc.WriteFrame(&buf, []byte(m), 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range msgs {
		got, err := ipc.ReadFrame(&buf, 0)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if _, err := ipc.ReadFrame(&buf, 0); err != io.EOF {
		t.Errorf("after the last frame: err = %v, want io.EOF", err)
	}
}

// A frame rejected after its body was read leaves the stream at a boundary.
func TestReadFrameBoundaryAfterBadBody(t *testing.T) {
	in := append(whole(`[1]`), whole(`{"ok":true}`)...)
	r := bytes.NewReader(in)
	_, err := ipc.ReadFrame(r, 0)
	var fe *ipc.FrameError
	if !errors.As(err, &fe) || fe.Kind != ipc.KindNotObject || fe.MustClose() {
		t.Fatalf("err = %v, want a not_object error that leaves the stream usable", err)
	}
	got, err := ipc.ReadFrame(r, 0)
	if err != nil || string(got) != `{"ok":true}` {
		t.Fatalf("next frame = %q, %v", got, err)
	}
}

func TestReadFrameIOError(t *testing.T) {
	boom := errors.New("boom")
	_, err := ipc.ReadFrame(io.MultiReader(bytes.NewReader([]byte{0, 0}), errReader{boom}), 0)
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want it to wrap the read error", err)
	}
	var fe *ipc.FrameError
	if errors.As(err, &fe) {
		t.Errorf("err = %v is a FrameError; a failing reader is not a bad frame", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestWriteFrame(t *testing.T) {
	tests := []struct {
		name     string
		payload  string
		limit    int
		wantKind ipc.FrameErrorKind
	}{
		{name: "OK", payload: `{"type":"core.welcome"}`},
		{name: "Empty", payload: "", wantKind: ipc.KindZeroLength},
		{name: "Oversize", payload: `{"a":"bcdef"}`, limit: 8, wantKind: ipc.KindOversize},
		{name: "InvalidUTF8", payload: "{\"a\":\"\xc3\"}", wantKind: ipc.KindInvalidUTF8},
		{name: "Array", payload: `[]`, wantKind: ipc.KindNotObject},
		{name: "InvalidJSON", payload: `{"a"}`, wantKind: ipc.KindInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := ipc.WriteFrame(&buf, []byte(tt.payload), tt.limit)
			if tt.wantKind != "" {
				var fe *ipc.FrameError
				if !errors.As(err, &fe) || fe.Kind != tt.wantKind {
					t.Fatalf("err = %v, want kind %q", err, tt.wantKind)
				}
				if buf.Len() != 0 {
					t.Errorf("wrote %d bytes of a refused frame", buf.Len())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), whole(tt.payload)) {
				t.Errorf("wrote % x, want % x", buf.Bytes(), whole(tt.payload))
			}
		})
	}
}

// TestFrameErrorHasNoPayload: errors are journaled as they are, so their
// text must never quote the frame.
func TestFrameErrorHasNoPayload(t *testing.T) {
	const secret = "hunter2-secret"
	for _, in := range [][]byte{
		whole(`{"session_token":"` + secret + `"`),
		whole(`{"session_token":"` + secret + "\xff\"}"),
		whole(`["` + secret + `"]`),
		whole(`{"session_token":"` + secret + `"} x`),
		frame(100, `{"session_token":"`+secret),
	} {
		_, err := ipc.ReadFrame(bytes.NewReader(in), 0)
		if err == nil {
			t.Fatalf("ReadFrame(%q) succeeded", in)
		}
		if strings.Contains(err.Error(), "hunter") || strings.Contains(err.Error(), "session") {
			t.Errorf("error %q quotes the payload", err)
		}
	}
}

func FuzzReadFrame(f *testing.F) {
	for _, seed := range [][]byte{
		whole(`{"v":1,"type":"agent.hello","id":"x","ts":"2026-01-16T12:00:00Z","payload":{}}`),
		whole(" {} "),
		nil,
		{0},
		{0, 0, 0},
		frame(0, ""),
		frame(0xFFFFFFFF, ""),
		frame(10, `{"a":`),
		whole("{\"a\":\"\xff\"}"),
		whole(`[1]`), whole(`"s"`), whole(`1`), whole(`null`),
		whole(`{} {}`), whole(`{a:1}`),
		append(whole(`{}`), whole(`{}`)...),
	} {
		f.Add(seed, uint16(64))
	}
	f.Fuzz(func(t *testing.T, in []byte, limit16 uint16) {
		limit := int(limit16)
		if limit == 0 {
			limit = 1 // 0 means the 4 MiB default; keep fuzzing cheap
		}
		r := &countingReader{r: bytes.NewReader(in)}
		got, err := ipc.ReadFrame(r, limit)
		if r.n > 4+limit {
			t.Fatalf("consumed %d bytes with limit %d", r.n, limit)
		}
		if err != nil {
			if got != nil {
				t.Fatalf("payload %q returned with error %v", got, err)
			}
			var fe *ipc.FrameError
			if err != io.EOF && !errors.As(err, &fe) {
				t.Fatalf("err = %v (%T), want io.EOF or *FrameError", err, err)
			}
			if err == io.EOF && len(in) != 0 {
				t.Fatalf("io.EOF with %d bytes of input", len(in))
			}
			return
		}
		if len(got) == 0 || len(got) > limit {
			t.Fatalf("payload of %d bytes with limit %d", len(got), limit)
		}
		if r.n != 4+len(got) {
			t.Fatalf("consumed %d bytes for a %d-byte payload", r.n, len(got))
		}
		if !utf8.Valid(got) || !json.Valid(got) {
			t.Fatalf("payload %q is not valid UTF-8 JSON", got)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(got, &obj); err != nil || obj == nil {
			t.Fatalf("payload %q is not a JSON object: %v", got, err)
		}
		// What was read can be written back identically.
		var buf bytes.Buffer
		if err := ipc.WriteFrame(&buf, got, limit); err != nil {
			t.Fatalf("WriteFrame of a read payload: %v", err)
		}
		if !bytes.Equal(buf.Bytes(), in[:r.n]) {
			t.Fatalf("rewritten frame % x differs from % x", buf.Bytes(), in[:r.n])
		}
	})
}
