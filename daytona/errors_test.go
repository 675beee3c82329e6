package daytona

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
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
