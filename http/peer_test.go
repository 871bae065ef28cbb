package http

import (
	"net"
	"os"
	"runtime"
	"testing"
)

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
