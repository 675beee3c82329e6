package local

// Init runs the sandbox init when this process is one (or the egress proxy
// helper of a sandbox with a DomainAllowList), and never returns then;
// otherwise it returns at once. Call it first thing in main, and in
// TestMain of tests that start local sandboxes: a local sandbox's PID 1 is
// the same binary re-executed.
//
// The package's own initialisation calls Init too, so a program that
// forgets it still never runs its main as a sandbox init; the explicit call
// documents the re-execution where a reader of main looks for it. On
// systems other than Linux, which run no local sandbox, Init does nothing.
func Init() {
	initMain()
	egressProxyMain()
	netsockMain()
	usernetMain()
}

func init() { Init() }
