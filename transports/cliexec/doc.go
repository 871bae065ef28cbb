// Package cliexec is the "cli" transport: each call runs a local binary once,
// with an argv built from the entry's template, and returns what it printed
// (plexus-extension-spec v0.1 §2.2, §4).
//
// The package must never run a shell, never let an input value become more
// or less than the one argument its placeholder stands in, and never put a
// resolved secret into a result, an error message or a log. It logs nothing.
//
// # Route
//
// An entry's [plexus.Entry.Route] holds a [plexus.ExtensionRoute]; its
// "route" object is the declaration's, and these keys of it are read (all
// others are ignored: the route is an open bag shared with other readers):
//
//   - "bin" (string, required): the binary. A bare name is resolved through
//     [Binaries] (the platform's enriched PATH). A name with a path separator
//     must be absolute: a relative path would depend on the daemon's working
//     directory, which nobody chose for it. When the entry carries
//     [plexus.ExtensionRoute.Runs] (the file the program resolved to, links
//     followed, when it was materialized), a call whose program now
//     resolves to another file is refused as source_unavailable
//     ([plexus.CheckRuns]).
//   - "args" (list of strings, optional): the argv template, one element per
//     argument. "{field}" in an element is replaced by the input field's
//     value; "{a.b}" reads field b of object a. A string is used as is, a
//     number or boolean as its JSON text, anything else (object, array,
//     null) as its JSON encoding. Text around a placeholder stays
//     ("--file={path}" is one argument), and substitution never splits or
//     joins arguments: "; rm -rf ~" is one argument, passed to the binary
//     as those nine bytes. "{{" and "}}" stand for literal braces. A field
//     missing from the input fails the call naming it; it is never passed as
//     an empty argument. Input never chooses an option: an argument whose
//     template starts with a placeholder and whose value starts with "-"
//     ("-rf", "--output=x", the number -1) fails the call with
//     schema_validation_failed, unless a literal "--" argument comes before
//     it in the template (then the program reads it as an operand).
//     "--file={path}" stays a value whatever path holds.
//   - "secret" (object, optional): {"name", "attach", "as"}. The named secret
//     is resolved through [Secrets] at each call and given to the child in
//     its environment, never on its command line. attach must be "env" (the
//     only mode a process has); when route.secret leaves attach or as empty,
//     the manifest's secrets[] entry of the same name supplies them. The
//     variable is as, or PLEXUS_SECRET_ followed by the name in upper case
//     with every character other than a letter or digit turned into "_".
//     PATH and loader variables (LD_*, DYLD_*) are refused as names.
//   - "timeoutMs" (positive integer, optional): the call's time limit;
//     [Options.Timeout] when absent, never more than [Options.MaxTimeout].
//
// Malformed known keys (bin not a string, args not a list of strings, an
// unclosed "{", …) fail the call with transport_error and a message that
// names the key.
//
// # The child process
//
// The child is built and started by [Binaries] (the platform's one way:
// its own process group, killed with the daemon, recorded so that a crash
// leaves nothing running). It gets the base environment of [Binaries.Env]
// plus the route's secret and nothing else, no stdin (/dev/null), and the
// daemon's working directory. Its stdout is read up to [Options.MaxOutput] bytes; beyond that
// the call fails and the process group is stopped. The last 64 KiB of
// stderr are kept for the error excerpt.
//
// When the time limit passes, the caller's context ends or the output is
// too large, the whole process group gets SIGTERM and, after
// [Options.KillGrace], the tool gets SIGKILL. When the call ends, however it
// ends, whatever is left in the group gets SIGKILL: nothing a call started
// outlives it. A tool that means to leave a process running must start it
// in a session of its own, as daemons do. A background process that keeps
// the tool's stdout or stderr open delays the result by KillGrace at most.
//
// # Result
//
// Exit status 0 is success. If stdout, without surrounding white space, is
// one JSON object or array, the result's data is that value, decoded with
// numbers kept exact as [encoding/json.Number]. Anything else (text, a bare
// JSON scalar, several JSON values) is returned as
//
//	{"stdout": "<stdout as text, invalid UTF-8 replaced by U+FFFD>", "exitCode": 0}
//
// Any occurrence of the resolved secret in the data is replaced by
// "[redacted]". stderr is not part of a successful result.
//
// Every failure is a result with OK false:
//   - source_unavailable: the binary cannot be resolved (not installed);
//   - transport_error: a malformed route, a missing placeholder field, a
//     secret that cannot be resolved, a non-zero exit ("<bin> exited with
//     status N" and the last KiB of stderr, with Detail {"exitCode",
//     "stderr"}), a time limit ("timed out after …"), the caller's context
//     ending, or output over the limit ("output exceeds N bytes").
//
// The stderr excerpt is valid UTF-8, and every occurrence of the resolved
// secret and of anything shaped like a Plexus credential (plx_live_…,
// plx_agent_…, plx_enroll_…) in it is replaced by "[redacted]".
package cliexec
