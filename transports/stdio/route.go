package stdio

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/plexus-gw/plexus"
)

// Limits of a call's duration.
const (
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 10 * time.Minute
)

// routeDecl is the declaration's route object as the author wrote it
// (extension spec §2.2). Keys this transport does not know, such as
// attachSkills, belong to someone else and are ignored.
type routeDecl struct {
	Bin       string                     `json:"bin"`
	Args      []string                   `json:"args"`
	Method    string                     `json:"method"`
	TimeoutMs *int64                     `json:"timeoutMs"`
	Secret    *plexus.ExtensionSecretRef `json:"secret"`
}

// route is a parsed, checked stdio route.
type route struct {
	bin     string
	runs    string // the file bin ran when the entry was materialized ([plexus.CheckRuns])
	args    []string
	method  string
	timeout time.Duration
	secret  *plexus.ExtensionSecretRef // attach is env and as is set; nil if none
}

// key names the process a route runs on: one per source, binary, argv and
// secret binding. Every field is included so that two entries of a source
// that start different commands never share a process.
func (rt *route) key(source string) string {
	parts := []any{source, rt.bin, rt.args, "", ""}
	if rt.secret != nil {
		parts[3], parts[4] = rt.secret.Name, rt.secret.As
	}
	b, _ := json.Marshal(parts) // strings only: cannot fail
	return string(b)
}

// parseRoute reads an entry's route ([plexus.ExtensionRoute]) and checks
// every key this transport uses, so that a bad route fails before a
// process, the secret store or the PATH is touched. defMethod is the
// method of a route without one (the entry id); defTimeout the timeout of
// a route without timeoutMs.
func parseRoute(raw json.RawMessage, defMethod string, defTimeout time.Duration) (*route, *plexus.Error) {
	if len(raw) == 0 {
		return nil, plexus.Errorf(plexus.CodeTransportError, "stdio entry has no route")
	}
	var er plexus.ExtensionRoute
	if err := json.Unmarshal(raw, &er); err != nil {
		return nil, plexus.WrapError(plexus.CodeTransportError, err, "stdio entry has an invalid route")
	}
	if len(er.Decl) == 0 || string(er.Decl) == "null" {
		return nil, plexus.Errorf(plexus.CodeTransportError, "stdio entry has no route object; declare route {bin, args, method}")
	}
	var d routeDecl
	if err := json.Unmarshal(er.Decl, &d); err != nil {
		return nil, plexus.WrapError(plexus.CodeTransportError, err, "stdio route is not a valid route object (bin, args, method, timeoutMs, secret {name, attach, as})")
	}
	if d.Bin == "" {
		return nil, plexus.Errorf(plexus.CodeTransportError, "route.bin is missing: name the binary to run")
	}
	rt := &route{bin: d.Bin, runs: er.Runs, method: d.Method, timeout: defTimeout}
	if len(d.Args) > 0 { // "args": [] and no args are the same command
		rt.args = d.Args
	}
	if rt.method == "" {
		rt.method = defMethod
	}
	if d.TimeoutMs != nil {
		var perr *plexus.Error
		if rt.timeout, perr = plexus.RouteTimeout(*d.TimeoutMs, MaxTimeout); perr != nil {
			return nil, perr
		}
	}
	if d.Secret != nil {
		s, perr := checkSecret(*d.Secret, er.Secrets)
		if perr != nil {
			return nil, perr
		}
		rt.secret = s
	}
	return rt, nil
}

// checkSecret completes route.secret from the manifest's declaration of the
// same name (attach and as default to the declared ones, then to env) and
// checks that it can be handed to a process. A route may only name a secret
// its manifest declares (extension spec §8 rule 9).
func checkSecret(s plexus.ExtensionSecretRef, declared []plexus.ExtensionSecretRef) (*plexus.ExtensionSecretRef, *plexus.Error) {
	s, perr := plexus.ExtensionRoute{Secrets: declared}.SecretRef(s)
	if perr != nil {
		return nil, perr
	}
	if s.Attach == "" {
		s.Attach = plexus.AttachEnv
	}
	if s.Attach != plexus.AttachEnv {
		return nil, plexus.Errorf(plexus.CodeTransportError, "route.secret.attach %q cannot be used over stdio (only env)", s.Attach)
	}
	if !plexus.ValidEnvName(s.As) {
		return nil, plexus.Errorf(plexus.CodeTransportError, "route.secret.as must name the environment variable that carries secret %q ([A-Za-z_][A-Za-z0-9_]*)", s.Name)
	}
	// PATH is the platform's; PLEXUS_* are the gateway's and never reach a
	// child (see the platform package).
	if up := strings.ToUpper(s.As); up == "PATH" || strings.HasPrefix(up, "PLEXUS_") {
		return nil, plexus.Errorf(plexus.CodeTransportError, "route.secret.as %q is reserved; choose another variable for secret %q", s.As, s.Name)
	}
	return &s, nil
}
