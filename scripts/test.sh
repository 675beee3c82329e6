#!/usr/bin/env bash
# Runs every check of agentbox, as CI does: installs what the tests need
# (Debian packages, staticcheck), then gofmt, go vet, staticcheck and the
# whole test suite under the race detector, and prints a summary.
#
# Environment:
#   AGENTBOX_DAYTONA_SPEC_DIR  Daytona spec files (default ../shared/daytona-api
#                              beside the module root)
#   AGENTBOX_SKIP_INSTALL=1    do not install anything
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

STATICCHECK_VERSION=v0.8.2 # honnef.co/go/tools
# gcsfuse, for the GCS bucket mount tests (v3.8.3: the last release that
# builds with Go 1.26.6).
GCSFUSE_VERSION=v3.8.3 # github.com/googlecloudplatform/gcsfuse/v3
# Debian packages the tests use: a shell and the usual tools commands run
# with, util-linux (unshare, nsenter, mount) and procps (ps, pkill in
# sandboxes) for the local engine; bubblewrap, which the escape probes run
# in a sandbox that allows nested namespaces; curl for the DomainAllowList
# probes (and nsenter, of util-linux, for BenchmarkEgressDownload);
# e2fsprogs (mkfs.ext4), which formats the disk images of sandboxes' disk
# limits; git, which makes and serves (http-backend) the repository the
# Daytona SDK test clones; nodejs and npm, which run the Daytona
# TypeScript SDK (installed only when node or npm is missing: a machine may
# have a newer Node.js of its own).
# python3 and python3-matplotlib for code-run (charts) and the
# interpreter; tmux, which drives agentbox shell in its test; s3fs (with
# fuse3), which the bucket mount tests run.
APT_PACKAGES=(bash coreutils util-linux procps mawk sed grep findutils bubblewrap curl e2fsprogs git python3 python3-matplotlib tmux s3fs fuse3 chromium) # chromium: the dashboard's browser tests (daytona/server/dashboard_browser_test.go)
command -v node >/dev/null || APT_PACKAGES+=(nodejs)
command -v npm >/dev/null || APT_PACKAGES+=(npm)
# The npm project of internal/sdktest: the Daytona TypeScript SDK releases
# its test runs, Mastra's @mastra/daytona and @mastra/core, and tsx, with which toolbox/daemon's code-run test runs
# TypeScript on Node.js before 22.6; pinned by its package-lock.json.
SDK_NODE_DIR=internal/sdktest/testdata/node

step() { printf '\n==> %s\n' "$*"; }

install_packages() {
	local missing=()
	for p in "${APT_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if ((${#missing[@]} == 0)); then
		echo "Debian packages present: ${APT_PACKAGES[*]}"
		return
	fi
	local sudo=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null || {
			echo "missing packages ${missing[*]}; run as root or install them" >&2
			exit 1
		}
		sudo=(sudo)
	fi
	echo "installing ${missing[*]}"
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# install_sdk installs the npm packages of $SDK_NODE_DIR unless the ones
# installed are those of its package-lock.json (a copy kept in
# node_modules says which were).
install_sdk() {
	local stamp="$SDK_NODE_DIR/node_modules/.agentbox-package-lock.json"
	if cmp -s "$SDK_NODE_DIR/package-lock.json" "$stamp"; then
		echo "Daytona SDK packages present in $SDK_NODE_DIR"
		return
	fi
	echo "installing the Daytona SDK packages in $SDK_NODE_DIR"
	npm ci --prefix "$SDK_NODE_DIR" --ignore-scripts --no-audit --no-fund --loglevel=error
	cp "$SDK_NODE_DIR/package-lock.json" "$stamp"
}

GOBIN_DIR="$(go env GOPATH)/bin"
export PATH="$GOBIN_DIR:$PATH"

if [[ "${AGENTBOX_SKIP_INSTALL:-}" != 1 ]]; then
	step "installing what the tests need"
	if command -v dpkg-query >/dev/null; then
		install_packages
	else
		echo "not a Debian system: make sure ${APT_PACKAGES[*]} are installed"
	fi
	install_sdk
	if ! staticcheck -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
		go install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}"
	fi
	staticcheck -version
	# (a go-installed gcsfuse reports version "unknown": read its build info)
	if ! go version -m "$(command -v gcsfuse || echo /nonexistent)" 2>/dev/null | grep -q "gcsfuse/v3[[:space:]]*${GCSFUSE_VERSION}"; then
		go install "github.com/googlecloudplatform/gcsfuse/v3@${GCSFUSE_VERSION}"
	fi
fi

step "gofmt"
unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
	echo "not gofmt-formatted (run gofmt -w):" >&2
	echo "$unformatted" >&2
	exit 1
fi
echo ok

step "go vet"
go vet ./...
echo ok

step "staticcheck"
staticcheck ./...
echo ok

# Modules of their own under contrib/ (framework adapters, so that the
# agentbox module does not depend on the frameworks).
for mod in contrib/*/go.mod; do
	dir="$(dirname "$mod")"
	step "$dir: go vet, staticcheck, go test -race"
	(cd "$dir" && go vet ./... && staticcheck ./... && AGENTBOX_REQUIRE_ALL=1 go test -race -count=1 ./...)
done

step "go test -race (AGENTBOX_REQUIRE_ALL=1)"
# The JSON event stream goes through internal/cmd/testsummary, which prints
# what a plain go test would (each package's result, the output of failing
# tests) and then lists every skipped test with its reason.
summary_bin="$(mktemp -d)"
trap 'rm -rf "$summary_bin"' EXIT
go build -o "$summary_bin/testsummary" ./internal/cmd/testsummary
start=$SECONDS
set +e
AGENTBOX_REQUIRE_ALL=1 go test -race -count=1 -timeout 20m -json ./... 2>&1 | "$summary_bin/testsummary"
status=("${PIPESTATUS[@]}")
set -e
echo "go test: $((SECONDS - start))s"
if ((status[0] != 0 || status[1] != 0)); then
	echo "go test failed (exit ${status[0]}, summary ${status[1]})" >&2
	exit 1
fi
echo "all checks passed"
