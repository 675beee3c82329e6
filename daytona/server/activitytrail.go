package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentbox-dev/agentbox/internal/redact"
	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// The activity trail of each sandbox (issue 30): the commands run and
// the files uploaded through the toolbox proxy (activityproxy.go), the
// lifecycle calls of the API (create, start, stop, pause, fork, archive,
// recover, resize, snapshot, delete), and the connections its network
// policy refused, read from the engine's policy log when the trail is
// read. GET /api/sandbox/{id}/activity pages through it, newest first.
//
// The trail lives in the records (store.go), in bucket activity: one
// bucket per sandbox id, keyed by a big-endian sequence number, each
// value a kind byte (activityCodes) then the entry's JSON; the last
// maxTrail entries are kept, the oldest dropped. It is deleted with the
// sandbox's record. Entries wait in memory for trailFlushDelay, then go
// to the store's writer together: a command's answer never waits for the
// trail's fsync, and a run of commands makes one commit every
// trailFlushDelay at most. A clean stop of serve (Close) commits what
// waits, so the trail is kept across restarts; a kill -9 loses the
// entries of the last trailFlushDelay (100 ms) and of the commit in
// flight.
//
// Commands are kept as sent, cut at maxTrailCommand bytes, with the user
// information of URLs in them (https://user:token@host) and the values
// of the sandbox's environment variables (of 8 bytes or more) replaced
// by REDACTED. Their environment (envs), input and output are never kept.

// maxTrail is how many entries the trail of a sandbox keeps.
const maxTrail = 10000

// maxTrailCommand is how many bytes of a command's text an entry keeps.
const maxTrailCommand = 2048

// maxTrailPath is how many bytes of a file's path an entry keeps.
const maxTrailPath = 4096

// Limits of GET /api/sandbox/{id}/activity.
const (
	defaultActivityLimit = 50
	maxActivityLimit     = 200
)

// Buckets of the trail: bucketActivity holds a bucket per sandbox;
// bucketActivityMeta maps a sandbox id to the time of the newest refusal
// of its policy log already in its trail.
var (
	bucketActivity     = []byte("activity")
	bucketActivityMeta = []byte("activityMeta")
)

// activityCodes are the bytes that start the stored entries of each kind,
// so that a kind filter needs no decoding.
var activityCodes = map[string]byte{
	activityCommand:   'c',
	activityFile:      'f',
	activityNetwork:   'n',
	activityLifecycle: 'l',
}

// seqKey is the key of entry seq.
func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// appendActivity queues the append of entries to the trail of sandbox id;
// failed, when not nil, is told the write's error. Entries of a sandbox
// whose record is gone by then are dropped.
func (st *store) appendActivity(id string, entries []activityEntry, failed func(error)) *storeWrite {
	return st.enqueue(func(tx *bolt.Tx) error { return appendActivityTx(tx, id, entries) }, failed)
}

// appendActivityTx appends entries to the trail of sandbox id in tx,
// keeping the last maxTrail.
func appendActivityTx(tx *bolt.Tx, id string, entries []activityEntry) error {
	if len(entries) == 0 || tx.Bucket(bucketSandboxes).Get([]byte(id)) == nil {
		return nil
	}
	b, err := tx.Bucket(bucketActivity).CreateBucketIfNotExists([]byte(id))
	if err != nil {
		return err
	}
	for _, e := range entries {
		code, ok := activityCodes[e.Kind]
		if !ok {
			return fmt.Errorf("activity entry of unknown kind %q", e.Kind)
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		e.ID = ""
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := b.Put(seqKey(seq), append([]byte{code}, data...)); err != nil {
			return err
		}
	}
	// The keys are consecutive: entries are only ever dropped oldest
	// first.
	first, _ := b.Cursor().First()
	last := b.Sequence()
	for seq := binary.BigEndian.Uint64(first); last-seq+1 > maxTrail; seq++ {
		if err := b.Delete(seqKey(seq)); err != nil {
			return err
		}
	}
	return nil
}

// appendRefusals queues the append of the refusals of a sandbox's policy
// log that are newer than those its trail has.
func (st *store) appendRefusals(id string, log []sandbox.NetworkRefusal) *storeWrite {
	return st.enqueue(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketActivityMeta)
		var seen time.Time
		if v := meta.Get([]byte(id)); v != nil {
			_ = seen.UnmarshalText(v) // unreadable: start again
		}
		var entries []activityEntry
		newest := seen
		for _, r := range log {
			if !r.Time.After(seen) {
				continue
			}
			newest = later(newest, r.Time)
			dest := r.Host
			if r.Port > 0 {
				dest = net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
			}
			reason := r.Reason
			if r.Protocol != "" {
				reason += " (" + r.Protocol + ")"
			}
			entries = append(entries, activityEntry{Time: r.Time, Kind: activityNetwork, Actor: "sandbox", Destination: dest, Reason: reason})
		}
		if len(entries) == 0 || tx.Bucket(bucketSandboxes).Get([]byte(id)) == nil {
			return nil
		}
		v, err := newest.MarshalText()
		if err != nil {
			return err
		}
		if err := meta.Put([]byte(id), v); err != nil {
			return err
		}
		return appendActivityTx(tx, id, entries)
	}, nil)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// removeActivityTx deletes the trail of sandbox id in tx.
