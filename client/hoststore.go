package client

import (
	"fmt"
	"path/filepath"
	"regexp"
)

// HostsDir is the folder under PLEXUS_HOME that holds the credentials of
// the agents `plexus clients connect` enrolled for MCP hosts, one folder an
// agent: `plexus mcp serve --agent <id>` reads <home>/clients/<id>/.
const HostsDir = "clients"

// agentIDPattern is the gateway's rule for an agent id; it also keeps the
// id a single, harmless path element.
var agentIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// HostStore is the credential store of the host agent agentID under the
// gateway's home: <home>/clients/<agentID>/ (0700, its files 0600). An id
// that is not an agent id (a path, "..") is an error, never joined.
func HostStore(home, agentID string) (*CredStore, error) {
	if !agentIDPattern.MatchString(agentID) {
		return nil, fmt.Errorf("agent id %q: 1 to 64 of A-Z, a-z, 0-9, '.', '_' and '-', starting with a letter or digit", agentID)
	}
	return NewCredStore(filepath.Join(home, HostsDir, agentID)), nil
}
