package mount

import (
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/redact"
)

// An endpoint refused for its user information shows none of it, with
// redact's marker in its place, whether or not it parses as a URL.
func TestEndpointErrorRedactsURLUser(t *testing.T) {
	for _, e := range []string{"https://tok-user:pw@s3.example.com", "https://tok-user@s3.example.com", "https://tok-user@s3 example.com"} {
		err := S3Filesystem{Bucket: "data", Endpoint: e}.Validate()
		if err == nil || strings.Contains(err.Error(), "tok-user") || strings.Contains(err.Error(), "pw@") || !strings.Contains(err.Error(), redact.Marker) {
			t.Errorf("Validate(Endpoint %q) = %v, want an error showing %s for the user information", e, err, redact.Marker)
		}
	}
}
