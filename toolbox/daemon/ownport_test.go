package daemon

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/spectest"
	"github.com/agentbox-dev/agentbox/toolbox"
)

// GET /port leaves out the port the toolbox itself is served on, as
// Daytona's daemon does, and lists the others: in both modes, checked
// against the spec.
func TestPortsHideOwnPort(t *testing.T) {
	for _, daytona := range []bool{false, true} {
		srv, err := New(Options{WorkDir: t.TempDir(), Daytona: daytona})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(spectest.Load(t).Handler(t, srv))
		other, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(hs.URL + "/port")
		if err != nil {
			t.Fatal(err)
		}
		var pl toolbox.PortList
		err = json.NewDecoder(resp.Body).Decode(&pl)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("daytona=%v: GET /port: %d, %v", daytona, resp.StatusCode, err)
		}
		own := hs.Listener.Addr().(*net.TCPAddr).Port
		if slices.Contains(pl.Ports, own) {
			t.Errorf("daytona=%v: ports %v list the toolbox's own port %d", daytona, pl.Ports, own)
		}
		if p := other.Addr().(*net.TCPAddr).Port; !slices.Contains(pl.Ports, p) {
			t.Errorf("daytona=%v: ports %v miss the listener on %d", daytona, pl.Ports, p)
		}
		other.Close()
		hs.Close()
		srv.Close()
	}
}
