package server

import "time"

// The JSON bodies of the dashboard's own routes (dashboard*.go). The
// pages also read three routes not served yet (they say so where their
// data would be): GET /api/sandbox/{idOrName}/activity (the activity
// trail), …/metrics/history (samples of /system/metrics) and …/network
// (policy and policy log).
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
