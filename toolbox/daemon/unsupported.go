package daemon

import "net/http"

// The route families of Daytona's toolbox API that this server does not
// implement: computer use (a desktop with mouse, keyboard, screenshots and
// recordings) and LSP (language servers). Every request under them is
// answered 501 Not Implemented in Daytona's error shape, saying so, rather
// than with an unknown route's 404.

// unsupportedRoutes serves /computeruse and /lsp.
func (s *Server) unsupportedRoutes() []route {
	return []route{
		{"/computeruse/", notSupported("computer use")},
		{"/computeruse", notSupported("computer use")},
		{"/lsp/", notSupported("LSP (language servers)")},
		{"/lsp", notSupported("LSP (language servers)")},
	}
}

// notSupported answers every request with 501 naming feature.
func notSupported(feature string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotImplemented, "",
			"%s is not supported by this server (agentbox's toolbox server): %s %s has no implementation; run it in a Daytona sandbox",
			feature, r.Method, r.URL.Path)
	}
}
