package cli

import "testing"

// TestServePreviewDomain: --preview-domain reaches the server's options;
// without it they have none (the default form of preview URLs).
func TestServePreviewDomain(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--preview-domain", "preview.example.com"}, "preview.example.com"},
	} {
		_, srv, stop := runServe(t, c.args...)
		if r := stop(); r.code != 0 {
			t.Fatalf("serve %q: %v", c.args, r)
		}
		srv.mu.Lock()
		got := srv.opts.PreviewDomain
		srv.mu.Unlock()
		if got != c.want {
			t.Errorf("serve %q: PreviewDomain %q, want %q", c.args, got, c.want)
		}
	}
}
