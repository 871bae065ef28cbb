package http

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// peerUID finds the user owning the client end of a loopback TCP connection
// by reading the kernel's socket tables (/proc/net/tcp and tcp6 on Linux).
// It reports false where the tables are unavailable (another OS, a
// restricted /proc) or the socket is not found: "unknown", never a guess.
func peerUID(remote, local string) (int, bool) {
	r, err := netip.ParseAddrPort(remote)
	if err != nil {
		return 0, false
	}
	l, err := netip.ParseAddrPort(local)
	if err != nil {
		return 0, false
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if uid, ok := scanSocketTable(table, r, l); ok {
			return uid, true
		}
	}
	return 0, false
}

// scanSocketTable looks for the socket whose local end is the client's
// address and whose remote end is ours.
func scanSocketTable(path string, client, server netip.AddrPort) (int, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 {
			continue
		}
		la, err1 := parseProcAddr(fields[1])
		ra, err2 := parseProcAddr(fields[2])
		if err1 != nil || err2 != nil || !sameEnd(la, client) || !sameEnd(ra, server) {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		if err != nil {
			return 0, false
		}
		return uid, true
	}
	return 0, false
}

// sameEnd compares addresses across the IPv4 / IPv4-mapped-IPv6 forms the
// kernel and Go may each use for one loopback socket.
func sameEnd(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// parseProcAddr decodes "0100007F:1F90" (IPv4) or a 32-hex-digit IPv6
// address: each 32-bit word is in host (little-endian) byte order.
func parseProcAddr(s string) (netip.AddrPort, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("no port in %q", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	raw, err := hex.DecodeString(hexIP)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

// localAddrOf is the server end of a request's connection, as a string.
func localAddrOf(a any) string {
	if na, ok := a.(net.Addr); ok {
		return na.String()
	}
	return ""
}
