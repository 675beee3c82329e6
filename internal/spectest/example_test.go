package spectest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/spectest"
)

// A test validates every exchange of a server it starts, on both sides.
// (Compiled, not run: it needs the test's own t.)
func ExampleValidator_Handler() {
	var t *testing.T // the test's *testing.T
	var daemon http.Handler

	v := spectest.Load(t)
	srv := httptest.NewServer(v.Handler(t, daemon)) // server side
	defer srv.Close()
	client := &http.Client{Transport: v.Transport(t, srv.Client().Transport)} // client side
	resp, err := client.Get(srv.URL + "/version")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
