// Command notescli is the runnable backend of the cli examples in
// examples/extensions: a tiny notes tool over a folder of markdown files.
//
//	notescli read <path>          print a note as JSON {"path", "text"}
//	notescli append <path> <text> append a line, print {"path", "bytes"}
//	notescli list                 print the notes as JSON {"notes": [...]}
//
// The folder is $NOTES_DIR (default ~/notes). Plexus runs a cli tool with
// its base environment only (docs/extensions.md, "Child processes"), so
// under Plexus it is ~/notes unless a wrapper script sets NOTES_DIR. Paths
// are relative to it and may not leave it. Install it where Plexus finds binaries:
//
//	go install ./examples/notescli   # into ~/go/bin, on Plexus's enriched PATH
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "notescli:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	dir := os.Getenv("NOTES_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return err
		}
		dir = filepath.Join(home, "notes")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("notes folder: %w", err)
	}
	defer root.Close()
	if len(args) == 0 {
		return errors.New("usage: notescli read <path> | append <path> <text> | list")
	}
	out := json.NewEncoder(os.Stdout)
	switch {
	case args[0] == "read" && len(args) == 2:
		b, err := root.ReadFile(args[1])
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{"path": args[1], "text": string(b)})
	case args[0] == "append" && len(args) == 3:
		f, err := root.OpenFile(args[1], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		line := strings.TrimRight(args[2], "\n") + "\n"
		if _, err := f.WriteString(line); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return out.Encode(map[string]any{"path": args[1], "bytes": len(line)})
	case args[0] == "list" && len(args) == 1:
		notes := []string{}
		err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
				notes = append(notes, p)
			}
			return err
		})
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{"notes": notes})
	}
	return fmt.Errorf("unknown command %q (read <path> | append <path> <text> | list)", strings.Join(args, " "))
}