func removeActivityTx(tx *bolt.Tx, id string) error {
	if err := tx.Bucket(bucketActivityMeta).Delete([]byte(id)); err != nil {
		return err
	}
	if a := tx.Bucket(bucketActivity); a.Bucket([]byte(id)) != nil {
		return a.DeleteBucket([]byte(id))
	}
	return nil
}

// dropOrphanTrails deletes, in tx, the trails of sandboxes that have no
// record (a server that ended between a sandbox's removal and a late
// entry's write cannot leave one: appendActivityTx checks; this is for
// records removed by older servers).
func dropOrphanTrails(tx *bolt.Tx) error {
	var orphans [][]byte
	sandboxes := tx.Bucket(bucketSandboxes)
	err := tx.Bucket(bucketActivity).ForEachBucket(func(k []byte) error {
		if sandboxes.Get(k) == nil {
			orphans = append(orphans, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range orphans {
		if err := removeActivityTx(tx, string(k)); err != nil {
			return err
		}
	}
	return nil
}

// activityPage returns page (1-based) of the trail of sandbox id, limit
// entries a page, newest first; kind, when not "", keeps that kind only.
func (st *store) activityPage(id, kind string, page, limit int) (activityPage, error) {
	out := activityPage{Items: []activityEntry{}, Page: page}
	err := st.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketActivity).Bucket([]byte(id))
		if b == nil {
			return nil
		}
		from := (page - 1) * limit // index, newest first, of the page's first entry
		var raw [][2][]byte
		if kind == "" {
			first, _ := b.Cursor().First()
			if first == nil {
				return nil
			}
			last := b.Sequence()
			out.Total = int(last - binary.BigEndian.Uint64(first) + 1)
			for i := from; i < from+limit && i < out.Total; i++ {
				k := seqKey(last - uint64(i))
				raw = append(raw, [2][]byte{k, b.Get(k)})
			}
		} else {
			code := activityCodes[kind]
			c := b.Cursor()
			for k, v := c.Last(); k != nil; k, v = c.Prev() {
				if len(v) == 0 || v[0] != code {
					continue
				}
				if out.Total >= from && out.Total < from+limit {
					raw = append(raw, [2][]byte{k, v})
				}
				out.Total++
			}
		}
		for _, kv := range raw {
			if len(kv[1]) == 0 {
				continue
			}
			var e activityEntry
			if err := json.Unmarshal(kv[1][1:], &e); err != nil {
				return fmt.Errorf("activity entry %x: %w", kv[0], err)
			}
			e.ID = strconv.FormatUint(binary.BigEndian.Uint64(kv[0]), 10)
			out.Items = append(out.Items, e)
		}
		return nil
	})
	if err != nil {
		return activityPage{}, fmt.Errorf("agentbox serve: reading the activity of sandbox %s: %w", id, err)
	}
	out.TotalPages = (out.Total + limit - 1) / limit
	return out, nil
}

// trail adds entries to the trail of sandbox id, without waiting: they
// are queued to the store's writer within trailFlushDelay, with the
// entries of that time; a failed write is logged.
func (s *Server) trail(id string, entries ...activityEntry) {
	s.store.bufferActivity(id, entries, func(err error) {
		s.logf("agentbox serve: recording the activity of sandbox %s: %v", id, err)
	})
}

// trailFlushDelay is how long the activity entries wait in memory before
// they are queued to the store's writer, all those of that time in one
// write: a steady run of commands makes an fsync of the records every
// trailFlushDelay at most, not one per command, whose flushes would slow
// the sandboxes' own writes to the same disk. A kill -9 loses the entries
// of that time (and those of the commit in flight); Close and a read of
// the trail queue them at once.
const trailFlushDelay = 100 * time.Millisecond

// trailBuffer holds activity entries not queued to the store yet.
type trailBuffer struct {
	mu      sync.Mutex
	pending []pendingEntries
	timer   *time.Timer // set while entries wait
	closed  bool        // the store is closing: entries are queued at once
	// immediate queues each entry at once, as closed does: the
	// benchmarks' baseline of the delay (activity_bench_test.go).
	immediate bool
}

// pendingEntries are entries of one sandbox's trail waiting in a
// trailBuffer.
type pendingEntries struct {
	id      string
	entries []activityEntry
	failed  func(error)
}

// bufferActivity adds entries to the trail of sandbox id within
// trailFlushDelay; failed, when not nil, is told the write's error.
func (st *store) bufferActivity(id string, entries []activityEntry, failed func(error)) {
	t := &st.trail
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.immediate {
		st.appendActivity(id, entries, failed)
		return
	}
	t.pending = append(t.pending, pendingEntries{id: id, entries: entries, failed: failed})
	if t.timer == nil {
		t.timer = time.AfterFunc(trailFlushDelay, func() { st.flushTrail() })
	}
}

// flushTrail queues the entries waiting, in one write, and returns it
// (nil when none wait).
func (st *store) flushTrail() *storeWrite {
	t := &st.trail
	t.mu.Lock()
	defer t.mu.Unlock() // held while queueing: close waits for it
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	batch := t.pending
	t.pending = nil
	if len(batch) == 0 {
		return nil
	}
	return st.enqueue(func(tx *bolt.Tx) error {
		for _, p := range batch {
			if err := appendActivityTx(tx, p.id, p.entries); err != nil {
				return err
			}
		}
		return nil
	}, func(err error) {
		for _, p := range batch {
			if p.failed != nil {
				p.failed(err)
			}
		}
	})
}

// closeTrail queues the entries waiting; later ones are queued at once.
func (st *store) closeTrail() {
	st.flushTrail()
	st.trail.mu.Lock()
	st.trail.closed = true
	st.trail.mu.Unlock()
}

// actorOf returns who made request r, as the trail names them: its API
// key's name, or its organization for a key without a name or a server
// without keys; "" when r carries no key of the server.
func (s *Server) actorOf(r *http.Request) string {
	if !s.AuthRequired() {
		return s.org
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, token, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return ""
		}
		if k, ok := s.keyOfHash(sha256.Sum256([]byte(token))); ok {
			return cmp.Or(k.name, k.org)
		}
		return ""
	}
	if sess, ok := s.dashboardSessionOf(r); ok {
		return cmp.Or(sess.keyName, sess.org)
	}
	return ""
}

