package http

import (
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
)

func TestParseProcAddr(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"0100007F:1F90", "127.0.0.1:8080"},
		{"00000000000000000000000001000000:0050", "[::1]:80"},
		{"0000000000000000FFFF00000100007F:1F90", "[::ffff:127.0.0.1]:8080"},
	}
	for _, tt := range tests {
		got, err := parseProcAddr(tt.in)
		if err != nil || got != netip.MustParseAddrPort(tt.want) {
			t.Errorf("parseProcAddr(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "0100007F", "zz:1F90", "0100007F:zz", "01007F:0050"} {
		if _, err := parseProcAddr(bad); err == nil {
			t.Errorf("parseProcAddr(%q) accepted", bad)
		}
	}
}

// A real loopback connection made by this process is found, owned by us.
func TestPeerUIDOfRealConnection(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("socket tables are read from /proc on Linux only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := <-accepted
	defer server.Close()
	uid, ok := peerUID(server.RemoteAddr().String(), server.LocalAddr().String())
	if !ok || uid != os.Getuid() {
		t.Fatalf("peerUID = %d, %v; want %d, true", uid, ok, os.Getuid())
	}
	if _, ok := peerUID("127.0.0.1:1", server.LocalAddr().String()); ok {
		t.Fatal("a socket that does not exist was found")
	}
}
