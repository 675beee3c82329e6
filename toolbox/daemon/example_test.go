package daemon_test

import (
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/agentbox-dev/agentbox/toolbox/daemon"
)

// A Server is an http.Handler: serve it on any listener (a unix socket
// inside a sandbox) or call it directly.
func Example() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := daemon.New(daemon.Options{WorkDir: dir, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	req := httptest.NewRequest("POST", "/process/execute", strings.NewReader(`{"command":"echo hello; echo oops >&2; exit 3"}`))
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Get("X-Agentbox-Extensions"))
	fmt.Println(rec.Body.String())
	// Output:
	// 200 frames,stdin,base64,stateless,binary,tether,pty-command
	// {"exitCode":3,"result":"hello\noops\n"}
}
