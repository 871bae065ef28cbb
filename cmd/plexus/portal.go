package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/plexus-gw/plexus/client"
	"github.com/plexus-gw/plexus/sources/portal"
	"github.com/urfave/cli/v3"
)

// aliasRe is what a portal alias may be: it becomes part of capability ids.
var aliasRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

func portalCommand() *cli.Command {
	return &cli.Command{
		Name:     "portal",
		Usage:    "expose folders to agents, path-confined",
		Commands: []*cli.Command{portalAddCommand(), portalListCommand(), portalRemoveCommand()},
	}
}

func portalAddCommand() *cli.Command {
	return &cli.Command{
		Name:      "add",
		Usage:     "expose a folder under an alias",
		ArgsUsage: "<path> <alias>",
		Action: withAdmin(2, "<path> <alias>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			path, alias := cmd.Args().Get(0), cmd.Args().Get(1)
			if !aliasRe.MatchString(alias) {
				return usageError(cmd, "alias %q: use letters, digits, '-' and '_'", alias)
			}
			created, err := createPortalFolder(path, alias)
			if err != nil {
				return err
			}
			sc, pc, err := portal.OwnerSource(path, alias)
			if err == nil {
				sc, err = adm.AddSource(ctx, sc)
			}
			if err != nil {
				return created.undo(err)
			}
			w := cmd.Root().Writer
			if created != nil {
				fmt.Fprintf(w, "Created %s with %s in it.\n", pc.Path, portalFirstFile)
			}
			fmt.Fprintf(w, "Portal %q added: %s (source %s).\n", alias, pc.Path, dash(sc.ID))
			return nil
		}),
	}
}

// portalFirstFile is the file a portal folder that `portal add` created
// starts with, so an agent's first read has something to read.
const portalFirstFile = "hello.md"

// createdFolder is what createPortalFolder made: the folder, the first
// missing folder on its way (top, possibly the folder itself) and its first
// file. Nil when it made nothing.
type createdFolder struct {
	path, top, file string
}

// createPortalFolder creates path (0700) with a first file when nothing is
// there, as on a fresh machine following the quick start, and says what it
// made. An existing folder is left exactly as it is: nothing the owner has
// is written to.
func createPortalFolder(path, alias string) (*createdFolder, error) {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil, nil // there (or unreadable): portal.OwnerSource says what is wrong
	}
	c := &createdFolder{path: filepath.Clean(path), top: firstMissing(path)}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("create the portal folder: %w", err)
	}
	text := fmt.Sprintf("# Hello from Plexus\n\nThis folder is exposed to agents as the portal %q:\n"+
		"portal.%s.list, .read and .search read it; portal.%s.write asks you first.\n", alias, alias, alias)
	c.file = filepath.Join(path, portalFirstFile)
	f, err := os.OpenFile(c.file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		c.file = ""
		return nil, c.undo(fmt.Errorf("create the portal folder: %w", err))
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return nil, c.undo(fmt.Errorf("create the portal folder: %w", err))
	}
	if err := f.Close(); err != nil {
		return nil, c.undo(fmt.Errorf("create the portal folder: %w", err))
	}
	return c, nil
}

// firstMissing is the outermost folder of path that does not exist yet:
// what MkdirAll is about to create first.
func firstMissing(path string) string {
	p := filepath.Clean(path)
	for {
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		if _, err := os.Lstat(parent); !errors.Is(err, fs.ErrNotExist) {
			return p
		}
		p = parent
	}
}

// undo takes back what createPortalFolder made, after cause (the daemon
// refusing the portal, or a failure half way), and returns cause. It
// removes only what it made, folder by folder with os.Remove, so a folder
// someone put anything into meanwhile stays, and says so.
func (c *createdFolder) undo(cause error) error {
	if c == nil {
		return cause
	}
	if c.file != "" {
		if err := os.Remove(c.file); err != nil {
			return fmt.Errorf("%w (and %s, created for the portal, is left: %v)", cause, c.file, err)
		}
	}
	for dir := c.path; ; dir = filepath.Dir(dir) {
		if err := os.Remove(dir); err != nil {
			return fmt.Errorf("%w (and %s, created for the portal, is left: %v)", cause, dir, err)
		}
		if dir == c.top || dir == filepath.Dir(dir) {
			return cause
		}
	}
}

func portalListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list portals",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: withAdmin(0, "", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			sources, err := adm.Sources(ctx)
			if err != nil {
				return err
			}
			portals := portal.Views(sources)
			w := cmd.Root().Writer
			if cmd.Bool("json") {
				return printJSON(w, portals)
			}
			t := newTable(w)
			fmt.Fprintln(t, "ALIAS\tPATH\tSOURCE")
			for _, p := range portals {
				fmt.Fprintf(t, "%s\t%s\t%s\n", dash(p.Alias), dash(p.Path), p.ID)
			}
			return t.Flush()
		}),
	}
}

func portalRemoveCommand() *cli.Command {
	return &cli.Command{
		Name:      "remove",
		Usage:     "stop exposing a portal",
		ArgsUsage: "<alias>",
		Action: withAdmin(1, "<alias>", func(ctx context.Context, cmd *cli.Command, adm *client.Admin) error {
			alias := cmd.Args().First()
			if err := adm.RemoveSource(ctx, portal.SourcePrefix+alias); err != nil {
				return err
			}
			fmt.Fprintf(cmd.Root().Writer, "Portal %q removed.\n", alias)
			return nil
		}),
	}
}
