package local

import "github.com/agentbox-dev/agentbox/local/internal/netfilter"

// RedirectInstalled reports whether the network namespace of the running
// sandbox s has the secrets' redirect table.
func RedirectInstalled(s *Sandbox) (bool, error) {
	m, err := readMeta(s.dir)
	if err != nil {
		return false, err
	}
	ns, err := openInitNetns(m.Init)
	if err != nil {
		return false, err
	}
	defer ns.Close()
	return netfilter.HasRedirect(ns)
}

// RedirectTable is the name of the secrets' redirect table.
const RedirectTable = netfilter.RedirectTableName
