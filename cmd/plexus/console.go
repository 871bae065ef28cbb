package main

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"time"

	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/console"
	"github.com/urfave/cli/v3"
)

func consoleCommand() *cli.Command {
	return &cli.Command{
		Name:  "console",
		Usage: "open the owner's web console in the default browser, signed in by a one-time link",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "print", Usage: "print the one-time link instead of opening a browser"}},
		Action: withAdmin(0, "", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			link, err := adm.ConsoleLink(ctx)
			if err != nil {
				return err
			}
			w := cmd.Root().Writer
			left := time.Until(link.ExpiresAt).Round(time.Second)
			if cmd.Bool("print") {
				fmt.Fprintln(w, link.URL)
				return nil
			}
			// The opener gets a private file's path, not the link: a command
			// line is readable by every local user.
			page, err := console.LinkFile(cmd.String("home"), link.URL, time.Now())
			if err == nil {
				err = openBrowser(page)
			}
			if err != nil {
				fmt.Fprintf(w, "Could not open a browser (%v). Open this link yourself; it works once, for %s:\n%s\n", err, left, link.URL)
				return nil
			}
			fmt.Fprintf(w, "Opened the console in your browser (the sign-in link works once, for %s).\n", left)
			return nil
		}),
	}
}

// openBrowser hands the page at path to the desktop's opener, which returns once the
// browser has it; the opener is not waited for past its start.
func openBrowser(path string) error {
	opener := "xdg-open"
	if runtime.GOOS == "darwin" {
		opener = "open"
	}
	bin, err := exec.LookPath(opener)
	if err != nil {
		return err
	}
	c := exec.Command(bin, path)
	if err := c.Start(); err != nil {
		return err
	}
	return c.Process.Release()
}
