package main

// `plexus approve` and `plexus reject` decide the way a person does with
// files as API: [inbox.OwnerMove] stamps and moves the decision's file, and
// watches for the daemon's outcome.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/plexus-gw/plexus"
	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/inbox"
	"github.com/urfave/cli/v3"
)

func approveCommand() *cli.Command {
	return &cli.Command{
		Name:      "approve",
		Usage:     "approve a pending decision by moving its file to active/, optionally with a shorter trust window",
		ArgsUsage: "<pending-id>",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "window", Usage: "a shorter trust window for each capability that asked longer: once, 1h, 1d, 7d or a duration such as 36h or 3d (execute stays once)"},
			&cli.StringFlag{Name: "reason", Usage: "why, for the journal"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := checkArgs(cmd, 1, "<pending-id>"); err != nil {
				return err
			}
			opts := inbox.StampOptions{Reason: cmd.String("reason")}
			if s := cmd.String("window"); s != "" {
				w, err := inbox.ParseWindow(s)
				if err != nil {
					return usageError(cmd, "--window: %v", err)
				}
				opts.Window = &w
			}
			return decide(ctx, cmd, true, opts)
		},
	}
}

func rejectCommand() *cli.Command {
	return &cli.Command{
		Name:      "reject",
		Usage:     "deny a pending decision by moving its file to rejected/",
		ArgsUsage: "<pending-id>",
		Flags:     []cli.Flag{&cli.StringFlag{Name: "reason", Usage: "why, shown to the agent and kept in the journal", Required: true}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := checkArgs(cmd, 1, "<pending-id>"); err != nil {
				return err
			}
			if strings.TrimSpace(cmd.String("reason")) == "" {
				return usageError(cmd, "--reason: say why; the agent is told")
			}
			return decide(ctx, cmd, false, inbox.StampOptions{Reason: cmd.String("reason")})
		},
	}
}

// decide runs the owner's move of the decision named by cmd's argument.
func decide(ctx context.Context, cmd *cli.Command, approve bool, opts inbox.StampOptions) error {
	home := cmd.String("home")
	opts.DecidedBy = processOf(cmd).decider()
	m := &inbox.OwnerMove{Home: home, ID: cmd.Args().First(), Approve: approve, Stamp: opts, Out: cmd.Root().Writer}
	return m.Run(ctx, func() (inbox.Daemon, error) {
		key, err := readConnectionKey(home)
		if err != nil {
			return nil, err
		}
		addr, err := gatewayAddr(cmd)
		if err != nil {
			return nil, err
		}
		adm, err := client.NewAdmin(baseURL(addr), key, client.WithVia(plexus.ViaCLI))
		return ownerDaemon{adm: adm, home: home}, err
	})
}

// ownerDaemon is the running daemon as approve and reject ask it: its admin
// API, and its journal for the token an approval minted.
type ownerDaemon struct {
	adm  *client.Admin
	home string
}

func (d ownerDaemon) Pending(ctx context.Context, id string) (plexus.Pending, error) {
	p, err := d.adm.ShowPending(ctx, id)
	switch {
	case errors.Is(err, client.ErrUnreachable):
		return p, fmt.Errorf("%w: %w", inbox.ErrNotRunning, err)
	case client.CodeOf(err) == plexus.CodeNotFound:
		return p, fmt.Errorf("%w: %w", inbox.ErrUnknown, err)
	}
	return p, err
}

func (d ownerDaemon) MintedToken(ctx context.Context, p plexus.Pending) (string, error) {
	db, err := openJournalReadOnly(ctx, d.home)
	if err != nil {
		return "", err
	}
	defer db.Close()
	return db.MintedOnApproval(ctx, p.TraceID, p.ID)
}
