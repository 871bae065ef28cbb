package hosts

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Status is one host's file as `plexus clients list` shows it.
type Status struct {
	Host   string `json:"host"`
	Scope  string `json:"scope"`
	Config string `json:"config"`
	// Project is the project whose local-scope servers the row is about
	// (Claude Code's projects["<dir>"] in Config); "" for other scopes.
	Project   string     `json:"project,omitempty"`
	Installed bool       `json:"installed"`
	Connected bool       `json:"connected"`
	Transport string     `json:"transport,omitempty"` // stdio or http
	Agent     string     `json:"agent,omitempty"`
	Enrolled  bool       `json:"enrolled"`
	LastCall  *time.Time `json:"lastCall,omitempty"`
	Problem   string     `json:"problem,omitempty"`
}

// Agents is what a status needs of the credentials Plexus stores for host
// agents; hosts never reads them itself. Its methods read files and are
// safe to call from one goroutine at a time.
type Agents interface {
	// Enrolled reports whether the credential of the agent id is stored.
	Enrolled(id string) bool
	// ByPAT is the agent whose stored credential holds pat, "" when none
	// does: an HTTP entry names its agent only by its PAT.
	ByPAT(pat string) string
}

// Statuses looks at every known host's user file; at its project file in
// env's project folder when there is one; and, for a host with a local
// scope, at env's project's section of its user file when that holds a
// plexus entry. Each scope holding the entry is a row of its own.
func Statuses(env Env, agents Agents) []Status {
	var out []Status
	for _, h := range Known() {
		for _, scope := range []Scope{ScopeUser, ScopeProject, ScopeLocal} {
			located, path, err := h.Locate(env, scope)
			if err != nil {
				continue
			}
			s := Status{Host: h.Name, Scope: string(scope), Config: path, Project: located.LocalProject()}
			readStatus(located, agents, &s)
			if scope == ScopeProject && !s.Installed || scope == ScopeLocal && !s.Connected {
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

// readStatus fills in s from h's file at s.Config. The agent is the host's
// name unless the entry names another: by --agent for stdio, by its PAT for
// HTTP.
func readStatus(h Host, agents Agents, s *Status) {
	cfg, err := Read(h, s.Config)
	if err != nil {
		s.Installed, s.Problem = !errors.Is(err, os.ErrNotExist), err.Error()
		return
	}
	s.Installed = cfg.Exists()
	p, ok := cfg.Plexus()
	if !ok {
		return
	}
	s.Connected, s.Transport, s.Agent = true, "stdio", h.Name
	if p.Entry.HTTP() {
		s.Transport = "http"
		if id := agents.ByPAT(strings.TrimPrefix(p.Entry.Headers["Authorization"], "Bearer ")); id != "" {
			s.Agent = id
		}
	}
	if i := slices.Index(p.Entry.Args, "--agent"); i >= 0 && i+1 < len(p.Entry.Args) {
		s.Agent = p.Entry.Args[i+1]
	}
	s.Enrolled = agents.Enrolled(s.Agent)
}

// WriteStatuses prints the statuses as a table for a person.
func WriteStatuses(w io.Writer, rows []Status) error {
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "HOST\tSCOPE\tINSTALLED\tCONNECTED\tAGENT\tLAST CALL\tCONFIG")
	for _, r := range rows {
		last := "-"
		if r.LastCall != nil {
			last = r.LastCall.Local().Format("2006-01-02 15:04")
		}
		connected := yesNo(r.Connected)
		if r.Problem != "" {
			connected = "? " + r.Problem
		} else if r.Connected {
			connected += " (" + r.Transport + ")"
		}
		agent := r.Agent
		if agent == "" {
			agent = "-"
		}
		config := r.Config
		if r.Project != "" {
			config += " (projects[" + quote(r.Project) + "])"
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Host, cmp.Or(r.Scope, "-"), yesNo(r.Installed), connected, agent, last, config)
	}
	return t.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
