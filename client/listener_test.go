package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/internal/plexustest"
)

// TestForeignListenerHelper is the listener of another user that
// TestAdminRefusesForeignListener dials (plexustest.ForeignListener).
func TestForeignListenerHelper(t *testing.T) { plexustest.ServeForeignListener(t) }

// A listener of another user at the gateway's address gets a connection
// but not one byte: the connection-key never reaches it.
func TestAdminRefusesForeignListener(t *testing.T) {
	addr, received := plexustest.ForeignListener(t, "TestForeignListenerHelper")
	adm, err := NewAdmin("http://"+addr, "ck_secret", WithVia(plexus.ViaCLI))
	if err != nil {
		t.Fatal(err)
	}
	_, err = adm.Status(context.Background())
	var fe *ForeignListenerError
	if !errors.As(err, &fe) || fe.UID != plexustest.ForeignUID || fe.Want != os.Getuid() || fe.Addr != addr {
		t.Fatalf("Status = %v; want a ForeignListenerError naming %s and uid %d", err, addr, plexustest.ForeignUID)
	}
	if errors.Is(err, ErrUnreachable) {
		t.Errorf("%v reads as unreachable", err)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("error %q names neither the address nor the uid", err)
	}
	if got := received(); got != "0 <nil>" {
		t.Fatalf("the foreign listener received %s bytes; want none", got)
	}
}

// A listener of this user (the real daemon's case) is reached as before.
func TestAdminReachesOwnListener(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer ck_secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"version":"x"}`)
	}))
	defer srv.Close()
	adm, err := NewAdmin(srv.URL, "ck_secret")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Status(context.Background()); err != nil {
		t.Fatalf("Status at our own listener: %v", err)
	}
}
