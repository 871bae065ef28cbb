package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/plexus-gw/plexus/platform"
)

// AddressFile is where a running daemon keeps its listen address
// (host:port) in PLEXUS_HOME, so the command line reaches it with --home
// alone. It is written 0600 once the listener is bound and removed on a
// clean stop; one a crash left behind is overwritten by the next start, and
// until then names an address where nothing answers (the command line says
// the daemon is not running there).
const AddressFile = "daemon.addr"

// maxAddressFile bounds what is read of [AddressFile]: a host:port.
const maxAddressFile = 256

// writeAddress records the bound address in the home.
func (d *Daemon) writeAddress() error {
	path := filepath.Join(d.home.Dir, AddressFile)
	if err := platform.WriteFileAtomic(path, []byte(d.Addr()+"\n"), platform.WriteOptions{Mode: 0o600, Durability: platform.Volatile}); err != nil {
		return fmt.Errorf("write %s: %w", AddressFile, err)
	}
	return nil
}

// removeAddress removes the address file at a clean stop, unless another
// daemon has written its own address there since.
func (d *Daemon) removeAddress() error {
	path := filepath.Join(d.home.Dir, AddressFile)
	b, err := platform.ReadRegular(path, maxAddressFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("remove %s: %w", AddressFile, err)
	case !bytes.Equal(bytes.TrimSpace(b), []byte(d.Addr())):
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", AddressFile, err)
	}
	return nil
}

// ReadAddress returns the address the daemon of home last wrote into
// [AddressFile]; ok is false when there is none (no daemon has run, or the
// last one stopped cleanly). A file that does not hold a host:port is an
// error: the command line must not dial whatever a file says.
//
// It reads only a regular file, never following a link or waiting on a
// FIFO planted under the name, so a command can neither hang on it nor be
// sent to what another file says.
func ReadAddress(home string) (addr string, ok bool, err error) {
	b, err := platform.ReadRegular(filepath.Join(home, AddressFile), maxAddressFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w", AddressFile, err)
	}
	addr = strings.TrimSpace(string(b))
	host, _, err := net.SplitHostPort(addr)
	if err != nil || net.ParseIP(host) == nil || !net.ParseIP(host).IsLoopback() {
		return "", false, fmt.Errorf("%s holds %q, not a loopback host:port; remove it, or give --addr", filepath.Join(home, AddressFile), addr)
	}
	return addr, true, nil
}
