//go:build !race

package server

// raceEnabled is set when the tests run under the race detector, which
// makes the local engine's sandboxes several times slower to make.
const raceEnabled = false
