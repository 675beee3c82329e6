package server

import "sync"

// Events the server publishes to the Socket.IO event stream, named and
// shaped as Daytona's (reference/daytona-api.md §2.6).
const (
	eventCreated        = "sandbox.created"               // the Sandbox
	eventStateUpdated   = "sandbox.state.updated"         // {sandbox, oldState, newState}
	eventDesiredUpdated = "sandbox.desired-state.updated" // {sandbox, oldDesiredState, newDesiredState}

	eventSnapshotCreated = "snapshot.created"       // the Snapshot
	eventSnapshotState   = "snapshot.state.updated" // {snapshot, oldState, newState}
	eventSnapshotRemoved = "snapshot.removed"       // the snapshot's id
)

// An event is one message of the event stream, for the subscribers of an
// organization (every subscriber when org is empty: snapshots are every
// organization's). Its sandbox's toolboxProxyUrl is left empty: each
// subscriber fills in the URL its client reaches the server at.
type event struct {
	org  string
	name string
	dto  sandboxDTO
	// data is the payload of a snapshot's event, sent as it is.
	data any
	// old and new are the states (or desired states) of an update.
	old, new string
}

// payload returns the event's data as the stream sends it, with proxyURL
// as the sandbox's toolbox proxy URL.
func (e *event) payload(proxyURL string) any {
	if e.data != nil {
		return e.data
	}
	dto := e.dto
	dto.ToolboxProxyURL = proxyURL
	switch e.name {
	case eventStateUpdated:
		return struct {
			Sandbox  sandboxDTO `json:"sandbox"`
			OldState string     `json:"oldState"`
			NewState string     `json:"newState"`
		}{dto, e.old, e.new}
	case eventDesiredUpdated:
		return struct {
			Sandbox         sandboxDTO `json:"sandbox"`
			OldDesiredState string     `json:"oldDesiredState"`
			NewDesiredState string     `json:"newDesiredState"`
		}{dto, e.old, e.new}
	}
	return dto
}

// hub fans events out to the subscribers of the event stream. A
// subscriber that falls behind by more than its buffer is dropped (its
// channel closed): its client reconnects, and polls meanwhile.
type hub struct {
	mu   sync.Mutex
	subs map[chan *event]string // → organization
}

// subscribeBuffer is how many events a subscriber may fall behind by.
const subscribeBuffer = 256

// subscribe returns a channel of the events of organization org, and the
// function that ends the subscription.
func (h *hub) subscribe(org string) (<-chan *event, func()) {
	ch := make(chan *event, subscribeBuffer)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[chan *event]string{}
	}
	h.subs[ch] = org
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// publish sends e to its organization's subscribers without blocking.
func (h *hub) publish(e *event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch, org := range h.subs {
		if e.org != "" && org != e.org {
			continue
		}
		select {
		case ch <- e:
		default: // too slow: dropped
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// set moves rec to state and, unless desired is empty, desired state,
// and publishes the changes. Called with s.mu held.
func (s *Server) set(rec *record, state, desired string) {
	oldState, oldDesired := rec.state, rec.desired
	rec.state = state
	if desired != "" {
		rec.desired = desired
	}
	rec.touch(s.now())
	if state != oldState || rec.desired != oldDesired {
		rec.history = append(rec.history, historyEntry{State: state, DesiredState: rec.desired, ErrorReason: rec.errorReason, At: rec.updatedAt})
	}
	if oldState == "" {
		return // a new sandbox: createSandbox records and publishes it
	}
	defer s.persist(rec)
	if rec.desired != oldDesired {
		s.events.publish(&event{org: rec.org, name: eventDesiredUpdated, dto: rec.dto(""), old: oldDesired, new: rec.desired})
	}
	if state != oldState {
		s.events.publish(&event{org: rec.org, name: eventStateUpdated, dto: rec.dto(""), old: oldState, new: state})
	}
}

// snapshotStateEvent is the payload of snapshot.state.updated.
type snapshotStateEvent struct {
	Snapshot snapshotDTO `json:"snapshot"`
	OldState string      `json:"oldState"`
	NewState string      `json:"newState"`
}

// publishSnapshotState publishes the change of rec's state from old, when
// it changed. Called with s.snapshots.mu held.
func (s *Server) publishSnapshotState(rec *snapshotRecord, old string) {
	if rec.state == old {
		return
	}
	dto := rec.view().dto(rec.org)
	s.events.publish(&event{org: rec.org, name: eventSnapshotState, data: snapshotStateEvent{dto, old, rec.state}})
}
