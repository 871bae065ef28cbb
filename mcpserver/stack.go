package mcpserver

// A host's call runs on a goroutine the SDK starts for that request alone,
// which begins with a small stack (the runtime's average). The way from
// there through the gateway into an upstream server's client (its JSON
// decoding, net/http) needs 13 KiB (a tools/call passed through to a
// Streamable HTTP server) to 17 KiB (one through the SDK's client), so
// that stack was grown two to four times, each time copying and adjusting
// every frame of a deeper stack: 15 % of the CPU of the call's goroutine in the profile of
// BenchmarkMCPFrontHTTP, and most of the difference between the gateway's
// steps before dispatch for an /mcp call and for an /invoke (whose
// connection goroutine has grown its stack already). Growing it once, as
// the call starts, copies a stack a few frames deep instead. The bridge's
// pumped calls (bridgepump.go) run on goroutines of their own too.

// callStack is the stack a call reserves as it starts: with what is on it
// already, the runtime grows it to 32 KiB, which every path measured fits
// in. Reserving less (a 16 KiB stack) would save ~0.2 µs where a call fits
// it and cost ~3.5 µs where one does not (the growth to 32 KiB then comes
// deep in the call), in a benchmark of a goroutine going 12.5 and 18 KiB
// deep.
const callStack = 16 << 10

// reserveStack grows the calling goroutine's stack, in one step, to hold a
// frame of callStack bytes; never is false in every call, so the frame is
// never written: the call costs its stack check alone once the stack is
// large enough.
//
//go:noinline
func reserveStack(never bool) {
	if never {
		var frame [callStack]byte
		keepFrame(&frame)
	}
}

//go:noinline
func keepFrame(f *[callStack]byte) { f[0] = 1 }
