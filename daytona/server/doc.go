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
//	POST /api/sandbox/{idOrName}/resize            cpu, memory (stopped sandboxes; see resize.go)
//	GET  /api/sandbox/{idOrName}/build-logs-url|build-logs  the build of a create from buildInfo
//	POST /api/snapshots, GET /api/snapshots, GET|DELETE /api/snapshots/{idOrName}
//	POST /api/snapshots/{idOrName}/activate|deactivate
//	GET  /api/snapshots/{idOrName}/build-logs-url|build-logs
//	POST /api/sandbox/{idOrName}/fork, GET …/forks   a copy, started or stopped as the source (fork.go)
//	POST /api/sandbox/{idOrName}/pause             memory kept; start or any toolbox request resumes (pause.go)
//	POST /api/sandbox/{idOrName}/autopause/{minutes}, POST /api/sandbox/{id}/last-activity
//	POST /api/sandbox/{idOrName}/snapshot          an organization's snapshot of its files (sandboxsnapshot.go)
//	POST /api/secret, GET /api/secret|secret/paginated, GET|PATCH|DELETE /api/secret/{idOrName}  secrets (secrets.go)
//	PUT|GET /api/sandbox/{idOrName}/secrets        the secrets a sandbox holds (secretsandbox.go)
//
// and it proxies the toolbox API of every started sandbox, WebSocket
// upgrades included, at {toolboxProxyUrl}/{sandboxId}/… (that is
// /toolbox/{sandboxId}/…) and at Daytona's older API-proxied form
// /api/toolbox/{sandboxId}/toolbox/….
//
// Requests whose host is a preview URL's, http://{port}-{sandboxId}.{domain}
// (with the sandbox's token in X-Daytona-Preview-Token unless it is public)
// or a signed one, http://{port}-{token}.{domain}, go to that port of the
// sandbox's interface, over connections made on demand from inside the
// sandbox's network namespace (local.Sandbox.DialPort: nothing is published on
// the host), kept 30 s when idle, at most 128 per sandbox (previewconn.go,
// preview.go); the domain is localhost when clients reach the server by IP
// address, since browsers resolve every name under localhost to loopback.
//
// It also serves the event stream the newest SDKs use by default to learn
// of state changes at once: Socket.IO v4 over a WebSocket at
// /api/socket.io/ (the API key in the CONNECT packet's auth {token}),
// sending sandbox.created, sandbox.state.updated and
// sandbox.desired-state.updated to the clients of the organization.
//
// # Images and snapshots
//
// Snapshots belong to organizations (tenancy.go): a create's snapshot is
// one of its organization's snapshots (POST /api/snapshots, kept in the
// local image store as agentbox-org:ORG:NAME), an image the operator
// published ([Options.PublishedImages]) or the default; never another
// image of the store, an id or a prefix of one. A snapshot's imageName and
// a Dockerfile's FROM and COPY --from name the organization's snapshots,
// published images or registry references, which a build pulls
// anonymously into the organization's own copy, from public addresses
// only unless [Options.AllowRegistries] allows the registry; host paths,
// oci: layouts, tarballs and ids are refused with 400 before anything is
// read (and again by the build's resolver, after build arguments). A
// create from buildInfo (what the SDKs send for an image) is built by the
// local image builder, as `agentbox image build` builds, one build per
// organization at a time (and [Options.MaxBuilds] in all), each for
// [Options.BuildTimeout] at most, through Daytona's states pending_build
// and building_snapshot; its log, of which the last MiB is kept, streams
// at the sandbox's build-logs URL (sandboxbuild.go). Build contexts
// (contextHashes: files the SDKs upload to object storage) are not
// supported.
//
// # Dashboard
//
// GET /dashboard/ serves the web dashboard (package dashboard, embedded):
// POST /dashboard/login (JSON {"key"}) starts a session, POST
// /dashboard/logout ends it, GET /dashboard/session answers it with its
// CSRF token, GET /dashboard/keys lists the organization's keys
// read-only. The session cookie (HttpOnly, SameSite=Strict, Secure over
// TLS) authenticates /api and the toolbox proxy as its key would, with
// the X-CSRF-Token header (?csrf= and this server's Origin on WebSocket
// upgrades); the proxies never pass the cookie or token to a sandbox.
// Every dashboard answer has a strict Content-Security-Policy
// (dashboard.go, dashboardauth.go). Two routes of agentbox's own, which
// no Daytona spec declares, feed its tabs: GET
// /api/sandbox/{idOrName}/metrics/history?minutes=N (the samples serve
// takes of each started sandbox's /system/metrics, every 10 s, the last
// hour kept; metrics.go) and GET /api/sandbox/{idOrName}/network (the
// policy and the engine's refusal counters and policy log; network.go).
//
// # Browsers
//
// A web page cannot drive the server (guard.go): without keys it answers
// loopback host names only (no DNS rebinding); state-changing requests
// pass [net/http.CrossOriginProtection] and carry JSON, multipart or no
// body; cross-origin WebSockets are refused.
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
// change while they run. The timers run while the server does, from bases
// (start, stop, last activity) that its records keep: they resume when it
// starts again.
//
// # Records
//
// The server's records — sandboxes (names, labels, env, user, intervals
// and their bases, states and their history), volumes and snapshots
// (with their build logs) — live in the state dir, in serve/records.db, a bbolt
// database (go.etcd.io/bbolt): one file, ACID transactions, pure Go, and
// an exclusive lock on the file while a server has it open, so that a
// second server on the same state dir fails at once with an error
// matching [ErrStoreInUse] instead of corrupting it. (SQLite would add a
// query language the records do not need, and cgo or a large
// translation.) Every change is committed before the call that made it
// answers — written in the order the changes were made, those of
// concurrent calls grouped in one transaction, while the server's lock
// is free for other calls (store.go) — so a restart or a kill -9 of the
// server loses nothing; the
// sandboxes keep running meanwhile (their inits do not depend on the
// server), and a new server resumes the lifecycle operations the last one
// left in flight (see persist.go). Signed preview URLs, which last
// seconds, are not kept.
//
// # Errors
//
// Errors have the shape of Daytona's NestJS API:
// {statusCode, error, message, path, timestamp}, error being the HTTP
// reason phrase. What the server does not support yet (build contexts,
// GPUs, …) is refused in one place (unsupported.go) with 501 Not
// Implemented and a message naming it.
//
// # Authentication
//
// With API keys — [Options.APIKeys], of [Options.OrganizationID], and
// those of the records ([CreateAPIKey], `agentbox serve keys create`) —
// every route but /api/config needs "Authorization: Bearer KEY" (its
// SHA-256 hash compared with every key's in constant time; only hashes
// are kept), or 401 in Daytona's error shape. Each key belongs to an
// organization, and sees only that organization's sandboxes and volumes:
// another organization's are a 404, in the API, the list, the toolbox
// proxy, previews, volumes and the event stream alike. Without any key,
// every request is accepted, as of Options.OrganizationID
// ([Server.AuthRequired] is false) — the caller (agentbox serve) then
// listens on loopback only. Organizations and the keys of the records
// live in serve/keys.json, apart from the other records, which a running
// server holds: keys created or removed while a server runs apply from
// its next request (keys.go). A server that had keys when it started
// refuses every request once they are all removed.
//
// # Warm pools
//
// GET|POST /api/warm-pools and PATCH|DELETE /api/warm-pools/{id} keep,
// per organization and snapshot, 1 to 10 spare sandboxes started ahead
// of time (warmpool.go): a create of that snapshot with the default user,
// no env, volumes or build, and the spares' sizes (or none asked) takes
// one and answers it started; the pool refills in the background. Spares
// are not listed and do not count as the organization's sandboxes, but
// the pools' sizes together count against its sandbox quota. Pools and
// their spares' ids are in the records: a new server takes back the
// spares that still run and refills to the recorded sizes.
//
// # Secrets
//
// Daytona's /secret API: an organization's secrets, values an agent may
// send to some hosts but never read (the local engine's Config.Secrets:
// the sandbox's environment holds a placeholder, swapped for the value by
// its egress proxy in requests to the secret's hosts only). POST /secret
// (201) takes {name, value, hosts, description}: the name Daytona's
// (letters, digits, '_' and '-', not starting with a digit or '-', at
// most 128 bytes), unique in the organization (409); the value not empty,
// at most 64 KiB, no NUL or line break; hosts names and *.name patterns,
// required — where Daytona leaves a secret without hosts unrestricted,
// serve answers 400 asking for them: a value goes to the hosts named only,
// and only over TLS (sandbox.Secret's AllowHTTP is never set). At most 500
// secrets per organization (403), descriptions of 1 KiB. GET
// /secret/paginated pages by cursor (limit 1-200, name partial match,
// sort name|createdAt|updatedAt, order asc|desc; total; nextCursor null
// at the end). PATCH /secret/{id} changes the value, hosts or
// description (absent fields kept); a changed value or hosts are handed
// at once to every started sandbox that holds the secret (placeholders
// kept), to stopped ones when they start. DELETE /secret/{id} is 409,
// naming the sandboxes, while any sandbox (not being deleted) holds it:
// detach it first. Another organization's secret is 404 everywhere.
//
// No answer, log line or error ever holds a value: the Secret answer
// has none, and its placeholder field is the marker
// "agentbox_secret_(per-sandbox)", as placeholders are random per sandbox
// and per secret here (the real one is the variable's value inside the
// sandbox). Values are kept in the records sealed (AES-256-GCM, the
// record's id as additional data) with the key in serve/secrets.key
// (mode 0600, beside records.db, never in it): a copy of records.db alone
// tells a value's length only. (Anyone with both files, root on the
// host, has the values: the server must be able to hand them to
// sandboxes after a restart.)
//
// A create's secrets ([{ENV: secretName}, …], Mastra's and the SDK's
// secrets map) name secrets of the organization (400 naming an unknown
// one, nothing created; ENV an environment variable name, given once, at
// most 100); the sandbox's record keeps the names, never the values, which
// are read from the secrets whenever they are handed to the engine: at
// create, after every start, resume and fork (a fork keeps its source's
// names, with placeholders of its own) and when a server starts (the
// started sandboxes holding any, again). PUT /sandbox/{id}/secrets
// replaces the set ([] detaches all), live on a started sandbox (new
// commands see the change; the engine checks and keeps that of a stopped
// one, a paused one gets it when resumed), and answers the Sandbox (whose answer has no
// secrets field: api.json's has none). GET /sandbox/{id}/secrets, which
// Daytona answers its runners with values, answers {env, placeholder,
// hosts} entries without them. A warm pool's spare holds no secrets: a
// create with secrets never takes one.
//
// # Limits of this version
//
// A snapshot build that a server's end cuts short ends build_failed (a
// new server does not build it again), as a sandbox's build does; the
// build logs of sandboxes created from buildInfo are not kept across
// restarts (those of snapshots are).
package server
