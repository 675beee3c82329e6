// Package dashboard holds the files of agentbox serve's web dashboard:
// plain HTML, CSS and JavaScript modules of this repository, embedded in
// the binary and working offline (no CDN, no third-party front-end code).
// Package server serves them at /dashboard/ with its session, CSRF and
// Content-Security-Policy (daytona/server/dashboard.go).
package dashboard

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// Files returns the dashboard's files, by their names under /dashboard/
// (index.html, app.js, …).
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded folder is there: the build checks it
	}
	return sub
}
