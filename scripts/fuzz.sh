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
		echo "fuzz: $pkg $target for $FUZZTIME"
		# shellcheck disable=SC2086 # $parallel is empty or two words
		if ! $GO test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" $parallel "$pkg"; then
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
