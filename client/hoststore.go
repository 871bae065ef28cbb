package client

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/plexus-gw/plexus"
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

// EnrollHost registers the host agent of req through the admin API and
// redeems its one-time code into store; it returns the agent's PAT and the
// starting grants the gateway declined. An agent of that id whose
// credential was lost is connected again: its new PAT replaces the old one.
func (a *Admin) EnrollHost(ctx context.Context, store *CredStore, req plexus.ConnectRequest) (string, []plexus.Declined, error) {
	resp, err := a.Connect(ctx, req)
	if err != nil {
		return "", nil, err
	}
	ag, err := NewAgent(a.conn.baseURL(), store, WithClientInfo(plexus.ClientInfo{Name: "plexus-clients-connect", Version: plexus.Version}))
	if err != nil {
		return "", nil, err
	}
	if _, err := ag.Enroll(ctx, resp.Code, false); err != nil {
		return "", nil, err
	}
	c, err := store.Credentials()
	if err != nil {
		return "", nil, err
	}
	return c.PAT, resp.Declined, nil
}

// RevokeHost revokes the host agent agentID through the admin API, then
// deletes its credential in store; a refused revocation deletes nothing.
func (a *Admin) RevokeHost(ctx context.Context, store *CredStore, agentID, reason string) (plexus.AgentRevokeResponse, error) {
	resp, err := a.RevokeAgent(ctx, agentID, reason)
	if err != nil {
		return resp, err
	}
	if err := os.RemoveAll(store.Dir()); err != nil {
		return resp, fmt.Errorf("delete the credential of %q: %w", agentID, err)
	}
	return resp, nil
}

// HostAgents reads the credentials of the host agents stored under a
// gateway's home (the value), for what `plexus clients list` shows.
type HostAgents string

// Enrolled reports whether the host agent id's credential is stored.
func (home HostAgents) Enrolled(id string) bool {
	store, err := HostStore(string(home), id)
	if err != nil {
		return false
	}
	_, err = store.Credentials()
	return err == nil
}

// ByPAT is the host agent whose stored credential holds pat, "" when none
// does.
func (home HostAgents) ByPAT(pat string) string {
	dirs, err := os.ReadDir(filepath.Join(string(home), HostsDir))
	if err != nil || pat == "" {
		return ""
	}
	for _, d := range dirs {
		store, err := HostStore(string(home), d.Name())
		if err != nil {
			continue
		}
		if c, err := store.Credentials(); err == nil && c.PAT == pat {
			return c.AgentID
		}
	}
	return ""
}
