// Command mdfmt is the runnable backend of the cli formatter example in
// examples/extensions: it tidies a markdown file in place (trailing spaces
// removed, runs of blank lines collapsed, one final newline) and prints
// {"path", "changed"} as JSON.
//
//	mdfmt --write <path>
//
//	go install ./examples/mdfmt   # into ~/go/bin, on Plexus's enriched PATH
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func main() {
	if len(os.Args) != 3 || os.Args[1] != "--write" {
		fmt.Fprintln(os.Stderr, "usage: mdfmt --write <path>")
		os.Exit(2)
	}
	path := os.Args[2]
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdfmt:", err)
		os.Exit(1)
	}
	out := format(string(b))
	changed := out != string(b)
	if changed {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "mdfmt:", err)
			os.Exit(1)
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"path": path, "changed": changed})
}

func format(s string) string {
	var lines []string
	blank := 0
	for l := range strings.SplitSeq(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		lines = append(lines, l)
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n") + "\n"
}
