package ipc

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/plexus-gw/plexus"
)

// providerIDPattern is the rule for a provider id: 1 to 63 of a-z, 0-9,
// '_' and '-', starting with a letter or digit. No dots and no slash, so
// that "<provider_id>/<tool_name>" and the entry id
// "ipc.<provider_id>.<tool_name>" split one way only.
var providerIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// MaxProviderFrameBytes caps a provider's max_frame_bytes: a frame is read
// into memory whole.
const MaxProviderFrameBytes = 64 << 20

// minProviderFrameBytes is the smallest max_frame_bytes a provider may
// ask for: a hello, a registration and a small result must fit.
const minProviderFrameBytes = 4 << 10

// ValidProviderID reports whether id follows the provider id rule.
func ValidProviderID(id string) bool { return providerIDPattern.MatchString(id) }

// ConfigError is a provider declaration that breaks a rule: it names the
// provider and the field. It never quotes an env value.
type ConfigError struct {
	Provider string
	Field    string
	Problem  string
}

func (e *ConfigError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("provider %q: %s", e.Provider, e.Problem)
	}
	return fmt.Sprintf("provider %q: %s: %s", e.Provider, e.Field, e.Problem)
}

// ValidateProvider checks one declaration of providers.json and returns it
// with its defaults filled in (restart on-failure). The first broken rule
// is returned as a [*ConfigError].
func ValidateProvider(id string, cfg plexus.ProviderConfig) (plexus.ProviderConfig, error) {
	bad := func(field, format string, args ...any) (plexus.ProviderConfig, error) {
		return plexus.ProviderConfig{}, &ConfigError{Provider: id, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if !ValidProviderID(id) {
		return bad("", "an id is 1 to 63 of a-z, 0-9, '_' and '-', starting with a letter or a digit")
	}
	switch {
	case cfg.Command == "":
		return bad("command", "missing")
	case strings.ContainsRune(cfg.Command, 0):
		return bad("command", "contains a NUL byte")
	case strings.ContainsRune(cfg.Command, '/') && !filepath.IsAbs(cfg.Command):
		return bad("command", "a path must be absolute (a bare name is looked up on the PATH)")
	}
	for i, a := range cfg.Args {
		if strings.ContainsRune(a, 0) {
			return bad(fmt.Sprintf("args[%d]", i), "contains a NUL byte")
		}
	}
	names := make([]string, 0, len(cfg.Env))
	for k := range cfg.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return bad("env", "variable name %q is not a valid name", k)
		case strings.HasPrefix(strings.ToUpper(k), "PLEXUS_"):
			return bad("env", "variable %s: names starting with PLEXUS_ are the gateway's", k)
		case strings.ContainsRune(cfg.Env[k], 0):
			return bad("env", "variable %s: the value contains a NUL byte", k)
		}
	}
	switch cfg.Restart {
	case "":
		cfg.Restart = plexus.RestartOnFailure
	case plexus.RestartOnFailure, plexus.RestartAlways, plexus.RestartNever:
	default:
		return bad("restart", "%q is not one of on-failure, always, never", cfg.Restart)
	}
	if cfg.MaxFrameBytes != 0 && (cfg.MaxFrameBytes < minProviderFrameBytes || cfg.MaxFrameBytes > MaxProviderFrameBytes) {
		return bad("max_frame_bytes", "%d is outside %d..%d", cfg.MaxFrameBytes, minProviderFrameBytes, MaxProviderFrameBytes)
	}
	return cfg, nil
}

// SourceID is the registry source id of a provider's tools: "ipc:<id>".
func SourceID(providerID string) string { return "ipc:" + providerID }

// EntryID is the capability entry id of a provider's tool:
// "ipc.<provider_id>.<tool_name>" for the tool_id
// "<provider_id>/<tool_name>".
func EntryID(providerID, toolName string) string { return "ipc." + providerID + "." + toolName }

// ToolID is the protocol's namespaced tool id "<provider_id>/<tool_name>".
func ToolID(providerID, toolName string) string { return providerID + "/" + toolName }
