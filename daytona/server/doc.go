// Package server serves Daytona's control-plane API over local sandboxes
// (package local), so that any Daytona client — the official SDKs,
// Mastra's DaytonaSandbox, agentbox's own daytona engine — can run against
// sandboxes on this machine, offline. It is what `agentbox serve` runs.
//
// A [Server] is a [net/http.Handler]. Under /api it answers the routes of
// Daytona's api.json that manage sandboxes:
//
//	GET  /api/config                               (no key needed)
//	POST /api/sandbox                              create (returns at once, state "creating")
//	GET  /api/sandbox                              list: cursor paging, labels/id/name/state filters
//	GET  /api/sandbox/paginated                    list: page paging (deprecated by Daytona)
//	GET  /api/sandbox/{idOrName}                   get by id or name
//	DELETE /api/sandbox/{idOrName}                 delete (state "destroying", then 404)
//	POST /api/sandbox/{idOrName}/start|stop|archive  stop takes ?force=
//	PUT  /api/sandbox/{idOrName}/labels            replace the labels
//	POST /api/sandbox/{idOrName}/autostop|autoarchive|autodelete/{minutes}
//	POST /api/sandbox/{idOrName}/public/{bool}
//	POST /api/sandbox/{idOrName}/network-settings  applied live
//	GET  /api/sandbox/{id}/toolbox-proxy-url
//	GET  /api/sandbox/{idOrName}/ports/{port}/preview-url|signed-preview-url
//	POST /api/sandbox/{idOrName}/ports/{port}/signed-preview-url/{token}/expire
//	POST /api/volumes, GET /api/volumes, GET /api/volumes/{id}|by-name/{name}, DELETE /api/volumes/{id}
//
// and it proxies the toolbox API of every started sandbox, WebSocket
// upgrades included, at {toolboxProxyUrl}/{sandboxId}/… (that is
// /toolbox/{sandboxId}/…) and at Daytona's older API-proxied form
// /api/toolbox/{sandboxId}/toolbox/….
//
// Requests whose host is a preview URL's, http://{port}-{sandboxId}.{domain}
// (with the sandbox's token in X-Daytona-Preview-Token unless it is public)
// or a signed one, http://{port}-{token}.{domain}, go to that port of the
// sandbox, which the local engine publishes on the host's loopback (see
// preview.go); the domain is localhost when clients reach the server by IP
// address, since browsers resolve every name under localhost to loopback.
//
// It also serves the event stream the newest SDKs use by default to learn
// of state changes at once: Socket.IO v4 over a WebSocket at
// /api/socket.io/ (the API key in the CONNECT packet's auth {token}),
// sending sandbox.created, sandbox.state.updated and
// sandbox.desired-state.updated to the clients of the organization.
//
// # States
//
// Lifecycle calls answer at once with the sandbox in a transitional state
// (creating, starting, stopping, destroying) that pollers see until the
// local engine is done, as Daytona's do; a call on a sandbox whose change
// is in progress gets Daytona's 409 "Sandbox state change in progress",
// and one in the wrong state its 400. A sandbox that stops behind the
// server's back (its init died, `agentbox sandbox stop`) is seen stopped,
// and one removed behind its back is gone (404).
//
// The auto-stop and auto-delete intervals are the server's timers, in
// Daytona's meaning (minutes; auto-stop 0 never; auto-delete negative
// never, 0 at once when stopped): the sandboxes themselves are created
// without the local engine's own auto-stop, so that the intervals can
// change while they run. The timers run while the server does.
//
// # Errors
//
// Errors have the shape of Daytona's NestJS API:
// {statusCode, error, message, path, timestamp}, error being the HTTP
// reason phrase. What the server does not support yet (snapshots other
// than the default, images and buildInfo, GPUs, …) is refused in one place
// (unsupported.go) with 501 Not Implemented and a message naming it.
//
// # Authentication
//
// With API keys configured ([Options.APIKeys]) every route but /api/config
// needs "Authorization: Bearer KEY" (compared in constant time); without,
// every request is accepted — the caller (agentbox serve) then listens on
// loopback only.
//
// # Limits of this version
//
// The server's records (names, labels, intervals, states) live in memory:
// sandboxes keep running when the server stops, but a new server does not
// know them. Every sandbox belongs to one organization,
// [Options.OrganizationID].
package server
