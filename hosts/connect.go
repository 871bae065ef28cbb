package hosts

import (
	"context"
	"fmt"
	"io"

	"github.com/plexus-gw/plexus"
)

// patPlaceholder stands for the PAT in a diff printed before enrollment.
const patPlaceholder = "<the agent's PAT>"

// Reach is how a host's plexus entry reaches the gateway: Binary launched
// as `mcp serve --agent`, or with HTTP the /mcp URL of Addr with the
// agent's PAT in a bearer header.
type Reach struct {
	HTTP bool
	// Addr is the gateway's host:port. A launched Binary is told it
	// unless it is DefaultAddr, the address the binary assumes.
	Addr, DefaultAddr string
	// Binary and Home are the Plexus binary the host launches and its
	// absolute home; unused with HTTP.
	Binary, Home string
}

// Entry is the plexus entry for agent. pat "" (not enrolled yet) writes a
// placeholder in an HTTP entry; a launched one holds no secret.
func (r Reach) Entry(agent, pat string) Entry {
	if r.HTTP {
		if pat == "" {
			pat = patPlaceholder
		}
		return Entry{URL: "http://" + r.Addr + "/mcp", Headers: map[string]string{"Authorization": "Bearer " + pat}}
	}
	args := []string{"--home", r.Home}
	if r.Addr != r.DefaultAddr {
		args = append(args, "--addr", r.Addr)
	}
	return Entry{Command: r.Binary, Args: append(args, "mcp", "serve", "--agent", agent)}
}

// Enroller enrolls a host's agent with the gateway and stores its
// credential, returning its PAT and the starting grants declined. hosts
// never talks to the gateway itself.
type Enroller func(ctx context.Context) (pat string, declined []plexus.Declined, err error)

// Connection is a host's file and the agent that reaches Plexus through
// its plexus entry.
type Connection struct {
	Config *Config
	Agent  string
	// CredDir holds the agent's stored credential; PAT is its PAT, ""
	// while the agent is not enrolled.
	CredDir, PAT string
	Reach        Reach
	// DryRun prints the diff only: nothing is enrolled or written.
	DryRun bool
	// Enroll is called when PAT is "" and not DryRun.
	Enroll Enroller
}

// Plan is the edit of a host's file that puts e in: [Config.Upsert] adds
// it, [Config.ReplaceAll] replaces every entry by it.
type Plan func(*Config, Entry) (*Edit, error)

// Connect plans c's edit with plan, prints its diff to w, enrolls the
// agent unless its credential is stored, and writes the file, telling w
// each step. An enrolled agent whose file needs no change is a no-op.
func Connect(ctx context.Context, w io.Writer, c Connection, plan Plan) error {
	entry := c.Reach.Entry(c.Agent, c.PAT)
	ed, err := plan(c.Config, entry)
	if err != nil {
		return err
	}
	h, path := c.Config.Host, c.Config.Path
	if c.PAT != "" && !ed.Changed() {
		fmt.Fprintf(w, "%s is already connected as agent %q (%s; credential in %s). Nothing to do.\n",
			h.Label, c.Agent, path, c.CredDir)
		return nil
	}
	writeDiff(w, ed, c.PAT)
	if c.DryRun {
		fmt.Fprintln(w, "Dry run: no agent enrolled, nothing written.")
		return nil
	}
	if c.PAT == "" {
		pat, declined, err := c.Enroll(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "Enrolled agent %q for %s; its credential is in %s (0600).\n", c.Agent, h.Label, c.CredDir)
		for _, d := range declined {
			fmt.Fprintf(w, "Declined grant %s: %s\n", d.ID, d.Reason)
		}
		entry = c.Reach.Entry(c.Agent, pat)
		if ed, err = plan(c.Config, entry); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "Agent %q is already enrolled (credential in %s); only the file changes.\n", c.Agent, c.CredDir)
	}
	if entry.HTTP() {
		// The file now holds a credential: whoever else could read it
		// (a 0644 file) could act as the agent.
		if was := ed.mode; was&0o077 != 0 {
			ed.mode = was &^ 0o077
			fmt.Fprintf(w, "%s holds the agent's PAT: Plexus writes it mode %04o (it was %04o).\n", path, ed.mode, was)
		}
	}
	if err := applyEdit(w, ed); err != nil {
		return err
	}
	if entry.HTTP() {
		fmt.Fprintf(w, "The agent's PAT now sits in %s: anyone who can read that file can act as %q.\n", path, c.Agent)
	}
	fmt.Fprintf(w, "%s reaches Plexus as agent %q once it reloads its MCP servers. A call it has no grant for waits for you: plexus pending, plexus approve <id>.\n",
		h.Label, c.Agent)
	return nil
}

// Disconnect removes the plexus entry from cfg: it prints the diff with
// pat redacted and, unless dryRun, writes the file.
func Disconnect(w io.Writer, cfg *Config, pat string, dryRun bool) error {
	ed, err := cfg.Remove()
	if err != nil {
		return err
	}
	if !ed.Changed() || !cfg.Exists() {
		fmt.Fprintf(w, "%s has no plexus entry.\n", cfg.Path)
		return nil
	}
	writeDiff(w, ed, pat)
	if dryRun {
		return nil
	}
	return applyEdit(w, ed)
}

// writeDiff prints ed's diff with every PAT redacted.
func writeDiff(w io.Writer, ed *Edit, pats ...string) {
	if !ed.Changed() {
		fmt.Fprintf(w, "%s already says so; nothing to change.\n", ed.Path)
		return
	}
	fmt.Fprint(w, ed.Diff(pats...))
}

// applyEdit writes ed and says where it went and where the file as it was is.
func applyEdit(w io.Writer, ed *Edit) error {
	backup, err := ed.Apply()
	if err != nil {
		return err
	}
	if backup != "" {
		fmt.Fprintf(w, "Wrote %s (the file as it was: %s).\n", ed.Path, backup)
		return nil
	}
	fmt.Fprintf(w, "Wrote %s (a new file, mode 0600).\n", ed.Path)
	return nil
}
