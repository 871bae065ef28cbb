// Command plexus is the command line of the Plexus gateway. The owner's
// commands (status, agents, grants, pending, show, portal, key) talk to the
// running daemon through its admin API with the connection-key from --home;
// approve and reject decide by moving the decision's file under --home, as
// the owner would, and ask the daemon only for the outcome; journal and
// secrets work on the files under --home, with or without the daemon. The
// agent's commands (agent enroll|list|call) perform the agent loop through
// package client with the credential under --agent-home.
//
// This is the only package that reads flags, the environment and $HOME. It
// never prints a PAT, a token or a connection-key except where showing one
// once is the point (an enrollment code, a rotated key), and never a
// secret's value.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/urfave/cli/v3"
)

// Exit statuses.
const (
	exitOK      = 0
	exitError   = 1
	exitUsage   = 2
	exitPending = 3 // a grant waits for the owner
)

// Defaults of the global flags.
const (
	defaultAddr      = "127.0.0.1:7077"
	defaultHome      = "~/.plexus"
	defaultAgentHome = "~/.config/plexus/agent"
)

// commands lists the constructors of the top-level commands, one file each.
// A new command group is a new file plus one line here.
func commands() []func() *cli.Command {
	return []func() *cli.Command{
		initCommand,
		serveCommand,
		statusCommand,
		consoleCommand,
		agentsCommand,
		grantsCommand,
		pendingCommand,
		showCommand,
		approveCommand,
		rejectCommand,
		portalCommand,
		extCommand,
		mcpCommand,
		keyCommand,
		journalCommand,
		secretsCommand,
		providersCommand,
		agentCommand,
		clientsCommand,
		serviceCommand,
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runIn(ctx, process{decider: deciderIdentity, stdin: os.Stdin}, args, stdout, stderr)
}

// runIn is run with what the command line takes from its process given by
// the caller, as tests do.
func runIn(ctx context.Context, p process, args []string, stdout, stderr io.Writer) int {
	return exitStatus(newRoot(stdout, stderr, p).Run(ctx, args), stderr)
}

// process is what the command line takes from the process it runs in,
// beyond flags, environment and streams: what tests replace.
type process struct {
	// decider names the person deciding (deciderIdentity): `plexus
	// approve` and `reject` write it into the decision file, and `serve`
	// journals it for decisions made by moving files.
	decider func() string
	// stdin is what `plexus secrets set` reads the value from; nil is
	// os.Stdin.
	stdin io.Reader
}

// processKey is where the root command's Metadata holds its process.
const processKey = "process"

// processOf returns the process cmd runs in.
func processOf(cmd *cli.Command) process {
	p, _ := cmd.Root().Metadata[processKey].(process)
	if p.decider == nil {
		p.decider = deciderIdentity
	}
	return p
}

func newRoot(stdout, stderr io.Writer, p process) *cli.Command {
	root := &cli.Command{
		Name:    "plexus",
		Usage:   "a local capability gateway for AI agents",
		Version: plexus.Version,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "home", Usage: "the gateway's state directory", Sources: cli.EnvVars("PLEXUS_HOME"),
				Value: expandHome(defaultHome), DefaultText: defaultHome},
			&cli.StringFlag{Name: "addr", Usage: "the gateway's loopback address", Sources: cli.EnvVars("PLEXUS_ADDR"),
				Value: defaultAddr},
			&cli.StringFlag{Name: "agent-home", Usage: "the agent's credential directory", Sources: cli.EnvVars("PLEXUS_AGENT_HOME"),
				Value: expandHome(defaultAgentHome), DefaultText: defaultAgentHome},
		},
		Reader:    p.stdin,
		Writer:    stdout,
		ErrWriter: stderr,
		// Errors are reported once, by exitStatus; never os.Exit from inside.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
		Metadata:       map[string]any{processKey: p},
		// `plexus completion bash|zsh|fish` prints the script that completes
		// commands and flags from this very tree.
		EnableShellCompletion: true,
		ConfigureShellCompletionCommand: func(c *cli.Command) {
			c.Hidden = false
			c.Usage = "print the shell completion script: source <(plexus completion bash)"
		},
	}
	for _, c := range commands() {
		root.Commands = append(root.Commands, c())
	}
	prepare(root)
	return root
}

// prepare makes every command report usage errors as exit status 2 and keep
// commas inside repeated flag values (--grant cap=read,write), and every
// command group answer an unknown subcommand as one.
func prepare(c *cli.Command) {
	c.DisableSliceFlagSeparator = true
	if c.Action == nil && len(c.Commands) > 0 {
		c.Action = unknownCommand
	}
	if c.OnUsageError == nil {
		c.OnUsageError = func(_ context.Context, cmd *cli.Command, err error, _ bool) error {
			return &codedError{code: exitUsage, msg: fmt.Sprintf("%v\nsee: %s --help", err, cmd.FullName())}
		}
	}
	for _, sub := range c.Commands {
		prepare(sub)
	}
}

// unknownCommand is the action of a command group: without arguments it
// shows the group's help; with one, that argument named no command of the
// group, which is a usage error with the nearest name suggested (the
// framework's own answer, "No help topic for …", reads as a help problem).
func unknownCommand(_ context.Context, cmd *cli.Command) error {
	if cmd.Args().Len() == 0 {
		return cli.ShowSubcommandHelp(cmd)
	}
	name := cmd.Args().First()
	msg := fmt.Sprintf("unknown command %q", strings.TrimSpace(cmd.FullName()+" "+name))
	if near := cli.SuggestCommand(cmd.Commands, name); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", strings.TrimSpace(cmd.FullName()+" "+near))
	}
	return &codedError{code: exitUsage, msg: msg + "\nsee: " + cmd.FullName() + " --help"}
}

// codedError ends the program with code, printing msg (when not empty) to
// stderr.
type codedError struct {
	code int
	msg  string
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) ExitCode() int { return e.code }

func usageError(cmd *cli.Command, format string, args ...any) error {
	return &codedError{code: exitUsage, msg: fmt.Sprintf(format, args...) + "\nsee: " + cmd.FullName() + " --help"}
}

// exitStatus reports err on stderr and maps it to an exit status.
func exitStatus(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *codedError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(stderr, "plexus:", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "plexus:", err)
	if client.IsPending(err) {
		return exitPending
	}
	// The framework's own exit errors are usage errors ("No help topic
	// for …"); its codes would collide with ours.
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return exitUsage
	}
	return exitError
}

// expandHome turns a leading ~/ into the user's home directory. Without a
// home directory the path stays as is, and using it fails visibly.
func expandHome(p string) string {
	if len(p) < 2 || p[:2] != "~/" {
		return p
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.Join(h, p[2:])
}
