package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/registry"
	"github.com/urfave/cli/v3"
)

// agentCommand is the agent's side: enroll once, then list and call. It
// needs no connection-key, only the agent's own credential.
func agentCommand() *cli.Command {
	return &cli.Command{
		Name:  "agent",
		Usage: "act as an agent: enroll, list and call capabilities, register extensions",
		Commands: []*cli.Command{
			agentEnrollCommand(),
			agentListCommand(),
			agentCallCommand(),
			agentRegisterCommand(),
		},
	}
}

func agentEnrollCommand() *cli.Command {
	return &cli.Command{
		Name:      "enroll",
		Usage:     "redeem a one-time enrollment code and store the agent's credential",
		ArgsUsage: "<code>",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "force", Usage: "replace an existing credential"}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := checkArgs(cmd, 1, "<code>"); err != nil {
				return err
			}
			ag, store, addr, err := agentClient(cmd, false)
			if err != nil {
				return err
			}
			id, err := ag.Enroll(ctx, cmd.Args().First(), cmd.Bool("force"))
			if errors.Is(err, client.ErrAlreadyEnrolled) {
				return &codedError{code: exitError, msg: fmt.Sprintf("%v\n(re-run with --force to replace it, or use another --agent-home)", err)}
			}
			if err != nil {
				return notRunning(addr, err)
			}
			fmt.Fprintf(cmd.Root().Writer, "Enrolled as %q with the gateway at %s.\nCredential stored in %s (mode 0600).\n",
				id, addr, store.Dir()+"/"+client.CredentialsFile)
			return nil
		},
	}
}

func agentListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list capabilities: callable now, or needing the owner's approval",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := checkArgs(cmd, 0, ""); err != nil {
				return err
			}
			ag, _, addr, err := agentClient(cmd, true)
			if err != nil {
				return err
			}
			entries, err := ag.List(ctx)
			if err != nil {
				return agentErr(addr, err)
			}
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				if entries == nil {
					entries = []client.ListEntry{}
				}
				return printJSON(w, entries)
			}
			return client.WriteEntries(w, entries)
		},
	}
}

func agentCallCommand() *cli.Command {
	return &cli.Command{
		Name:      "call",
		Usage:     "call a capability, asking for a grant first when needed",
		ArgsUsage: "<capability> [key=value...]",
		Description: "Each key=value becomes an input field; a value that parses as JSON (a number, true,\n" +
			"an object) is taken as JSON, anything else as a string. Pairs override --input.\n" +
			"Exit status 3 means the grant waits for the owner's approval. Calling again resumes that\n" +
			"request (it picks up the approval, or reports the same pending id or the owner's denial)\n" +
			"rather than asking the owner a second time.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Usage: "the input as a JSON object"},
			&cli.StringFlag{Name: "purpose", Usage: "why you ask, shown to the owner beside the gateway's own narration"},
			&cli.BoolFlag{Name: "wait", Usage: "wait for the owner's decision when the grant pends"},
			&cli.DurationFlag{Name: "timeout", Usage: "how long --wait waits", Value: 10 * time.Minute},
			&cli.StringFlag{Name: "idempotency-key", Usage: "run the call at most once under this key"},
			&cli.BoolFlag{Name: "no-progress", Usage: "do not show the call's output chunks and progress on stderr as it runs"},
			&cli.BoolFlag{Name: "json", Usage: "print the whole InvokeResponse as JSON"},
		},
		Action: agentCall,
	}
}

func agentCall(ctx context.Context, cmd *cli.Command) error {
	if cmd.Args().Len() < 1 {
		return usageError(cmd, "usage: %s <capability> [key=value...]", cmd.FullName())
	}
	id := cmd.Args().First()
	input, err := callInput(cmd)
	if err != nil {
		return err
	}
	ag, _, addr, err := agentClient(cmd, true)
	if err != nil {
		return err
	}
	var pendingID string // set by OnPending, read after Call returns
	resp, err := ag.Call(ctx, id, input, callOptions(cmd, id, &pendingID))
	if err := client.WriteResult(cmd.Root().Writer, cmd.Root().ErrWriter, id, pendingID, resp, err, cmd.Bool("json")); err != nil {
		return agentErr(addr, err)
	}
	return nil
}

// callInput is the call's input from --input and the key=value arguments;
// nil when there is none.
func callInput(cmd *cli.Command) (map[string]any, error) {
	base, err := client.ParseInput(cmd.String("input"))
	if err != nil {
		return nil, usageError(cmd, "%v", err)
	}
	input, err := client.MergePairs(cmd.Args().Tail(), base)
	if err != nil {
		return nil, usageError(cmd, "%v", err)
	}
	if len(input) == 0 {
		input = nil
	}
	return input, nil
}

// callOptions are the call's flags; a grant that pends is narrated on
// stderr and its id kept in pendingID.
func callOptions(cmd *cli.Command, id string, pendingID *string) client.CallOptions {
	stderr := cmd.Root().ErrWriter
	opts := client.CallOptions{
		Purpose:        cmd.String("purpose"),
		Wait:           cmd.Bool("wait"),
		WaitTimeout:    cmd.Duration("timeout"),
		IdempotencyKey: cmd.String("idempotency-key"),
		OnPending: func(p plexus.GrantPendingResponse) {
			*pendingID = p.PendingID
			client.Narrate(stderr, id, p)
			if cmd.Bool("wait") {
				fmt.Fprintf(stderr, "Waiting up to %s for the owner's decision (pending %s)…\n", cmd.Duration("timeout"), p.PendingID)
			}
		},
	}
	if !cmd.Bool("json") && !cmd.Bool("no-progress") {
		opts.OnProgress = func(ev plexus.InvokeProgressEvent) { client.WriteProgress(stderr, ev) }
	}
	return opts
}

func agentRegisterCommand() *cli.Command {
	return &cli.Command{
		Name:      "register",
		Usage:     "ask the owner to register an extension (POST /extensions); exits 3 while it waits for the owner",
		ArgsUsage: "<manifest.json>",
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := checkArgs(cmd, 1, "<manifest.json>"); err != nil {
				return err
			}
			m, err := registry.ReadManifest(cmd.Args().First())
			if err == nil {
				err = registry.ValidateManifest(m, nil) // every problem at once, before asking
			}
			if err != nil {
				return reportManifest(cmd, m, err)
			}
			ag, _, _, err := agentClient(cmd, true)
			if err != nil {
				return err
			}
			resp, err := ag.RegisterExtension(ctx, m)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.Root().Writer, "Asked the owner to register the extension %s (%d entries): pending %s.\n",
				m.Source, len(m.Capabilities), resp.PendingID)
			fmt.Fprintln(cmd.Root().ErrWriter, "The owner decides it in their inbox (or: plexus approve "+resp.PendingID+").")
			return &codedError{code: exitPending}
		},
	}
}
