#!/bin/sh
# clients/go/test.sh -- the Go client's whole suite (gofmt, vet, then go test with the race
# detector) against the stack clients/stack.py started (REDLOCK_URL, REDLOCK_TEST_*).
# Standard library only: no module is downloaded (GOPROXY=off); the build cache lives
# under the repository's build/ directory, so it works as root on a fresh machine.
# Extra arguments go to `go test` (e.g. -run 'TestLock' -v).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export GOCACHE="$root/build/go/cache" GOPATH="$root/build/go/path"
export GOFLAGS=-mod=mod GOPROXY=off GO111MODULE=on GOTOOLCHAIN=local GOWORK=off
cd "$here"
go version
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "gofmt -l: $unformatted" >&2; exit 1; fi
go vet ./...
# -race needs cgo (gcc, from build-essential); without it the suite still runs.
race=-race
if ! command -v gcc >/dev/null 2>&1; then race=; fi
exec go test -count=1 $race -timeout 300s "$@" ./...
