package main

import (
	"strings"
	"testing"
)

func TestUnknownCommand(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"jurnal"}, `unknown command "plexus jurnal"; did you mean "plexus journal"?`},
		{[]string{"agent", "lst"}, `unknown command "plexus agent lst"; did you mean "plexus agent list"?`},
		{[]string{"portal", "ad", "x"}, `unknown command "plexus portal ad"; did you mean "plexus portal add"?`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			res := runCLI(t, "127.0.0.1:1", tt.args...)
			if res.code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %q", res.code, exitUsage, res.stderr)
			}
			if !strings.Contains(res.stderr, tt.want) {
				t.Errorf("stderr = %q, want it to contain %q", res.stderr, tt.want)
			}
		})
	}
	t.Run("GroupWithoutArgsShowsHelp", func(t *testing.T) {
		res := runCLI(t, "127.0.0.1:1", "agent")
		if res.code != exitOK || !strings.Contains(res.stdout, "plexus agent - ") {
			t.Errorf("exit %d, stdout %q; want 0 and the group's help", res.code, res.stdout)
		}
	})
}

func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -",
		"zsh":  "compdef _plexus plexus",
		"fish": "complete -c plexus",
	} {
		t.Run(shell, func(t *testing.T) {
			res := runCLI(t, "127.0.0.1:1", "completion", shell)
			if res.code != exitOK || !strings.Contains(res.stdout, want) {
				t.Errorf("exit %d, stdout %q; want 0 and a script containing %q", res.code, res.stdout, want)
			}
		})
	}
	t.Run("Candidates", func(t *testing.T) {
		// What the scripts run on <TAB>: the commands of the level reached.
		res := runCLI(t, "127.0.0.1:1", "agent", "--generate-shell-completion")
		for _, sub := range []string{"enroll", "list", "call"} {
			if !strings.Contains(res.stdout, sub+":") {
				t.Errorf("completion candidates of `plexus agent` = %q, want %q among them", res.stdout, sub)
			}
		}
	})
}
