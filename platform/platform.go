// Package platform is Plexus's seam to the operating system for the
// transports (the spec's PlatformServices): where a binary is (the enriched
// PATH of [Services.Resolve]), the environment a child process gets
// ([Services.Env]), how a child process is started, recorded and stopped
// ([Services.Command], [Services.Start]) and what a crashed run left
// behind is stopped ([Services.ReapChildren]), where a local service listens ([Services.Locate]),
// and the value of a named secret ([Services.Secret]) with the store the
// owner's `plexus secrets` commands write ([Services.SetSecret]), one way
// to read a file that must be a regular one ([OpenRegular]) in a folder
// others can write to, and one way to replace a file so that a reader or a
// crash never sees a part of it ([WriteFileAtomic]).
//
// It runs on Linux and macOS. It must never read the process's environment,
// $HOME or flags (cmd passes them in through [Options]), never put a secret
// value into an error message or a log, never follow a symbolic link to a
// secret or wait on a FIFO, and never hand a child process more of the
// daemon's environment than the base environment of [Services.Env] (no
// PLEXUS_* variable, no credential the owner's shell exports).
package platform

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// DefaultStopGrace is how long a cancelled [Services.Command] child has
// between SIGTERM and SIGKILL unless [Options.StopGrace] says otherwise.
const DefaultStopGrace = 2 * time.Second

// Options are what cmd reads from the process for [New]. Only Home is
// required; every other zero value is a working default.
type Options struct {
	// Home is PLEXUS_HOME; secrets live in Home/secrets.
	Home string
	// UserHome is the owner's home directory, which the "~/…" directories of
	// the enriched PATH are under. Empty leaves those directories out.
	UserHome string
	// Env is the daemon's environment (cmd passes os.Environ()): its PATH
	// is searched first, and the few variables of the base environment
	// every child inherits ([Services.Env]) are taken from it.
	Env []string
	// GOOS chooses the extra PATH directories: "darwin" gets the macOS
	// set, anything else the Linux set. Empty means runtime.GOOS.
	GOOS string
	// StopGrace is how long a cancelled child has between SIGTERM and
	// SIGKILL; zero means DefaultStopGrace.
	StopGrace time.Duration
	// Logger receives what has no caller to report to (a child record
	// that could not be forgotten); nil discards it.
	Logger *slog.Logger
}

// Services is the Linux and macOS implementation of the platform seam. It
// is immutable once built but for the table of running children, which
// locks itself, so one value is safe for concurrent use by every
// transport.
type Services struct {
	home      string
	dirs      []string // the enriched PATH, in search order
	env       []string // the child base environment, PATH included
	stopGrace time.Duration
	children  *children
}

// New returns the services for opts. It panics when opts.Home is empty: cmd
// always has a home, so an empty one is a wiring bug.
func New(opts Options) *Services {
	if opts.Home == "" {
		panic("platform.New: Options.Home is empty")
	}
	goos := opts.GOOS
	if goos == "" {
		goos = runtime.GOOS
	}
	grace := opts.StopGrace
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dirs := enrichPath(lookupEnv(opts.Env, "PATH"), opts.UserHome, goos)
	return &Services{
		home:      opts.Home,
		dirs:      dirs,
		env:       baseEnv(opts.Env, strings.Join(dirs, pathListSeparator)),
		stopGrace: grace,
		children:  &children{path: filepath.Join(opts.Home, childrenFile), log: log, recs: make(map[int]childRecord)},
	}
}

// Locate returns the base URL of the local service hint names:
// http://127.0.0.1:<defaultPort>. It does not check that anything listens
// there; the transport that calls it reports source_unavailable when
// nothing answers. A hint without a port (one with only a socketName) is an
// error: sockets are the ipc transport's, which finds them under
// PLEXUS_HOME itself. ctx is for implementations that must ask the OS.
func (s *Services) Locate(ctx context.Context, hint plexus.LocalServiceHint) (string, error) {
	if hint.DefaultPort <= 0 || hint.DefaultPort > 65535 {
		what := "no defaultPort"
		if hint.DefaultPort != 0 {
			what = "defaultPort " + strconv.Itoa(hint.DefaultPort) + " out of range"
		}
		if hint.SocketName != "" {
			what += " (socketName is for the ipc transport)"
		}
		return "", plexus.Errorf(plexus.CodeSourceUnavailable, "local service %q: %s", hint.App, what)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", hint.DefaultPort), nil
}
