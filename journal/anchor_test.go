package journal

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// TestAnchorMAC holds the anchor's MAC to its format (anchors written by
// earlier builds must still verify), computed between row hashes that share
// its HMAC state.
func TestAnchorMAC(t *testing.T) {
	c, err := newChainer(testKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []anchor{
		{KeyedAfter: 0, ID: 1, Hash: "ab", DurableID: 0},
		{KeyedAfter: 12, ID: 9_000_000_000, Hash: strings.Repeat("f", 64), DurableID: 8_999_999_999},
		{KeyedAfter: -1, ID: 0, Hash: "", DurableID: -5},
	} {
		c.rowHash("prev", []byte("row"))
		m := hmac.New(sha256.New, testKey)
		fmt.Fprintf(m, "plexus journal anchor v1\n%d\n%d\n%s\n%d\n", a.KeyedAfter, a.ID, a.Hash, a.DurableID)
		if got, want := c.anchorMAC(&a), hex.EncodeToString(m.Sum(nil)); got != want {
			t.Errorf("anchorMAC(%+v) = %s, want %s", a, got, want)
		}
	}
}
