package main

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"time"
)

// deciderIdentity names the person deciding, as ExoFrame does: `git config
// user.email`, else $USER, else the OS account name, else "owner". The
// daemon uses it for decisions made by moving files; `plexus approve` and
// `plexus reject` write it into the file as decided_by.
func deciderIdentity() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "git", "config", "user.email").Output(); err == nil {
		if s := strings.TrimSpace(string(out)); s != "" {
			return s
		}
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "owner"
}
