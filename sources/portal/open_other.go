//go:build !unix

package portal

// nonblock is zero where opening a FIFO cannot block the caller.
const nonblock = 0
