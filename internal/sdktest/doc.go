// Package sdktest proves that the official Daytona TypeScript SDK (npm
// @daytonaio/sdk) works against agentbox's toolbox server unchanged. It has
// no API: its test starts toolbox servers (package toolbox/daemon) on
// loopback behind a stub of Daytona's control plane and runs a node program
// that drives the SDK through every feature, once per SDK release.
//
// The folder testdata/node is an npm project: package.json pins the SDK
// releases under npm aliases (sdk-0.205: the release of the spec files in
// ../shared/daytona-api; sdk-latest: the newest), package-lock.json pins
// everything they pull in, driver.mjs runs the features and the other
// *.mjs files are the features. scripts/test.sh installs the packages; by
// hand:
//
//	npm ci --ignore-scripts --prefix internal/sdktest/testdata/node
//
// The test skips when node or the packages are missing, and fails under
// AGENTBOX_REQUIRE_ALL=1.
package sdktest