// trailedRoutes are the API routes whose successful calls the trail
// records, with the action it names.
var trailedRoutes = map[string]string{
	"POST /api/sandbox":                       "create",
	"DELETE /api/sandbox/{id}":                "delete",
	"POST /api/sandbox/{id}/start":            "start",
	"POST /api/sandbox/{id}/stop":             "stop",
	"POST /api/sandbox/{id}/archive":          "archive",
	"POST /api/sandbox/{id}/recover":          "recover",
	"POST /api/sandbox/{id}/resize":           "resize",
	"POST /api/sandbox/{id}/fork":             "fork",
	"POST /api/sandbox/{id}/pause":            "pause",
	"POST /api/sandbox/{id}/snapshot":         "snapshot",
	"PUT /api/sandbox/{id}/secrets":           "secrets",
	"POST /api/sandbox/{id}/network-settings": "network-settings",
}

// trailed returns h, the handler of pattern, recording a lifecycle entry
// for each of its successful calls when pattern is one of trailedRoutes.
// The caller (handle) has authenticated the request.
func (s *Server) trailed(pattern string, h handlerFunc) handlerFunc {
	action, ok := trailedRoutes[pattern]
	if !ok {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		var id string
		if ref := r.PathValue("id"); ref != "" {
			s.mu.Lock()
			if rec, err := s.lookup(orgOf(r), ref); err == nil {
				id = rec.id
			}
			s.mu.Unlock()
		}
		cw := &callWriter{ResponseWriter: w}
		if action == "create" || action == "fork" {
			// The new sandbox's id and name, from the answer.
			cw.fields = newJSONFields(map[string]int{"id": 64, "name": 256})
		}
		start := s.now()
		err := h(cw, r)
		if err != nil || cw.status >= http.StatusMultipleChoices {
			return err
		}
		e := activityEntry{Time: start, Kind: activityLifecycle, Actor: s.actorOf(r), Action: action}
		var newID, newName string
		if cw.fields != nil {
			newID, _, _ = cw.fields.text("id")
			newName, _, _ = cw.fields.text("name")
		}
		switch action {
		case "create":
			if newID != "" {
				s.trail(newID, e)
			}
		case "fork":
			if id != "" {
				f := e
				f.Reason = "forked to " + cmp.Or(newName, newID)
				s.trail(id, f)
			}
			if newID != "" {
				e.Action, e.Reason = "create", "forked from "+r.PathValue("id")
				s.trail(newID, e)
			}
		default:
			if id != "" {
				s.trail(id, e)
			}
		}
		return nil
	}
}

