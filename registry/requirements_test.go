package registry_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/platform"
	"github.com/plexus-gw/plexus/registry"
	"github.com/plexus-gw/plexus/transports/cliexec"
	"github.com/plexus-gw/plexus/transports/localrest"
	"github.com/plexus-gw/plexus/transports/stdio"
)

// TestCheckRequirements probes an extension through the real cli, stdio and
// local REST transports: each says what its capabilities need, each need is
// checked once, and the detail lists what failed in a stable order (the
// service, then the binaries as first named, then the tool process).
func TestCheckRequirements(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "present"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plat := platform.New(platform.Options{Home: t.TempDir(), Env: []string{"PATH=" + bin}})
	reg := registry.New(registry.Options{})
	reg.AddTransport(cliexec.New(plat, plat, cliexec.Options{}))
	st := stdio.New(plat, plat, stdio.Options{})
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	reg.AddTransport(st)
	rest := localrest.New(plat, plat, localrest.Options{})
	t.Cleanup(rest.Close)
	reg.AddTransport(rest)

	route := func(bin string) json.RawMessage { return json.RawMessage(`{"bin":"` + bin + `"}`) }
	capability := func(kind plexus.TransportKind, r json.RawMessage) plexus.ExtensionCapabilityDecl {
		return plexus.ExtensionCapabilityDecl{Transport: kind, Route: r}
	}
	tests := []struct {
		name   string
		m      plexus.ExtensionManifest
		status plexus.HealthStatus
		detail string
	}{
		{name: "OK", m: plexus.ExtensionManifest{Source: "ext:ok", Capabilities: []plexus.ExtensionCapabilityDecl{
			capability(plexus.TransportCLI, route("present")), capability(plexus.TransportCLI, route("/no/such/abs"))}},
			status: plexus.HealthOK},
		{name: "ErrBinariesOnceInOrder", m: plexus.ExtensionManifest{Source: "ext:bins", Capabilities: []plexus.ExtensionCapabilityDecl{
			capability(plexus.TransportStdio, route("missing-a")), capability(plexus.TransportCLI, route("missing-b")),
			capability(plexus.TransportCLI, route("missing-a")), capability(plexus.TransportCLI, route("present"))}},
			status: plexus.HealthUnavailable,
			detail: "missing-a is not installed (not found on the enriched PATH); missing-b is not installed (not found on the enriched PATH)"},
		{name: "ErrServiceFirst", m: plexus.ExtensionManifest{Source: "ext:svc",
			ServiceHint: &plexus.LocalServiceHint{App: "notes", DefaultPort: closedPort(t)},
			Capabilities: []plexus.ExtensionCapabilityDecl{
				capability(plexus.TransportCLI, route("missing-b")), capability(plexus.TransportLocalREST, json.RawMessage(`{}`))}},
			status: plexus.HealthUnavailable,
			detail: "the notes service is not reachable at"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := reg.CheckRequirements(t.Context(), tc.m)
			if h.Status != tc.status || !strings.HasPrefix(h.Detail, tc.detail) {
				t.Fatalf("health %s %q, want %s starting %q", h.Status, h.Detail, tc.status, tc.detail)
			}
			if tc.name == "ErrServiceFirst" && !strings.HasSuffix(h.Detail, "; missing-b is not installed (not found on the enriched PATH)") {
				t.Errorf("detail %q: want the service first, then the binary", h.Detail)
			}
		})
	}
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}
