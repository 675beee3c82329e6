package local

// healsEgress reports whether the running sandbox shaped by c, whose
// folder is dir, may need the state dir's shared egress proxy, which is
// then started again if it died (healEgress): for its domain allow list,
// or for its secrets' redirect (the public and allowList modes with
// secrets, redirect_linux.go).
func healsEgress(dir string, c *Config) bool {
	if c.hasDomains() {
		return true
	}
	if !c.needsInterface() {
		return false
	}
	recs, _ := readSecretRecords(dir)
	return len(recs) > 0
}
