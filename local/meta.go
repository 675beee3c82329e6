package local

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentbox-dev/agentbox/internal/atomicfile"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// meta is the persistent description of a sandbox (metaFile).
type meta struct {
	ID         string         `json:"id"`
	CreatedAt  time.Time      `json:"createdAt"`
	Status     sandbox.Status `json:"status"` // last status written by a host process
	StoppedAt  time.Time      `json:"stoppedAt,omitzero"`
	PausedAt   time.Time      `json:"pausedAt,omitzero"`   // while paused (pause.go)
	LastUsedAt time.Time      `json:"lastUsedAt,omitzero"` // as of the last stop; see lastUsed
	// Config is the sandbox's shape, as it was created.
	Config Config `json:"options"`
	// Init and Cgroups describe the running init; nil when stopped.
	Init    *initRecord `json:"init,omitempty"`
	Cgroups *cgroupSet  `json:"cgroups,omitempty"`
	// HostIDs are the host uids and gids the sandbox's ids map to: started
	// by root, a range of its own from the state dir's pool (hostids.go),
	// which it keeps until it is removed; otherwise the uid of the user
	// who last started it. nil before its first start (and in metadata of
	// versions that shared one range between all sandboxes: see
	// legacyOwned).
	HostIDs *idRange `json:"hostIds,omitempty"`
	// DiskIDs are the host ids the files of the sandbox's disk image are
	// stored with when they are not its HostIDs: a fork's, whose image is
	// a copy of its source's, and which mounts it ID-mapped to its own
	// (diskids_linux.go). nil for every other sandbox.
	DiskIDs *idRange `json:"diskIds,omitempty"`
	// EgressFDs are the running init's descriptors of the egress proxy's
	// listening sockets (with a DomainAllowList): the host takes them from
	// it for every new proxy (listenForEgress).
	EgressFDs []int `json:"egressFds,omitempty"`
	// Limits are the limits the sandbox got when it last started (kept
	// while it is stopped); nil before.
	Limits *limits `json:"limits,omitempty"`
	// ProxyEnv records that the running init was started with the egress
	// proxy's variables in its environment (it had a DomainAllowList).
	ProxyEnv bool `json:"proxyEnv,omitempty"`
	// Network is the host side of the running sandbox's network
	// namespace, when the host made it (as root); nil otherwise.
	Network *netRecord `json:"network,omitempty"`
	// UserNet is the host process of the running sandbox's user-mode
	// network (without root, usernet.go); nil otherwise.
	UserNet *usernetRecord `json:"userNet,omitempty"`
	// Ports are the published ports, kept across stops and put in place
	// at every start.
	Ports []sandbox.PublishedPort `json:"ports,omitempty"`
	// Root is the image (or snapshot) the sandbox's root is made of, as
	// resolved at its creation; nil for the default root (root.go).
	Root *rootRecord `json:"root,omitempty"`
	// RunAs is the user commands ran as when the sandbox last started
	// (its image's USER, resolved in its root); nil for its root.
	RunAs *runAs `json:"runAs,omitempty"`
	// Mounts are the sandbox's bucket mounts (mounts.go), kept across
	// stops and mounted again at every start.
	Mounts []mountRecord `json:"mounts,omitempty"`
}

