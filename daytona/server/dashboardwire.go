package server

import (
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// The JSON bodies of the dashboard's own routes (dashboard*.go) and of
// the routes of agentbox's own API the pages read besides Daytona's (under
// /api like the rest, with the same API keys or the dashboard's session):
//
//	GET /api/sandbox/{idOrName}/metrics/history?minutes=N   metricsHistory (metrics.go)
//	GET /api/sandbox/{idOrName}/network                    networkView (network.go)
//
// The pages also read one route not served yet (they say so where its
// data would be): GET /api/sandbox/{idOrName}/activity (the activity
// trail).
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