// callWriter is the ResponseWriter of a trailed call: it notes the
// answer's status and scans its body with fields (when not nil).
type callWriter struct {
	http.ResponseWriter
	status int
	fields *jsonFields
}

// WriteHeader notes the answer's status.
func (cw *callWriter) WriteHeader(code int) {
	if cw.status == 0 {
		cw.status = code
	}
	cw.ResponseWriter.WriteHeader(code)
}

// Write scans p (when asked to) and passes it on unchanged.
func (cw *callWriter) Write(p []byte) (int, error) {
	if cw.status == 0 {
		cw.status = http.StatusOK
	}
	if cw.fields != nil {
		_, _ = cw.fields.Write(p)
	}
	return cw.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (cw *callWriter) Flush() { _ = http.NewResponseController(cw.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the underlying writer.
func (cw *callWriter) Unwrap() http.ResponseWriter { return cw.ResponseWriter }

// getActivity answers GET /api/sandbox/{id}/activity: a page of the
// sandbox's trail, newest first. Query: page (from 1), limit (1 to
// maxActivityLimit, default defaultActivityLimit), kind (command, file,
// network or lifecycle; default all). The policy log of a started
// sandbox is sampled first, so that its latest refusals are in.
func (s *Server) getActivity(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	page, err := queryInt(q.Get("page"), "page", 1, 1, 1<<30)
	if err != nil {
		return err
	}
	limit, err := queryInt(q.Get("limit"), "limit", defaultActivityLimit, 1, maxActivityLimit)
	if err != nil {
		return err
	}
	kind := q.Get("kind")
	if _, ok := activityCodes[kind]; kind != "" && !ok {
		return errorf(http.StatusBadRequest, "kind must be one of command, file, network or lifecycle (or absent for all), got %q", kind)
	}
	s.mu.Lock()
	rec, err := s.lookup(orgOf(r), r.PathValue("id"))
	var id, state string
	if err == nil {
		id, state = rec.id, rec.state
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := s.store.flushTrail().wait(); err != nil {
		s.logf("agentbox serve: recording the activity: %v", err)
	}
	if state == stateStarted && (kind == "" || kind == activityNetwork) {
		s.samplePolicyLog(r.Context(), id)
	}
	out, err := s.store.activityPage(id, kind, page, limit)
	if err != nil {
		return err
	}
	if state == stateStarted {
		s.completeBackground(r.Context(), id, &out)
	}
	writeJSON(w, out)
	return nil
}

// reasonBackground is the reason of a command started in the background
// whose exit code the trail does not have yet.
const reasonBackground = "started in the background"

// completeBackground asks the toolbox of sandbox id for the exit codes
// of the commands of page started in the background, which the proxy
// could not see, and writes those it learns into page and the trail.
// A command whose session is gone is marked so, and not asked again.
func (s *Server) completeBackground(ctx context.Context, id string, page *activityPage) {
	var running []int
	for i, e := range page.Items {
		if e.Kind == activityCommand && e.ExitCode == nil && e.Reason == reasonBackground && e.SessionID != "" && e.CommandID != "" {
			running = append(running, i)
		}
	}
	if len(running) == 0 {
		return
	}
	tr := &http.Transport{DialContext: s.proxy.transport.DialContext}
	defer tr.CloseIdleConnections()
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: "http://" + id + "." + sandboxHost, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		s.logf("agentbox serve: reading exit codes of sandbox %s: %v", id, err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, policyLogTimeout)
	defer cancel()
	fixes := map[uint64]activityEntry{}
	for _, i := range running {
		e := &page.Items[i]
		cmd, err := c.GetCommand(ctx, e.SessionID, e.CommandID)
		var apiErr *toolbox.APIError
		switch {
		case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound:
			e.Reason = "its session ended before serve read its exit code"
		case err != nil || cmd.ExitCode == nil:
			continue // still running, or the toolbox did not answer
		default:
			code := *cmd.ExitCode
			e.ExitCode, e.Reason = &code, ""
		}
		if seq, err := strconv.ParseUint(e.ID, 10, 64); err == nil {
			fix := *e
			fix.ID = ""
			fixes[seq] = fix
		}
	}
	if len(fixes) > 0 {
		s.store.replaceActivity(id, fixes, func(err error) {
			s.logf("agentbox serve: recording exit codes of sandbox %s: %v", id, err)
		})
	}
}

// replaceActivity queues the replacement of the entries of the trail of
// sandbox id keyed by their sequence numbers in fixes (those still there).
func (st *store) replaceActivity(id string, fixes map[uint64]activityEntry, failed func(error)) *storeWrite {
	return st.enqueue(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketActivity).Bucket([]byte(id))
		if b == nil {
			return nil
		}
		for seq, e := range fixes {
			k := seqKey(seq)
			if b.Get(k) == nil {
				continue // dropped meanwhile
			}
			data, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if err := b.Put(k, append([]byte{activityCodes[e.Kind]}, data...)); err != nil {
				return err
			}
		}
		return nil
	}, failed)
}

// queryInt parses query value v named name, an integer from lo to hi;
// def when v is "".
func queryInt(v, name string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, errorf(http.StatusBadRequest, "%s must be a whole number from %d to %d, got %q", name, lo, hi, v)
	}
	return n, nil
}

// policyLogEngine is an engine that tells a sandbox's policy log (the
// local engine does).
type policyLogEngine interface {
	// policyLog returns the last refusals of the network policy of the
	// running sandbox id, oldest first.
	policyLog(ctx context.Context, id string) ([]sandbox.NetworkRefusal, error)
}

// policyLog implements policyLogEngine.
func (e localEngine) policyLog(ctx context.Context, id string) ([]sandbox.NetworkRefusal, error) {
	sb, err := local.Open(ctx, e.stateDir, id)
	if err != nil {
		return nil, err
	}
	info, err := sb.Info(ctx)
	if err != nil || info.Network == nil {
		return nil, err
	}
	return info.Network.PolicyLog, nil
}

// policyLogTimeout bounds the engine's answer when the trail samples a
// policy log.
const policyLogTimeout = 2 * time.Second

// samplePolicyLog adds to the trail of sandbox id the refusals of its
// policy log it does not have yet, when the engine tells them. A failure
// is logged: the trail is then read without them.
func (s *Server) samplePolicyLog(ctx context.Context, id string) {
	eng := s.eng
	if a, ok := eng.(secretApplier); ok {
		eng = a.engine
	}
	pl, ok := eng.(policyLogEngine)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, policyLogTimeout)
	defer cancel()
	log, err := pl.policyLog(ctx, id)
	if err == nil && len(log) > 0 {
		err = s.store.appendRefusals(id, log).wait()
	}
	if err != nil && ctx.Err() == nil {
		s.logf("agentbox serve: sampling the policy log of sandbox %s: %v", id, err)
	}
}

// redactCommand returns command cut at maxTrailCommand bytes with URL
// credentials and the values of env (those of 8 bytes or more) replaced
// by redact.Marker.
func redactCommand(command string, cut bool, env map[string]string) string {
	var secrets []string
	for _, v := range env {
		if len(v) >= 8 {
			secrets = append(secrets, v)
		}
	}
	command = redact.Text(command, secrets...)
	if len(command) > maxTrailCommand {
		command, cut = command[:maxTrailCommand], true
	}
	if cut {
		command = strings.ToValidUTF8(command, "") + "…"
	}
	return command
}
