package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/toolbox"
)

// downloadSize is the size of the file the download tests fetch.
const downloadSize = 8 << 20

// TestProxyDownloadComplete: issue 27, item 7. An 8 MiB file downloaded
// through serve's toolbox proxy (served by net/http as agentbox serve
// does, with no test middleware in between) arrives whole every time:
// GET files/download and POST files/bulk-download, one after another and
// four at a time, every byte compared (by sha256 and length).
func TestProxyDownloadComplete(t *testing.T) {
	h, sb := downloadSandbox(t)
	raw := httptest.NewServer(h.s) // the real path: no validating middleware
	t.Cleanup(raw.Close)
	base := raw.URL + "/toolbox/" + sb.ID
	client := raw.Client()
	want := makeDownloadFile(t, base, client)
	get := func(bulk bool) error {
		return downloadWhole(client, base, bulk, want)
	}
	sequential, each := 20, 10
	if raceEnabled { // each copy is about 30 times slower
		sequential, each = 6, 2
	}
	for i := range sequential {
		if err := get(i%2 == 1); err != nil {
			t.Fatalf("download %d, one at a time: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*each)
	for g := range 4 {
		wg.Go(func() {
			for i := range each {
				if err := get((g+i)%2 == 1); err != nil {
					errs <- fmt.Errorf("client %d, download %d: %w", g, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// downloadSandbox returns a harness over the local engine with a started
// sandbox, deleted when the test ends.
func downloadSandbox(t *testing.T) (*harness, apiSandbox) {
	t.Helper()
	needRoot(t)
	dir := newLocalStateDir(t)
	h := newHarness(t, localEngine{stateDir: dir}, harnessOptions{})
	sb := h.create(map[string]any{"name": "dl"})
	h.waitState(sb.ID, stateStarted)
	t.Cleanup(func() {
		h.call("DELETE", "/sandbox/dl", nil, nil)
		h.waitState(sb.ID, "gone")
	})
	return h, sb
}

// makeDownloadFile writes downloadSize random bytes to /tmp/f of the
// sandbox whose toolbox is at base, and returns their sha256.
func makeDownloadFile(t *testing.T, base string, client *http.Client) string {
	t.Helper()
	c, err := toolbox.NewClient(toolbox.ClientOptions{BaseURL: base, Token: testKey, HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sum := exec(t, c, fmt.Sprintf("head -c %d /dev/urandom > /tmp/f && sha256sum /tmp/f", downloadSize))
	want, _, _ := strings.Cut(sum, " ")
	return want
}

// downloadWhole downloads /tmp/f of the sandbox whose toolbox is at base
// (by files/bulk-download when bulk, else files/download) and checks
// that it is downloadSize bytes with sha256 want.
func downloadWhole(client *http.Client, base string, bulk bool, want string) error {
	var req *http.Request
	if bulk {
		body, _ := json.Marshal(toolbox.FilesDownloadRequest{Paths: []string{"/tmp/f"}})
		req, _ = http.NewRequest("POST", base+"/files/bulk-download", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		req, _ = http.NewRequest("GET", base+"/files/download?path=/tmp/f", nil)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var got string
	var n int64
	if bulk {
		got, n, err = firstPart(resp)
	} else {
		got, n, err = wholeBody(resp)
	}
	if err != nil || n != downloadSize || got != want {
		return fmt.Errorf("bulk %v: %d bytes, sha256 %s, %v; want %d bytes, sha256 %s", bulk, n, got, err, downloadSize, want)
	}
	return nil
}

// wholeBody returns the sha256 and size of an answer's body.
func wholeBody(resp *http.Response) (string, int64, error) {
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return "", 0, &httpError{Status: resp.StatusCode, Message: string(b)}
	}
	hash := sha256.New()
	n, err := io.Copy(hash, resp.Body)
	return hex.EncodeToString(hash.Sum(nil)), n, err
}
