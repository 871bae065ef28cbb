package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// sdkScan is the MCP Go SDK v1.8.0 client's scanner (mcp/event.go,
// scanEventsLimited and readEventLine, MIT licence), copied as it is but
// for its yield made a slice, so that the GoSDK reading is checked against
// the code it claims to match rather than against a second reading of it.
func sdkScan(r io.Reader, maxEventSize int) ([]ev, error) {
	reader := bufio.NewReader(r)
	var out []ev
	var (
		evt        ev
		dataBuf    *bytes.Buffer
		eventBytes int
	)
	yieldEvent := func() {
		if dataBuf != nil {
			evt.Data = dataBuf.String()
			dataBuf = nil
		}
		if evt == (ev{}) {
			return
		}
		out = append(out, evt)
		evt = ev{}
	}
	for {
		budget := -1
		if maxEventSize > 0 {
			budget = maxEventSize - eventBytes
		}
		line, err := sdkReadEventLine(reader, budget)
		if errors.Is(err, errSDKTooLarge) {
			return out, &TooLargeError{Max: maxEventSize}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return out, err
		}
		eventBytes += len(line)
		line = bytes.TrimRight(line, "\r\n")
		isEOF := errors.Is(err, io.EOF)
		if len(line) == 0 {
			yieldEvent()
			eventBytes = 0
			if isEOF {
				return out, nil
			}
			continue
		}
		before, after, found := bytes.Cut(line, []byte{':'})
		if !found {
			return out, &MalformedError{}
		}
		switch string(before) {
		case "event":
			evt.Type = strings.TrimSpace(string(after))
		case "id":
			evt.ID = strings.TrimSpace(string(after))
		case "retry":
			evt.Retry = strings.TrimSpace(string(after))
		case "data":
			data := bytes.TrimSpace(after)
			if dataBuf == nil {
				dataBuf = new(bytes.Buffer)
			} else {
				dataBuf.WriteByte('\n')
			}
			dataBuf.Write(data)
		}
		if isEOF {
			yieldEvent()
			return out, nil
		}
	}
}

var errSDKTooLarge = errors.New("too large")

func sdkReadEventLine(r *bufio.Reader, budget int) ([]byte, error) {
	if budget < 0 {
		return r.ReadBytes('\n')
	}
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > budget {
			return nil, errSDKTooLarge
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

// TestGoSDKMatchesSDKScannerReview: the GoSDK reading gives the events and
// the error the SDK's own scanner gives, on random streams of the pieces
// SSE is made of, with and without a bound, whatever the buffer size and
// the reads' sizes.
func TestGoSDKMatchesSDKScannerReview(t *testing.T) {
	pieces := []string{"data", "id", "event", "retry", ":", " ", "\t", "\r", "\n", "\n", "\n", "x", "\x00", "\xEF\xBB\xBF", "\u00a0", "\u2028", "message", strings.Repeat("y", 3000)}
	rng := rand.New(rand.NewPCG(1, 2))
	failed := 0
	for n := 0; n < 30000 && failed < 5; n++ {
		var b strings.Builder
		for range rng.IntN(30) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		stream := b.String()
		for _, max := range []int{0, 1 + rng.IntN(40), 1 + rng.IntN(9000)} {
			want, wantErr := sdkScan(strings.NewReader(stream), max)
			for _, size := range []int{16, 4096} {
				var rd io.Reader = iotest.HalfReader(strings.NewReader(stream))
				if size == 16 {
					rd = iotest.OneByteReader(strings.NewReader(stream))
				}
				got, err := readAll(newReaderSize(rd, size, Options{GoSDK: true, MaxEvent: max}))
				if fmt.Sprintf("%q %T", got, err) != fmt.Sprintf("%q %T", want, wantErr) {
					failed++
					t.Errorf("stream %.300q, bound %d, buffer %d: read %q, %T; the SDK's scanner %q, %T", stream, max, size, got, err, want, wantErr)
				}
			}
		}
	}
}
