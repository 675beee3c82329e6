package daytona

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbox-dev/agentbox/internal/redact"
)

// An error answer that is not JSON and too long for a message is cut on a
// rune boundary: the message stays valid UTF-8 (it was cut mid-rune).
func TestAPIErrorCutsTextOnRuneBoundary(t *testing.T) {
	body := "x" + strings.Repeat("é", 400) // 801 bytes; byte 512 is inside an "é"
	e := parseAPIError("GET", "/sandbox/x", &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{}}, []byte(body))
	kept, _, cut := strings.Cut(e.Message, "…")
	if !cut || !utf8.ValidString(e.Message) || len(kept) > maxErrorMessage || !strings.HasPrefix(body, kept) {
		t.Fatalf("Message = %q: want a valid UTF-8 prefix of at most %d bytes, marked as cut", e.Message, maxErrorMessage)
	}
	if len(kept) != maxErrorMessage-1 {
		t.Errorf("kept %d bytes, want %d (the last whole rune before byte %d)", len(kept), maxErrorMessage-1, maxErrorMessage)
	}
}

// An API URL refused shows no user information, the user name included
// (a token is often given as one), with redact's marker in its place.
func TestConfigErrorRedactsURLUser(t *testing.T) {
	for _, u := range []string{"https://tok-user@example.com/api?x=1", "https://tok-user:pw@example.com/api?x=1", "https://tok-user@exa mple.com/api"} {
		c := Config{APIKey: "k", APIURL: u}
		err := c.check()
		if err == nil || strings.Contains(err.Error(), "tok-user") || strings.Contains(err.Error(), "pw@") || !strings.Contains(err.Error(), redact.Marker) {
			t.Errorf("check(APIURL %q) = %v, want an error showing %s for the user information", u, err, redact.Marker)
		}
	}
}