// UnmarshalJSON reads metadata in the current format and in the one
// before Config: that format kept the name and labels at the top level
// ("name", "labels"), where they are read from when "options" lacks them,
// and the per-handle command timeout in "options" ("timeout"), which is
// ignored now. The network policy and the resources of the format
// before sandbox.NetworkPolicy and sandbox.Resources are read too
// (legacyNetwork, legacyResources). The next write stores the current
// format.
func (m *meta) UnmarshalJSON(b []byte) error {
	type current meta // without this method
	var v struct {
		current
		// Options shadows current.Config (at a shallower depth), so that
		// one pass reads the Config and the legacy network fields.
		Options struct {
			Config
			legacyNetwork
			// Resources shadows Config.Resources.
			Resources legacyResources `json:"resources"`
		} `json:"options"`
		LegacyName   string            `json:"name"`
		LegacyLabels map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*m = meta(v.current)
	m.Config = v.Options.Config
	m.Config.Resources = v.Options.Resources.resources()
	if m.Config.Network.IsZero() {
		var err error
		if m.Config.Network, err = v.Options.legacyNetwork.policy(); err != nil {
			return err
		}
	}
	if m.Config.Name == "" {
		m.Config.Name = v.LegacyName
	}
	if m.Config.Labels == nil {
		m.Config.Labels = v.LegacyLabels
	}
	return nil
}

// legacyNetwork is the network policy of a Config written before
// sandbox.NetworkPolicy: Daytona's wire form, and HostNetwork.
type legacyNetwork struct {
	HostNetwork      bool   `json:"hostNetwork"`
	NetworkBlockAll  bool   `json:"networkBlockAll"`
	NetworkAllowList string `json:"networkAllowList"`
	DomainAllowList  string `json:"domainAllowList"`
}

// policy returns the policy l records, in canonical form.
func (l legacyNetwork) policy() (sandbox.NetworkPolicy, error) {
	if l.HostNetwork {
		return sandbox.NetworkPolicy{Mode: sandbox.NetworkHost}, nil
	}
	p, err := sandbox.ParseNetworkPolicy(l.NetworkBlockAll, l.NetworkAllowList, l.DomainAllowList)
	if err != nil {
		return p, fmt.Errorf("the network policy of the metadata: %w", err)
	}
	return p, nil
}

// legacyResources reads a Config's resources in the current form and in
// the one before sandbox.Resources (cpu, memoryMB, diskMB: the same
// units).
type legacyResources struct {
	sandbox.Resources
	CPU      float64 `json:"cpu"`
	MemoryMB int64   `json:"memoryMB"`
	DiskMB   int64   `json:"diskMB"`
}

// resources returns the resources r records.
func (r legacyResources) resources() sandbox.Resources {
	out := r.Resources
	out.CPUCores = cmp.Or(out.CPUCores, r.CPU)
	out.MemoryMiB = cmp.Or(out.MemoryMiB, r.MemoryMB)
	out.DiskMiB = cmp.Or(out.DiskMiB, r.DiskMB)
	return out
}

// initRecord identifies a running init process.
type initRecord struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"` // /proc/<pid>/stat field 22
}

// exitRecord is written by the init when it ends by itself or on SIGTERM.
type exitRecord struct {
	StoppedAt time.Time `json:"stoppedAt"`
	Reason    string    `json:"reason"`
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeJSON writes v to path atomically.
func writeJSON(path string, v any) error { return atomicfile.WriteJSON(path, v) }

// readMeta reads the metadata of the sandbox folder dir.
func readMeta(dir string) (meta, error) {
	var m meta
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return m, err
	}
	// Called directly, not through json.Unmarshal(b, &m), which would
	// scan b twice more before calling it (checking it, then finding the
	// value's end).
	return m, m.UnmarshalJSON(b)
}

// writeMeta writes m as the metadata of the sandbox folder dir.
func writeMeta(dir string, m *meta) error {
	return writeJSON(filepath.Join(dir, metaFile), m)
}

// alive reports whether the init recorded in m runs.
func (m *meta) alive() bool {
	if m.Init == nil || m.Init.PID <= 0 {
		return false
	}
	st, ok := procStartTime(m.Init.PID)
	return ok && st == m.Init.StartTime
}

// liveInit returns the init record of the sandbox folder dir if its init
// runs.
func liveInit(dir string) (initRecord, bool) {
	m, err := readMeta(dir)
	if err != nil || !m.alive() {
		return initRecord{}, false
	}
	return *m.Init, true
}

func statusOf(m *meta) sandbox.Status {
	if m.alive() {
		if m.Status == sandbox.StatusPaused {
			return sandbox.StatusPaused
		}
		return sandbox.StatusRunning
	}
	return sandbox.StatusStopped
}

// lastUsed returns when the sandbox of the folder dir was last used: the
// later of the time recorded in m and the mtime of the init's activity
// stamp. The stamp is writable from inside the sandbox, so only its mtime
// is read, capped at now.
func lastUsed(dir string, m *meta) time.Time {
	t := m.LastUsedAt
	fi, err := os.Lstat(filepath.Join(dir, toolboxDir, activityFile))
	if err != nil || !fi.Mode().IsRegular() {
		return t
	}
	mt := fi.ModTime().UTC()
	if now := time.Now().UTC(); mt.After(now) {
		mt = now
	}
	if mt.After(t) {
		t = mt
	}
	return t
}

