//go:build !linux

package platform

// RenameNoReplace renames src to dst unless something is at dst: then it
// fails with an error wrapping fs.ErrExist. Outside Linux it checks, then
// renames, so a file appearing at dst in between can still be replaced.
func RenameNoReplace(src, dst string) error { return renameChecked(src, dst) }
