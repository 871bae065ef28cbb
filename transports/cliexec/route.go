package cliexec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// route is the part of an entry's route this transport reads, checked.
type route struct {
	bin     string
	runs    string // the file bin ran when the entry was materialized ([plexus.CheckRuns])
	args    []template
	secret  *secretRef
	timeout time.Duration // 0: the transport's default
}

// secretRef is a secret to resolve and the variable that carries it.
type secretRef struct {
	name string
	env  string
}

// secretPrefix starts the default name of a secret's variable.
const secretPrefix = "PLEXUS_SECRET_"

// parseRoute reads raw (the JSON of a [plexus.ExtensionRoute]). Keys other
// than bin, args, secret and timeoutMs are left for other readers.
func parseRoute(raw json.RawMessage) (route, *plexus.Error) {
	var xr plexus.ExtensionRoute
	if err := json.Unmarshal(raw, &xr); err != nil {
		return route{}, routeError(err, "the entry's route is not valid JSON")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(xr.Decl, &keys); err != nil || keys == nil {
		return route{}, routeError(err, "the entry's route is not a JSON object")
	}
	rt := route{runs: xr.Runs}

	if err := decodeKey(keys, "bin", &rt.bin); err != nil {
		return route{}, routeError(err, "route.bin must be a string")
	}
	if perr := checkBin(rt.bin); perr != nil {
		return route{}, perr
	}

	var args []string
	if err := decodeKey(keys, "args", &args); err != nil {
		return route{}, routeError(err, "route.args must be a list of strings")
	}
	for i, a := range args {
		t, err := parseTemplate(a)
		if err != nil {
			return route{}, routeError(nil, fmt.Sprintf("route.args[%d]: %v", i, err))
		}
		rt.args = append(rt.args, t)
	}

	var ms *float64
	if err := decodeKey(keys, "timeoutMs", &ms); err != nil || ms != nil && (*ms <= 0 || *ms != math.Trunc(*ms)) {
		return route{}, routeError(err, "route.timeoutMs must be a positive whole number of milliseconds")
	}
	switch {
	case ms == nil:
	case *ms >= float64(math.MaxInt64/int64(time.Millisecond)):
		rt.timeout = math.MaxInt64 // capped by Options.MaxTimeout
	default:
		rt.timeout = time.Duration(*ms) * time.Millisecond
	}

	var sec *plexus.ExtensionSecretRef
	if err := decodeKey(keys, "secret", &sec); err != nil {
		return route{}, routeError(err, `route.secret must be an object {"name", "attach", "as"}`)
	}
	if sec != nil {
		ref, perr := secretVar(*sec, xr.Secrets)
		if perr != nil {
			return route{}, perr
		}
		rt.secret = ref
	}
	return rt, nil
}

// decodeKey decodes keys[key] into v, leaving v alone when the key is absent
// or null.
func decodeKey(keys map[string]json.RawMessage, key string, v any) error {
	raw, ok := keys[key]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	return json.Unmarshal(raw, v)
}

func routeError(err error, msg string) *plexus.Error {
	return &plexus.Error{Code: plexus.CodeTransportError, Message: msg, Err: err}
}

// checkBin refuses what cannot name a binary. A relative path is refused
// because it would be resolved against the daemon's working directory,
// which is wherever the daemon happened to be started.
func checkBin(bin string) *plexus.Error {
	switch {
	case bin == "":
		return plexus.Errorf(plexus.CodeTransportError, "route.bin is required")
	case strings.IndexByte(bin, 0) >= 0:
		return plexus.Errorf(plexus.CodeTransportError, "route.bin contains a NUL byte")
	case strings.ContainsRune(bin, '/') || strings.ContainsRune(bin, os.PathSeparator):
		if !filepath.IsAbs(bin) {
			return plexus.Errorf(plexus.CodeTransportError,
				"route.bin %q is a relative path; give a bare name resolved on PATH or an absolute path", bin)
		}
	}
	return nil
}

// secretVar completes ref from the manifest's declaration of the same name
// and picks the environment variable that carries it.
func secretVar(ref plexus.ExtensionSecretRef, declared []plexus.ExtensionSecretRef) (*secretRef, *plexus.Error) {
	ref, perr := plexus.ExtensionRoute{Secrets: declared}.SecretRef(ref)
	if perr != nil {
		return nil, perr
	}
	if ref.Attach != "" && ref.Attach != plexus.AttachEnv {
		return nil, plexus.Errorf(plexus.CodeTransportError,
			"secret %q: attach %q is not available to the cli transport; use %q", ref.Name, ref.Attach, plexus.AttachEnv)
	}
	env := ref.As
	if env == "" {
		env = secretPrefix + upperSnake(ref.Name)
	}
	if !plexus.ValidEnvName(env) {
		return nil, plexus.Errorf(plexus.CodeTransportError,
			"secret %q: %q is not a valid environment variable name", ref.Name, env)
	}
	if reservedEnv(env) {
		return nil, plexus.Errorf(plexus.CodeTransportError,
			"secret %q: the variable %q is reserved (PATH and loader variables cannot carry a secret)", ref.Name, env)
	}
	return &secretRef{name: ref.Name, env: env}, nil
}

// upperSnake turns a secret name into the tail of a variable name:
// letters upper-cased, digits kept, everything else "_".
func upperSnake(name string) string {
	var sb strings.Builder
	for _, r := range name {
		switch {
		case 'a' <= r && r <= 'z':
			sb.WriteRune(r - 'a' + 'A')
		case 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	return sb.String()
}

// reservedEnv reports whether a secret may not be carried in s: PATH
// decides which binaries the child runs, and the dynamic loader's variables
// decide what code it loads.
func reservedEnv(s string) bool {
	u := strings.ToUpper(s)
	return u == "PATH" || strings.HasPrefix(u, "LD_") || strings.HasPrefix(u, "DYLD_")
}
