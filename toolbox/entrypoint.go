package toolbox

import (
	"context"
	"net/http"
)

// EntrypointSession describes the sandbox's entrypoint session (GET
// /process/session/entrypoint): the command the sandbox started with, as
// command "entrypoint_command". A sandbox without one gives an *APIError
// with StatusCode 404.
func (c *Client) EntrypointSession(ctx context.Context) (*Session, error) {
	var s Session
	if err := c.doJSON(ctx, http.MethodGet, "/process/session/entrypoint", nil, nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
