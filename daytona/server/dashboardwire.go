package server

import (
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The JSON bodies of the routes the dashboard (/dashboard/) reads besides
// Daytona's: a sandbox's activity trail, its sampled metrics and its
// network view. They are agentbox's own API, under /api like the rest, and
// take the same API keys (or the dashboard's session cookie).
//
//	GET /api/sandbox/{idOrName}/activity?page=N&limit=N&kind=K   activityPage, newest first
//	GET /api/sandbox/{idOrName}/metrics/history?minutes=N         metricsHistory (N ≤ 60)
//	GET /api/sandbox/{idOrName}/network                          networkView
//
// The dashboard's own routes (dashboard*.go):
//
//	GET  /dashboard/...          the embedded pages (package dashboard)
//	POST /dashboard/login        form field "key": sets the session cookie
//	POST /dashboard/logout       ends the session
//	GET  /dashboard/session      dashboardSession (401 without a session)

// activityKind names what an activityEntry records.
const (
	activityCommand   = "command"   // a command run through the toolbox API
	activityFile      = "file"      // a file written (uploaded) through the toolbox API
	activityNetwork   = "network"   // a connection the sandbox's policy refused
	activityLifecycle = "lifecycle" // created, started, stopped, paused, forked, …
)

// activityEntry is one entry of a sandbox's activity trail.
type activityEntry struct {
	// ID orders the entries of a sandbox: later entries have greater ids.
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// Actor is who did it: the API key's name ("" for a server without
	// keys), or "sandbox" for what the sandbox itself did (refusals).
	Actor string `json:"actor"`
	// Command, ExitCode and DurationMs describe a command (ExitCode is
	// absent while it runs or when unknown).
	Command    string `json:"command,omitempty"`
	ExitCode   *int   `json:"exitCode,omitempty"`
	DurationMs int64  `json:"durationMs,omitempty"`
	// Path and Bytes describe a file written.
	Path  string `json:"path,omitempty"`
	Bytes int64  `json:"bytes,omitempty"`
	// Destination and Reason describe a refusal (host:port), or Reason a
	// lifecycle change ("started", "stopped", …).
	Destination string `json:"destination,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// activityPage is a page of a sandbox's activity trail, as Daytona's
// paginated lists are shaped.
type activityPage struct {
	Items      []activityEntry `json:"items"`
	Total      int             `json:"total"`
	Page       int             `json:"page"`
	TotalPages int             `json:"totalPages"`
}

// metricsSample is one sample of a sandbox's /system/metrics, taken by
// serve.
type metricsSample struct {
	Time       time.Time `json:"time"`
	CPUUsedPct float64   `json:"cpuUsedPct"`
	MemUsed    int64     `json:"memUsed"`
	MemTotal   int64     `json:"memTotal"`
	DiskUsed   int64     `json:"diskUsed"`
	DiskTotal  int64     `json:"diskTotal"`
}

// metricsHistory is the samples serve took of a sandbox, oldest first.
type metricsHistory struct {
	IntervalSeconds int             `json:"intervalSeconds"`
	Samples         []metricsSample `json:"samples"`
}

// networkView is a sandbox's network policy and what it refused.
type networkView struct {
	NetworkBlockAll  bool   `json:"networkBlockAll"`
	NetworkAllowList string `json:"networkAllowList,omitempty"`
	DomainAllowList  string `json:"domainAllowList,omitempty"`
	// Info is the engine's view (mode, counters, policy log); absent for a
	// sandbox that is not started.
	Info *sandbox.NetworkInfo `json:"info,omitempty"`
}

// dashboardSession is what GET /dashboard/session answers: the page sends
// CSRFToken as the X-CSRF-Token header of every API request it makes with
// the session cookie (and as ?csrf= on WebSocket upgrades).
type dashboardSession struct {
	OrganizationID string    `json:"organizationId"`
	KeyName        string    `json:"keyName,omitempty"`
	CSRFToken      string    `json:"csrfToken"`
	ExpiresAt      time.Time `json:"expiresAt"`
}
