package platform_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus/platform"
)

// TestReadSecretValue checks how a secret's value is taken from stdin: one
// trailing newline dropped, nothing from a device, an empty or oversized
// value refused.
func TestReadSecretValue(t *testing.T) {
	devNull, err := os.Open(os.DevNull) // a character device, as a terminal is
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := devNull.Close(); err != nil {
			t.Error(err)
		}
	})
	for _, tt := range []struct {
		name    string
		in      io.Reader
		want    string
		wantErr func(error) bool
	}{
		{name: "OneNewlineDropped", in: strings.NewReader("s3cret\n\n"), want: "s3cret\n"},
		{name: "NoNewline", in: strings.NewReader("s3cret"), want: "s3cret"},
		{name: "Device", in: devNull, wantErr: func(err error) bool { return errors.Is(err, platform.ErrSecretFromDevice) }},
		{name: "Empty", in: strings.NewReader("\n"), wantErr: func(err error) bool {
			var ve *platform.SecretValueError
			return errors.As(err, &ve) && ve.Empty
		}},
		{name: "MaxWithNewline", in: bytes.NewReader(append(bytes.Repeat([]byte("x"), platform.MaxSecretSize), '\n')),
			want: strings.Repeat("x", platform.MaxSecretSize)},
		{name: "TooLarge", in: bytes.NewReader(bytes.Repeat([]byte("x"), platform.MaxSecretSize+1)), wantErr: func(err error) bool {
			var ve *platform.SecretValueError
			return errors.As(err, &ve) && !ve.Empty
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := platform.ReadSecretValue(tt.in)
			switch {
			case tt.wantErr != nil:
				if !tt.wantErr(err) {
					t.Errorf("err = %v, want the refusal", err)
				}
			case err != nil:
				t.Fatal(err)
			case string(b) != tt.want:
				t.Errorf("value = %q, want %q", b, tt.want)
			}
		})
	}
}