// infoFrom describes the sandbox of the folder dir whose metadata is m.
func infoFrom(dir string, m *meta) *sandbox.Info {
	c := &m.Config
	info := &sandbox.Info{
		ID:         m.ID,
		Name:       "LocalSandbox",
		Provider:   "local",
		Status:     statusOf(m),
		CreatedAt:  m.CreatedAt,
		LastUsedAt: lastUsed(dir, m),
		Metadata:   map[string]string{},
	}
	live := info.Status == sandbox.StatusRunning || info.Status == sandbox.StatusPaused
	if live && c.AutoStopInterval > 0 && !info.LastUsedAt.IsZero() {
		// The init stops itself this long after the last request (at its
		// next check, a quarter of the interval later at most); a host
		// process stops a paused one (pause.go).
		info.TimeoutAt = info.LastUsedAt.Add(c.AutoStopInterval)
	}
	for k, v := range c.Labels {
		info.Metadata[k] = v
	}
	info.Identity, info.Network = describe(c, m.RunAs, m.HostIDs)
	info.Identity.Capabilities = m.Root.capabilities(m.RunAs)
	if m.Root != nil && m.Root.Host {
		info.Metadata["rootfs"] = "writable overlay of the host's system folders"
	} else if m.Root != nil {
		ref, what := rootRef(c)
		info.Metadata[what] = ref
		info.Metadata["imageId"] = m.Root.Image
		info.Metadata["rootfs"] = "writable overlay of the image"
	}
	info.Limits = limitsOf(dir, m).info()
	addSecretsInfo(dir, c, info)
	info.Metadata["language"] = c.Language
	info.Metadata["ephemeral"] = strconv.FormatBool(c.Ephemeral)
	if c.Name != "" {
		info.Metadata["name"] = c.Name
	}
	c.Confinement.addInfo(info.Metadata, landlockABI())
	for _, v := range c.Volumes {
		info.Mounts = append(info.Mounts, sandbox.MountInfo{Path: v.MountPath, Filesystem: "volume:" + v.Name, Kind: "volume", ReadOnly: v.ReadOnly})
	}
	for i := range m.Mounts {
		info.Mounts = append(info.Mounts, m.Mounts[i].info(info.Status == sandbox.StatusRunning))
	}
	if live && m.Cgroups != nil {
		info.Usage = m.Cgroups.Resources()
		info.Usage.DiskMB, info.Usage.DiskUsedMB = diskUsage(m)
	}
	addNetworkState(dir, m, info.Network)
	return info
}

// expired reports whether a stopped sandbox should be deleted now.
func expired(dir string, m *meta) bool {
	if m.alive() {
		return false
	}
	if m.Config.Ephemeral {
		return true
	}
	if m.Config.AutoDeleteInterval <= 0 {
		return false
	}
	stopped := m.StoppedAt
	if x, ok := readExitRecord(dir); ok && x.StoppedAt.After(stopped) {
		stopped = x.StoppedAt
	}
	if stopped.IsZero() {
		// The init died without a record (e.g. the machine rebooted).
		if fi, err := os.Stat(filepath.Join(dir, metaFile)); err == nil {
			stopped = fi.ModTime()
		}
	}
	return time.Since(stopped) >= m.Config.AutoDeleteInterval
}

// readExitRecord reads the init's exit record. The folder holding it is
// writable from inside the sandbox, so only a small regular file is read.
func readExitRecord(dir string) (exitRecord, bool) {
	var x exitRecord
	fd, err := unix.Open(filepath.Join(dir, toolboxDir, exitFile), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return x, false
	}
	f := os.NewFile(uintptr(fd), exitFile)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return x, false
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil || json.Unmarshal(b, &x) != nil {
		return x, false
	}
	return x, true
}

// limitsOf returns the limits of the sandbox of the folder dir whose
// metadata is m: those it got when it last started, else those it would
// get now.
func limitsOf(dir string, m *meta) *limits {
	if m.Limits != nil {
		return m.Limits
	}
	l := plannedLimits(m.Config.Resources, dir)
	return &l
}

// describe states who commands of the sandbox shaped by c run as (u, its
// image's user, when not its root) and its network access; ids are the
// host ids its ids map to (when nil, those of the next start, if known
// before it). limitsOf states its limits.
func describe(c *Config, u *runAs, ids *idRange) (*sandbox.Identity, *sandbox.NetworkInfo) {
	id := &sandbox.Identity{User: c.User, UID: 0, GID: 0, Home: c.home(), Capabilities: "none"}
	if u != nil {
		id.User, id.UID, id.GID, id.Home = u.Name, u.UID, u.GID, u.Home
	}
	if ids == nil {
		ids = nextHostIDs()
	}
	if ids != nil {
		id.HostUID, id.HostUIDCount = ids.First, ids.Count
	}
	net := c.Network.Info()
	return id, net
}
