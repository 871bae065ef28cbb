package plexus

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"
)

// ManifestVersion is the only extension manifest version Plexus reads.
const ManifestVersion = "plexus-extension/0.1"

// ExtensionManifest is one extension: a source and the entries it
// contributes (plexus-extension-spec v0.1 §2). It never holds a secret
// value, only references to named secrets.
type ExtensionManifest struct {
	Manifest     string                    `json:"manifest"`
	Source       string                    `json:"source"`
	Label        string                    `json:"label"`
	Transport    TransportKind             `json:"transport"`
	Capabilities []ExtensionCapabilityDecl `json:"capabilities"`
	Secrets      []ExtensionSecretRef      `json:"secrets,omitempty"`
	ServiceHint  *LocalServiceHint         `json:"serviceHint,omitempty"`
}

// ExtensionCapabilityDecl is one entry an extension declares (§2.1). Its
// full id is the source's slug (":" becomes ".") followed by "." and Name.
type ExtensionCapabilityDecl struct {
	Name      string           `json:"name"`
	Kind      EntryKind        `json:"kind"`
	Label     string           `json:"label"`
	Describe  string           `json:"describe"`
	Grants    []Verb           `json:"grants"`
	Transport TransportKind    `json:"transport,omitempty"`
	IO        *IOSchema        `json:"io,omitempty"`
	Members   []WorkflowMember `json:"members,omitempty"`
	Body      *SkillBody       `json:"body,omitempty"`
	// Route is the owning transport's configuration, kept as written; the
	// core never reads it (§2.2).
	Route json.RawMessage `json:"route,omitempty"`
}

// Secret attach modes (§7): how a transport presents a resolved secret.
const (
	AttachBearer = "bearer"
	AttachHeader = "header"
	AttachQuery  = "query"
	AttachEnv    = "env"
)

// ExtensionSecretRef names a secret a transport needs and how it presents
// it. The value lives under PLEXUS_HOME/secrets/ and is resolved only at
// dispatch, only into the owning transport.
type ExtensionSecretRef struct {
	Name   string `json:"name"`
	Attach string `json:"attach,omitempty"`
	As     string `json:"as,omitempty"`
}

// LocalServiceHint says how to find a local service (§2).
type LocalServiceHint struct {
	App         string `json:"app"`
	DefaultPort int    `json:"defaultPort,omitempty"`
	SocketName  string `json:"socketName,omitempty"`
}

// ExtensionRoute is what a materialized extension entry carries in
// [Entry.Route]: the declaration's route object as written (Decl), with the
// manifest's service hint and secret references beside it, so that the
// owning transport has all it needs and nothing is resolved before dispatch.
type ExtensionRoute struct {
	Decl        json.RawMessage      `json:"route,omitempty"`
	ServiceHint *LocalServiceHint    `json:"serviceHint,omitempty"`
	Secrets     []ExtensionSecretRef `json:"secrets,omitempty"`
	// Runs is the file a cli or stdio program resolved to, symbolic links
	// followed, when the entry was materialized: the file its verbs were
	// derived from. The transports refuse to run another ([CheckRuns]).
	// Empty when it was not installed then (or not resolved).
	Runs string `json:"runs,omitempty"`
}

// CheckRuns refuses to run bin, found at path, when path now resolves
// (symbolic links followed) to another file than runs, the one its entry
// was materialized with (and its verbs derived from): a link swapped since
// would run a program the owner never approved. An empty runs checks
// nothing.
func CheckRuns(bin, path, runs string) *Error {
	if runs == "" {
		return nil
	}
	now, err := filepath.EvalSymlinks(path)
	if err != nil {
		return WrapError(CodeSourceUnavailable, err, fmt.Sprintf("%s (%s) cannot be resolved", bin, path))
	}
	if now != runs {
		return Errorf(CodeSourceUnavailable, "%s now resolves to %s, not to %s as when its extension was registered; "+
			"restart the daemon or register it again to have it judged anew", bin, now, runs)
	}
	return nil
}

// ExtensionRegisterRequest is the body of POST /extensions.
type ExtensionRegisterRequest struct {
	SessionID string            `json:"sessionId,omitempty"`
	Manifest  ExtensionManifest `json:"manifest"`
}

// ExtensionRegisterResponse answers a registration.
type ExtensionRegisterResponse struct {
	OK         bool     `json:"ok"`
	Source     string   `json:"source,omitempty"`
	Registered []string `json:"registered,omitempty"`
	Revision   int64    `json:"revision,omitempty"`
	Reason     string   `json:"reason,omitempty"`
	// PendingID is set when the registration waits for the owner.
	PendingID string `json:"pendingId,omitempty"`
}

// SecretRef completes a route's secret reference s from the manifest's
// declaration of the same name: an empty attach takes the declared one, and
// an empty as takes the declared one when the attach modes agree. A route
// may only name a declared secret (extension spec §8 rule 9): a reference
// without a name, or naming an undeclared secret, is a transport_error.
// Each transport then applies its own default attach mode and checks.
func (r ExtensionRoute) SecretRef(s ExtensionSecretRef) (ExtensionSecretRef, *Error) {
	if s.Name == "" {
		return s, Errorf(CodeTransportError, "route.secret.name is missing")
	}
	for _, d := range r.Secrets {
		if d.Name != s.Name {
			continue
		}
		if s.Attach == "" {
			s.Attach = d.Attach
		}
		if s.As == "" && s.Attach == d.Attach {
			s.As = d.As
		}
		return s, nil
	}
	return s, Errorf(CodeTransportError, "route.secret %q is not declared in the manifest's secrets", s.Name)
}

// RouteTimeout is a route's timeoutMs as a duration, cut to max (a
// transport's ceiling). A zero or negative timeoutMs is a transport_error:
// a route that declares one must mean a time.
func RouteTimeout(ms int64, max time.Duration) (time.Duration, *Error) {
	if ms <= 0 {
		return 0, Errorf(CodeTransportError, "route.timeoutMs must be a positive number of milliseconds, not %d", ms)
	}
	return time.Duration(min(ms, max.Milliseconds())) * time.Millisecond, nil
}
