package server

import (
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The JSON bodies of the dashboard's own routes (dashboard*.go) and of
// the routes of agentbox's own API the pages read besides Daytona's (under
// /api like the rest, with the same API keys or the dashboard's session):
//
//	GET /api/sandbox/{idOrName}/activity?page=N&limit=N&kind=K   activityPage, newest first (activitytrail.go)
//	GET /api/sandbox/{idOrName}/metrics/history?minutes=N       metricsHistory (metrics.go)
//	GET /api/sandbox/{idOrName}/network                        networkView (network.go)
//
//	GET  /dashboard/...          the embedded pages (package dashboard)
//	POST /dashboard/login        a JSON body {"key": …}: sets the session cookie
//	POST /dashboard/logout       ends the session
//	GET  /dashboard/session      dashboardSession (401 without a session)

// dashboardSession is what GET /dashboard/session answers: the page sends
// CSRFToken as the X-CSRF-Token header of every API request it makes with
// the session cookie (and as ?csrf= on WebSocket upgrades).
type dashboardSession struct {
	OrganizationID string    `json:"organizationId"`
	KeyName        string    `json:"keyName,omitempty"`
	CSRFToken      string    `json:"csrfToken"`
	ExpiresAt      time.Time `json:"expiresAt"`
}

// Kinds of activityEntry.
const (
	activityCommand   = "command"   // a command run through the toolbox API
	activityFile      = "file"      // a file written (uploaded) through the toolbox API
	activityNetwork   = "network"   // a connection the sandbox's network policy refused
	activityLifecycle = "lifecycle" // created, started, stopped, paused, forked, …
)

// activityEntry is one entry of a sandbox's activity trail
// (activitytrail.go).
type activityEntry struct {
	// ID orders the entries of a sandbox: later entries have greater ids.
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// Actor is who did it: the API key's name, or its organization for a
	// key without a name (and on a server without keys); "preview token"
	// for a toolbox call made with the sandbox's preview token; "sandbox"
	// for what the sandbox itself did (network refusals).
	Actor string `json:"actor"`
	// Command, ExitCode, DurationMs, SessionID and CommandID describe a
	// command: its text (shortened past maxTrailCommand bytes, credentials
	// redacted), its exit code (absent while it runs in the background or
	// when the toolbox did not answer one), how long serve took to proxy
	// it, and for a session command the session and command ids.
	Command    string `json:"command,omitempty"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	DurationMs int64  `json:"durationMs,omitempty"`
	SessionID  string `json:"sessionId,omitempty"`
	CommandID  string `json:"commandId,omitempty"`
	// Path and Bytes describe a file written.
	Path  string `json:"path,omitempty"`
	Bytes int64  `json:"bytes,omitempty"`
	// Destination is a refused connection's host:port.
	Destination string `json:"destination,omitempty"`
	// Action is a lifecycle call: create, start, stop, pause, fork,
	// archive, recover, resize, snapshot, secrets (replaced),
	// network-settings or delete.
	Action string `json:"action,omitempty"`
	// Reason says why a refusal was refused, why a call failed, or more
	// about a lifecycle change ("forked from …").
	Reason string `json:"reason,omitempty"`
}

// activityPage is a page of a sandbox's activity trail, shaped as
// Daytona's paginated lists are.
type activityPage struct {
	Items      []activityEntry `json:"items"`
	Total      int             `json:"total"`
	Page       int             `json:"page"`
	TotalPages int             `json:"totalPages"`
}

// metricsSample is one sample of a sandbox's /system/metrics, taken by
// serve. Byte counts are in bytes; CPUUsedPct is a percentage of the
// sandbox's CPU limit.
type metricsSample struct {
	Time       time.Time `json:"time"`
	CPUUsedPct float64   `json:"cpuUsedPct"`
	MemUsed    int64     `json:"memUsed"`
	MemTotal   int64     `json:"memTotal"`
	DiskUsed   int64     `json:"diskUsed"`
	DiskTotal  int64     `json:"diskTotal"`
}

// metricsHistory is the samples serve took of a sandbox, oldest first,
// one every IntervalSeconds while it was started.
type metricsHistory struct {
	IntervalSeconds float64         `json:"intervalSeconds"`
	Samples         []metricsSample `json:"samples"`
}

// networkView is a sandbox's network policy and what it refused.
type networkView struct {
	NetworkBlockAll  bool   `json:"networkBlockAll"`
	NetworkAllowList string `json:"networkAllowList,omitempty"`
	DomainAllowList  string `json:"domainAllowList,omitempty"`
	// Info is the engine's view (mode, counters, policy log); null for
	// a sandbox that is not started or paused.
	Info *sandbox.NetworkInfo `json:"info"`
}
