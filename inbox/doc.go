// Package inbox is the file side of files as API (docs/files-as-api.md): it
// renders a decision waiting for the owner as a markdown file with YAML
// frontmatter, reads such a file back after the owner has edited it, and says
// what those edits ask for.
//
// Everything here is pure and deterministic, apart from [WriteAtomic]: the
// same decision renders to the same bytes, so files diff well and the daemon
// can recognize (by [Sum]) a file it wrote itself.
//
// The package never decides anything. [Changes] only reports the narrowing an
// edited file asks for, or why the edit is refused; applying it is the
// gateway's single decision function (gateway.Decide), which the caller hands
// it to. The owner's words and the agent's are kept apart: the agent's purpose
// is only ever shown quoted, never merged into the gateway's narration.
package inbox
