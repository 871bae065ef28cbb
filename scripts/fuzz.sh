#!/bin/sh
# Runs every fuzz target of the module, one at a time (go test takes one
# -fuzz target per run), for FUZZTIME each (default 3s; make test uses that,
# make fuzz FUZZTIME=10m runs longer). Packages default to every package with
# a fuzz target; name some to run only theirs: scripts/fuzz.sh ./auth ./http
#
# A failing input is written by go test to <pkg>/testdata/fuzz/<Target>/:
# commit it with the fix, and plain go test replays it from then on. Every
# target runs even when one fails; the exit status says whether any did.
set -u

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-3s}
# FUZZPARALLEL bounds the fuzzing workers (default: GOMAXPROCS).
parallel=${FUZZPARALLEL:+-parallel $FUZZPARALLEL}

cd "$(dirname "$0")/.." || exit 2

if [ "$#" -gt 0 ]; then
	pkgs="$*"
else
	# Only packages whose tests declare a fuzz target; listing goes through
	# go test -list below, which is what decides.
	pkgs=$(grep -rl --include='*_test.go' --exclude-dir=node_modules --exclude-dir=testdata '^func Fuzz' . |
		xargs -n1 dirname | sort -u)
fi

log=$(mktemp)
status=$(mktemp)
trap 'rm -f "$log" "$status"' EXIT

# corpus lists what the target's testdata/fuzz folder holds, so that a run
# can tell whether it wrote a failing input.
corpus() { ls "$1/testdata/fuzz/$2" 2>/dev/null; }

# fuzz_one runs one target, its output teed into $log; before holds the
# corpus as it was, for retry_race.
fuzz_one() {
	before=$(corpus "$1" "$2")
	echo "fuzz: $1 $2 for $FUZZTIME"
	# shellcheck disable=SC2086 # $parallel is empty or two words
	{
		$GO test -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" $parallel "$1" 2>&1
		echo $? >"$status"
	} | tee "$log"
	[ "$(cat "$status")" = 0 ]
}

# retry_race runs a failed target once more (the loop above allows two
# reruns) when its failure is Go's
# fuzzing-coordinator race (go.dev/issue/75804, not fixed in Go 1.26): the
# run ends with a bare "context deadline exceeded" at the -fuzztime boundary
# and writes no failing input. Any other failure, or one that wrote an
# input, stands.
retry_race() {
	if [ "$(corpus "$1" "$2")" != "$before" ] || ! grep -qx '    context deadline exceeded' "$log"; then
		return 1
	fi
	echo "fuzz: $1 $2 ended with Go's fuzztime deadline race and no failing input; running it again"
	fuzz_one "$1" "$2"
}

failed=""
count=0
for pkg in $pkgs; do
	targets=$($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz') || {
		echo "fuzz: cannot list the targets of $pkg" >&2
		failed="$failed $pkg"
		continue
	}
	for target in $targets; do
		count=$((count + 1))
		if ! fuzz_one "$pkg" "$target" && ! retry_race "$pkg" "$target" && ! retry_race "$pkg" "$target"; then
			failed="$failed $pkg:$target"
		fi
	done
done

if [ "$count" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
if [ -n "$failed" ]; then
	echo "fuzz: FAILED:$failed (failing inputs are under each package's testdata/fuzz/)" >&2
	exit 1
fi
echo "fuzz: $count targets passed"
