package sdktest

import (
	"testing"

	"github.com/agentbox-dev/agentbox/daytona/server"
)

// TestTypeScriptSDKPreview: issue 27, items 6 and 7, with each SDK
// release against agentbox serve's default preview URLs (a listener per
// previewed port): getPreviewLink then Node's fetch with the token
// header answers 200, without it 401, and a signed URL 200 with nothing
// else; then 200 downloads of an 8 MiB file through serve's toolbox proxy
// (downloadFile, downloadFileStream, downloadFiles; one and four at a
// time) are every one whole, by sha256.
func TestTypeScriptSDKPreview(t *testing.T) {
	p := findNode(t)
	base, offSpec := startServeOptions(t, server.Options{StateDir: t.TempDir(), APIKeys: []string{apiKey}}, nil)
	t.Run("sdk", func(t *testing.T) {
		for _, alias := range aliases {
			t.Run(p.versions[alias], func(t *testing.T) {
				t.Parallel()
				runProgram(t, p, "preview.mjs", base, alias, []wantStep{
					{"create", `"started"`},
					{"preview-token", `{"status":200,"body":"previewed\n","loopback":true}`},
					{"preview-no-token", `401`},
					{"preview-signed", `{"status":200,"body":"previewed\n"}`},
					{"make-file", `{"exitCode":0,"hex":true}`},
					{"download", `{"whole":50,"of":50,"firstError":null}`},
					{"download-stream", `{"whole":50,"of":50,"firstError":null}`},
					{"download-bulk", `{"whole":40,"of":40,"firstError":null}`},
					{"download-concurrent", `{"whole":60,"of":60,"firstError":null}`},
					{"delete", `"destroying"`},
				}, "AGENTBOX_SANDBOX_NAME=sdktest-preview-"+alias)
			})
		}
	})
	t.Run("spec", func(t *testing.T) { offSpec.report(t) })
}
