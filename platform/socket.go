package platform

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// SocketUID finds the user owning the TCP socket whose local end is local
// and whose remote end is remote, by reading the kernel's socket tables
// (/proc/net/tcp and tcp6 on Linux). Both sides of a loopback connection
// use it: the server asks who owns the client's end, the client asks who
// owns the end it reached (an accepted socket, or a handshake still in the
// accept queue, is listed under the listening socket's owner). It reports
// false where the tables are unavailable (another OS, a restricted /proc)
// or the socket is not found: "unknown", never a guess.
func SocketUID(local, remote netip.AddrPort) (int, bool) {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if uid, ok := scanSocketTable(table, local, remote); ok {
			return uid, true
		}
	}
	return 0, false
}

// tcpListen is the state column of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// ListenerUIDs lists the users owning the TCP sockets listening where a
// connection to addr lands: bound to addr itself or to the unspecified
// address on its port. It is empty where that is unknown: the tables are
// unavailable (another OS, a restricted /proc) or nothing listens.
//
// A client uses it to learn who took its connection: an accepted socket is
// no good for that, since until the server's accept it is listed as root's.
func ListenerUIDs(addr netip.AddrPort) []int {
	var uids []int
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uids = append(uids, scanListeners(table, addr)...)
	}
	return uids
}

// scanListeners collects the owners of one table's listeners for addr.
func scanListeners(path string, addr netip.AddrPort) []int {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var uids []int
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[3] != tcpListen {
			continue
		}
		la, err := ParseProcAddr(fields[1])
		if err != nil || la.Port() != addr.Port() || (!la.Addr().IsUnspecified() && la.Addr().Unmap() != addr.Addr().Unmap()) {
			continue
		}
		if uid, err := strconv.Atoi(fields[7]); err == nil {
			uids = append(uids, uid)
		}
	}
	return uids
}

// scanSocketTable looks for the socket with the given ends in one table.
func scanSocketTable(path string, local, remote netip.AddrPort) (int, bool) {
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
		la, err1 := ParseProcAddr(fields[1])
		ra, err2 := ParseProcAddr(fields[2])
		if err1 != nil || err2 != nil || !sameEnd(la, local) || !sameEnd(ra, remote) {
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

// ParseProcAddr decodes "0100007F:1F90" (IPv4) or a 32-hex-digit IPv6
// address as /proc/net/tcp writes them: each 32-bit word is in host
// (little-endian) byte order.
func ParseProcAddr(s string) (netip.AddrPort, error) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("no port in %q", s)
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port in %q: %w", s, err)
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
