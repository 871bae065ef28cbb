package cliexec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// Binaries finds the binaries routes name, says what environment they run
// in and starts them: the platform's one way of starting a child
// (platform.Services implements it). It is called on every dispatch, from
// many goroutines at once, and must be safe for concurrent use.
type Binaries interface {
	// Resolve returns the absolute path of the binary called name, a bare
	// name without a path separator. An error means it is not installed.
	Resolve(name string) (path string, err error)
	// Env is the base environment of a child, the PATH that Resolve
	// searches included; the transport adds the route's secret and nothing
	// else. nil means an empty one, never the daemon's. The transport never
	// modifies the returned slice.
	Env() []string
	// Command builds the child: exactly env, its own process group, and
	// when ctx is done SIGTERM to the group, then SIGKILL.
	Command(ctx context.Context, path string, args, env []string) *exec.Cmd
	// Start starts cmd and records it, so that a daemon that crashes does
	// not leave it running; done is called once cmd has been waited for
	// and its group stopped.
	Start(cmd *exec.Cmd) (done func(), err error)
}

// Secrets resolves a secret by name at dispatch time. It is called from
// many goroutines at once and must be safe for concurrent use. Its errors
// must never contain a secret's value.
type Secrets interface {
	Secret(name string) (string, error)
}

// Options tunes a [Transport]. The zero value of each field is its default.
type Options struct {
	// Timeout is a call's time limit when its route sets no timeoutMs
	// (default 30 s).
	Timeout time.Duration
	// MaxTimeout caps every call's time limit, route or default (default
	// 10 min).
	MaxTimeout time.Duration
	// MaxOutput is the most stdout a call may produce, in bytes (default
	// 1 MiB); one byte more fails the call and stops the process group.
	MaxOutput int
	// KillGrace is how long a stopped process group has between SIGTERM
	// and SIGKILL, and how long a tool's background processes may hold
	// its output open after it has exited (default 2 s).
	KillGrace time.Duration
}

// Defaults of [Options].
const (
	DefaultTimeout    = 30 * time.Second
	DefaultMaxTimeout = 10 * time.Minute
	DefaultMaxOutput  = 1 << 20
	DefaultKillGrace  = 2 * time.Second
)

// Transport runs cli entries. It holds no state between calls beyond its
// configuration and is safe for concurrent use; each Dispatch starts one
// process and has ended every goroutine it started when it returns.
type Transport struct {
	bins    Binaries
	secrets Secrets
	opts    Options
}

var _ plexus.Transport = (*Transport)(nil)

// New returns the cli transport. bins is required. secrets may be nil, in
// which case a route that asks for a secret fails its calls.
func New(bins Binaries, secrets Secrets, opts Options) *Transport {
	if bins == nil {
		panic("cliexec: New needs a Binaries")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxTimeout <= 0 {
		opts.MaxTimeout = DefaultMaxTimeout
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	return &Transport{bins: bins, secrets: secrets, opts: opts}
}

// Kind returns [plexus.TransportCLI].
func (*Transport) Kind() plexus.TransportKind { return plexus.TransportCLI }

// Dispatch runs the entry's binary once with input substituted into its
// argv template. See the package documentation for the route, the result
// and the failures.
func (t *Transport) Dispatch(ctx context.Context, entry plexus.Entry, input map[string]any, _ plexus.DispatchContext) plexus.TransportResult {
	data, perr := t.dispatch(ctx, entry, input)
	return plexus.DispatchResult(entry.ID, data, perr)
}

func (t *Transport) dispatch(ctx context.Context, entry plexus.Entry, input map[string]any) (any, *plexus.Error) {
	rt, perr := parseRoute(entry.Route)
	if perr != nil {
		return nil, perr
	}
	args, err := expandArgv(rt.args, input)
	var opt *errOption
	switch {
	case errors.As(err, &opt):
		return nil, plexus.Errorf(plexus.CodeSchemaValidationFailed, "%v", err)
	case err != nil:
		return nil, plexus.Errorf(plexus.CodeTransportError, "%v", err)
	}
	for i, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, plexus.Errorf(plexus.CodeTransportError, "route.args[%d] would contain a NUL byte, which no argument can hold", i)
		}
	}
	path, perr := t.resolve(rt.bin)
	if perr != nil {
		return nil, perr
	}
	if perr := plexus.CheckRuns(rt.bin, path, rt.runs); perr != nil {
		return nil, perr
	}
	env := t.bins.Env()
	var secret string
	if rt.secret != nil {
		if secret, perr = t.secret(rt.secret.name); perr != nil {
			return nil, perr
		}
		env = withVar(env, rt.secret.env, secret)
	}
	timeout := t.opts.Timeout
	if rt.timeout > 0 {
		timeout = rt.timeout
	}
	timeout = min(timeout, t.opts.MaxTimeout)

	out, perr := t.run(ctx, call{bin: rt.bin, path: path, args: args, env: env, timeout: timeout, secret: secret})
	if perr != nil {
		return nil, perr
	}
	return scrub(decodeOutput(out), secret), nil
}

// resolve finds the binary. A bare name goes through [Binaries]; an
// absolute path (the only kind of path parseRoute lets through) is used as
// written once it is known to be an executable file.
func (t *Transport) resolve(bin string) (string, *plexus.Error) {
	if filepath.IsAbs(bin) {
		_, err := exec.LookPath(bin)
		switch {
		case err == nil:
			return bin, nil
		case errors.Is(err, fs.ErrNotExist):
			return "", &plexus.Error{Code: plexus.CodeSourceUnavailable, Message: fmt.Sprintf("%s is not installed", bin), Err: err}
		default:
			return "", &plexus.Error{Code: plexus.CodeTransportError, Message: fmt.Sprintf("%s is not an executable file", bin), Err: err}
		}
	}
	path, err := t.bins.Resolve(bin)
	if err != nil {
		return "", &plexus.Error{Code: plexus.CodeSourceUnavailable, Message: fmt.Sprintf("%s is not installed (not found on PATH)", bin), Err: err}
	}
	if !filepath.IsAbs(path) {
		// A relative result (a "." in PATH) would run whatever the daemon's
		// working directory holds.
		return "", plexus.Errorf(plexus.CodeTransportError, "%s resolved to a relative path; only absolute ones are run", bin)
	}
	return path, nil
}

// secret resolves a secret. Neither the value nor the store's error text
// reaches the message.
func (t *Transport) secret(name string) (string, *plexus.Error) {
	if t.secrets == nil {
		return "", plexus.Errorf(plexus.CodeTransportError, "secret %q is needed but no secret store is configured", name)
	}
	v, err := t.secrets.Secret(name)
	if err != nil {
		return "", &plexus.Error{Code: plexus.CodeTransportError, Message: fmt.Sprintf("secret %q cannot be resolved", name), Err: err}
	}
	if strings.IndexByte(v, 0) >= 0 {
		return "", plexus.Errorf(plexus.CodeTransportError, "secret %q holds a NUL byte and cannot be passed in the environment", name)
	}
	return v, nil
}

// withVar returns a copy of env with name set to value, replacing any
// earlier setting of name.
func withVar(env []string, name, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}

var _ plexus.RequirementsChecker = (*Transport)(nil)

// Requirements: a capability on this transport needs its route's binary
// installed.
func (t *Transport) Requirements(_ plexus.ExtensionManifest, c plexus.ExtensionCapabilityDecl) []plexus.Requirement {
	return plexus.BinaryRequirement(c.Route, t.bins.Resolve)
}
