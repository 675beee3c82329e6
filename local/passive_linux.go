package local

import "net/http"

// passive reports whether r only watches the sandbox (PassiveRequestHeader).
func passive(r *http.Request) bool {
	return r.Method == http.MethodGet && r.Header.Get(PassiveRequestHeader) == "1"
}
