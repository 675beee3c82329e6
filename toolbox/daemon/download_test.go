package daemon

import (
	"io"
	"testing"
)

// TestDownloadReadFailureIsClientError: a file whose read fails once the
// answer has begun (/proc/self/mem, which fails at offset 0) ends the
// connection, so that the client sees an error rather than a clean, empty
// or partial, answer.
func TestDownloadReadFailureIsClientError(t *testing.T) {
	e := newEnv(t, false)
	resp, err := e.client.Get(baseURL + "/files/download?path=/proc/self/mem")
	if err != nil {
		return // the answer never came: the client sees an error
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("download of a file that fails to read: %d with %d bytes and no error, want a client-visible error", resp.StatusCode, len(body))
	}
}
