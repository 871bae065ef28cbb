//go:build unix

package portal

import "syscall"

// nonblock makes opening a FIFO or a device return at once instead of
// waiting for a writer: an agent must not be able to hang a call by naming
// a FIFO in the folder. It has no effect on regular files and directories.
const nonblock = syscall.O_NONBLOCK
