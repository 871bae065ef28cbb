package platform

import (
	"slices"
	"strings"
)

// baseEnvKeys are the variables of the daemon's environment that every child
// process inherits, whatever its transport (cli, stdio, ipc, MCP server,
// notify). Everything else a child gets comes from its own declaration: a
// route's secret, an ipc provider's or MCP server's env entries, the ipc
// session variables. The owner's shell often exports credentials
// (GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY, …) that no extension
// binary was given by anyone, so an allow-list, not a deny-list: what is
// kept lets a program run at all.
//
//   - HOME, USER, LOGNAME: who it runs as and where its dotfiles are.
//   - LANG, TZ and every LC_*: text encoding, messages and times as the
//     owner reads them.
//   - TMPDIR: where temporary files go.
//   - XDG_RUNTIME_DIR, XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_CACHE_HOME,
//     XDG_STATE_HOME: where a tool finds its own config and state when the
//     owner moved them, and the user's runtime folder (the session bus a
//     desktop notification goes through).
//   - The proxy variables (both spellings) and SSL_CERT_FILE, SSL_CERT_DIR,
//     NODE_EXTRA_CA_CERTS: reaching the network through the machine's proxy
//     and CA certificates (npx fetching an MCP server needs them).
//
// PATH is not taken from the environment: children get the enriched one of
// [Services.Path]. No PLEXUS_* variable is ever in the list (they name the
// gateway's home, keys and addresses).
var baseEnvKeys = []string{
	"HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR",
	"XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
}

// inBaseEnv reports whether the variable key of the daemon's environment is
// one every child inherits.
func inBaseEnv(key string) bool {
	return strings.HasPrefix(key, "LC_") || slices.Contains(baseEnvKeys, key)
}

// Env returns the base environment of every child process: the variables
// of [baseEnvKeys] that the daemon's environment ([Options.Env]) sets, then
// the enriched PATH. A transport appends what the child's declaration names
// and nothing else. The slice is the caller's.
func (s *Services) Env() []string { return slices.Clone(s.env) }

// baseEnv is the base environment of env (see [Services.Env]), the last
// setting of a variable winning as it does in os/exec, in env's order, then
// PATH=path.
func baseEnv(env []string, path string) []string {
	last := make(map[string]string)
	var keys []string
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !inBaseEnv(k) {
			continue
		}
		if _, seen := last[k]; !seen {
			keys = append(keys, k)
		}
		last[k] = v
	}
	out := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		out = append(out, k+"="+last[k])
	}
	return append(out, "PATH="+path)
}
