package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// cutHandler answers /length with a Content-Length of 1 MiB and
// /chunked with a chunked answer, sends 64 KiB of either, then drops the
// connection: an upstream cut mid-body.
func cutHandler(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/length" {
			w.Header().Set("Content-Length", "1048576")
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(strings.Repeat("x", 64<<10)))
		http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	})
}

// cutToolboxEngine is a fakeEngine whose sandboxes' toolbox is addr.
type cutToolboxEngine struct {
	*fakeEngine
	addr string
}

func (e cutToolboxEngine) dial(ctx context.Context, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", e.addr)
}

// readCut GETs u (with header) and returns the bytes read and the error
// that ended the body (nil: a clean end).
func readCut(t *testing.T, u string, header http.Header) (int, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	return int(n), err
}

// TestProxyUpstreamCutIsClientError: an answer the sandbox cuts in the
// middle reaches the client of serve's toolbox proxy as an error, with a
// Content-Length (short) and chunked (no last chunk): never as a clean
// end of a partial body.
func TestProxyUpstreamCutIsClientError(t *testing.T) {
	up := httptest.NewServer(cutHandler(t))
	t.Cleanup(up.Close)
	eng := cutToolboxEngine{fakeEngine: newFakeEngine(t), addr: up.Listener.Addr().String()}
	h := newHarness(t, eng, harnessOptions{})
	sb := h.create(map[string]any{"name": "cut"})
	h.waitState(sb.ID, stateStarted)
	raw := httptest.NewServer(h.s)
	t.Cleanup(raw.Close)
	for _, path := range []string{"/length", "/chunked"} {
		n, err := readCut(t, raw.URL+"/toolbox/"+sb.ID+path, http.Header{"Authorization": {"Bearer " + testKey}})
		if err == nil {
			t.Errorf("toolbox %s cut after 64 KiB: %d bytes and a clean end, want an error", path, n)
		}
	}
}

// TestPreviewUpstreamCutIsClientError: the same through a preview, of
// either form.
func TestPreviewUpstreamCutIsClientError(t *testing.T) {
	eng := newFakeEngine(t)
	eng.serveOn(8080, cutHandler(t))
	h := newHarness(t, eng, harnessOptions{listenerPreviews: true})
	sb := h.create(map[string]any{"name": "cut"})
	h.waitState(sb.ID, stateStarted)
	var link portPreviewURL
	h.call("GET", "/sandbox/cut/ports/8080/preview-url", nil, &link)
	for _, path := range []string{"/length", "/chunked"} {
		n, err := readCut(t, link.URL+path, http.Header{previewTokenHeader: {link.Token}})
		if err == nil {
			t.Errorf("preview %s cut after 64 KiB: %d bytes and a clean end, want an error", path, n)
		}
	}
}
