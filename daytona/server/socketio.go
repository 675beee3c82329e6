package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// The event stream the newest SDKs use by default: Socket.IO v4 (protocol
// 5, over Engine.IO 4) at /api/socket.io/, over a WebSocket only (the
// SDKs ask for no other transport). The client sends the API key in its
// CONNECT packet ({"token": …}); the server then sends it the events of
// its organization (events.go) as EVENT packets, and pings it.

// Engine.IO's heartbeat, as the open packet announces it.
const (
	defaultPingInterval = 25 * time.Second
	// defaultConnectWithin is how long an event stream may stay
	// unauthenticated (no CONNECT with a valid key).
	defaultConnectWithin = 10 * time.Second
	pingTimeout          = 20 * time.Second
)

// serveEvents serves one client of the event stream.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if q.Get("EIO") != "4" || q.Get("transport") != "websocket" {
		return errorf(http.StatusBadRequest, "the event stream is Socket.IO v4 over a WebSocket only: connect with EIO=4&transport=websocket")
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return &httpError{Status: http.StatusServiceUnavailable, Message: errClosed.Error(), Err: errClosed}
	}
	s.wg.Add(1) // Close waits for the stream to end
	s.mu.Unlock()
	defer s.wg.Done()
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept has answered
	}
	defer conn.CloseNow()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.timers, cancel) // Close ends the stream
	defer stop()

	send := func(msg string) error { return conn.Write(ctx, websocket.MessageText, []byte(msg)) }
	open, _ := json.Marshal(map[string]any{
		"sid": newID(), "upgrades": []string{}, "maxPayload": 1 << 20,
		"pingInterval": s.pingInterval.Milliseconds(), "pingTimeout": pingTimeout.Milliseconds(),
	})
	if err := send("0" + string(open)); err != nil {
		return nil
	}
	msgs := make(chan string)
	go func() {
		defer close(msgs)
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if typ != websocket.MessageText {
				continue
			}
			select {
			case msgs <- string(data):
			case <-ctx.Done():
				return
			}
		}
	}()
	var events <-chan *event
	unsubscribe := func() {}
	defer func() { unsubscribe() }()
	ping := time.NewTicker(s.pingInterval)
	defer ping.Stop()
	// An unauthenticated stream (answering pings, never connecting)
	// does not hold the server's resources for good.
	connectBy := time.NewTimer(s.connectWithin)
	defer connectBy.Stop()
	awaitingPong := false
	proxyURL := s.toolboxProxyURL(r)
	for {
		select {
		case <-ctx.Done():
			conn.Close(websocket.StatusGoingAway, "agentbox serve is shutting down")
			return nil
		case <-connectBy.C:
			if events == nil {
				conn.Close(websocket.StatusPolicyViolation, "no CONNECT with a valid API key in time: send it at once")
				return nil
			}
		case m, ok := <-msgs:
			switch {
			case !ok, m == "1", strings.HasPrefix(m, "41"): // gone, CLOSE, DISCONNECT
				return nil
			case m == "3": // PONG
				awaitingPong = false
			case strings.HasPrefix(m, "40"): // CONNECT
				if events != nil {
					continue
				}
				reply, org, ok := s.connectPacket(m[2:])
				if ok {
					events, unsubscribe = s.events.subscribe(org)
				}
				if err := send(reply); err != nil {
					return nil
				}
			}
		case e, ok := <-events:
			if !ok {
				conn.Close(websocket.StatusPolicyViolation, "too slow: events dropped; reconnect")
				return nil
			}
			data, err := json.Marshal([]any{e.name, e.payload(proxyURL)})
			if err != nil {
				return fmt.Errorf("encoding event %s: %w", e.name, err)
			}
			if err := send("42" + string(data)); err != nil {
				return nil
			}
		case <-ping.C:
			if awaitingPong {
				conn.Close(websocket.StatusPolicyViolation, "no pong within the ping timeout")
				return nil
			}
			awaitingPong = true
			if err := send("2"); err != nil {
				return nil
			}
		}
	}
}

// connectPacket answers the payload of a CONNECT packet (after "40"): a
// CONNECT with a session id when its token is a key of the server, else
// a CONNECT_ERROR; ok says which, and org is the key's organization.
func (s *Server) connectPacket(payload string) (reply, org string, ok bool) {
	if strings.HasPrefix(payload, "/") {
		return `44{"message":"only the main namespace / exists"}`, "", false
	}
	var auth struct {
		Token string `json:"token"`
	}
	if payload != "" && json.Unmarshal([]byte(payload), &auth) != nil {
		return `44{"message":"the CONNECT payload is not JSON"}`, "", false
	}
	org, ok = s.tokenOrg(auth.Token)
	if !ok {
		return `44{"message":"Unauthorized: send a valid API key as auth {token}"}`, "", false
	}
	return `40{"sid":"` + newID() + `"}`, org, true
}
