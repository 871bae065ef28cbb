package console

import (
	nethttp "net/http"
	"net/http/httptest"
	"testing"
)

// TestOwnerOnly: the console answers a loopback peer of the owner's OS
// user only, whatever network.json lets the rest of the gateway answer.
func TestOwnerOnly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remote string
		uid    int
		known  bool
		want   int
	}{
		{"OK", "127.0.0.1:4000", 1000, true, nethttp.StatusOK},
		{"OKIPv6", "[::1]:4000", 1000, true, nethttp.StatusOK},
		{"ErrNotLoopback", "192.0.2.7:4000", 1000, true, nethttp.StatusForbidden},
		{"ErrMappedNotLoopback", "[::ffff:192.0.2.7]:4000", 1000, true, nethttp.StatusForbidden},
		{"ErrNoAddress", "@", 1000, true, nethttp.StatusForbidden},
		{"ErrOtherUser", "127.0.0.1:4000", 1001, true, nethttp.StatusForbidden},
		{"ErrUserUnknown", "127.0.0.1:4000", 1000, false, nethttp.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Console{opts: Options{OwnerUID: 1000,
				PeerUID: func(*nethttp.Request) (int, bool) { return tc.uid, tc.known }}}
			h := c.ownerOnly(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {}))
			r := httptest.NewRequest("GET", "/console/", nil)
			r.RemoteAddr = tc.remote
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d", w.Code, tc.want)
			}
		})
	}
}
