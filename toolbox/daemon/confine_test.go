package daemon

// confine makes opts a server confined to the host folder root, whose
// work dir is its /work.
func confine(opts *Options, root string) {
	opts.Root = root
	opts.WorkDir = "/work"
}

// srvRoot is the host folder of the server's root.
func (e *testEnv) srvRoot() string { return e.srv.root.dir }
